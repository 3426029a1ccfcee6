// The fused attention's kernels share this between attention.cu (the per-row kernels: decode
// steps, rows too long for shared memory) and attention_tiled.cu (the tiled f32 kernels).
#pragma once

#include <cstdint>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {

// Rows [0, split) of one group of k (or v), then rows of k2 (v2), each `width` floats.
struct AttentionRows {
  const float* a;
  const float* b;
  int64_t split, width;
  __device__ const float* row(int64_t j) const { return j < split ? a + j * width : b + (j - split) * width; }
};

// The tiled kernels' shared-memory layout: rows padded to Dq floats (a multiple of 4, for float4
// reads), score rows of Sp floats (the keys rounded up to tiles of 32), one tile's floats.
struct TiledShape {
  int Dq = 0, Sp = 0, tile_floats = 0;
};

// Blocks for the G query groups' row blocks of `rows` (a grid-stride loop past the cap).
inline unsigned attention_grid(const AttentionDesc& d, int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(d.G * ((d.T + rows - 1) / rows), int64_t{1} << 20));
}

// Fewer query rows than this take the per-row kernels (a decode step, a short prompt).
constexpr int64_t kTiledMinRows = 8;

// Whether the tiled kernels take this attention (grad: attention_grad): no run-time position, at
// least kTiledMinRows rows, some keys, and the block's score rows within the device's shared memory.
bool attention_tiled_fits(const AttentionDesc& d, bool grad);
// As launch_attention / launch_attention_grad; `finite` is null where blocks may not skip, and
// the grad's statistics are 3 floats per query row.
cudaError_t launch_attention_tiled(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                                   const AttentionDesc& d, const int* finite, cudaStream_t stream);
cudaError_t launch_attention_grad_tiled(const float* q, const float* k, const float* v, const float* dy, float* out,
                                        const AttentionDesc& d, const int* finite, float* stats, cudaStream_t stream);

}  // namespace volta::cuda
