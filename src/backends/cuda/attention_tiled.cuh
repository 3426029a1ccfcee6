// The fused attention's kernels share this between attention.cu (the per-row kernels: decode
// steps, rows too long for shared memory) and attention_tiled.cu (the tiled f32 kernels).
#pragma once

#include <cstdint>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {

// Rows [0, split) of one group of k (or v), `stride` floats apart, then rows of k2 (v2), each
// `width` floats, `width` apart.
struct AttentionRows {
  const float* a;
  const float* b;
  int64_t split, width, stride;
  __device__ const float* row(int64_t j) const { return j < split ? a + j * stride : b + (j - split) * width; }
};

// Where group g's rows start and how far apart they lie (AttentionDesc: plain or packed_heads).
__device__ inline int64_t packed_row(const AttentionDesc& d, int64_t g) {
  return g / d.heads * d.T * 3 * d.heads * d.D + g % d.heads * d.D;
}
__device__ inline int64_t qkv_stride(const AttentionDesc& d, int64_t width) { return d.heads ? 3 * d.heads * d.D : width; }
// Whether the causal mask makes query i's probability of key j exactly 0, as the forward's
// softmax writes it (also in a row whose sum is nan, a +inf score; a row that keeps no key is
// nan throughout): the p that attention_grad's dv and its stored probabilities take.
__device__ inline bool masked_zero(const AttentionDesc& d, int64_t i, int64_t j) {
  return d.causal && j > i + d.offset && i + d.offset >= 0;
}
// The output's (attention) or dy's (attention_grad) rows of group g, and their stride.
__device__ inline int64_t out_offset(const AttentionDesc& d, int64_t g) {
  return d.heads ? g / d.heads * d.T * d.heads * d.D + g % d.heads * d.D : g * d.T * d.E;
}
__device__ inline int64_t out_stride(const AttentionDesc& d) { return d.heads ? d.heads * d.D : d.E; }
// attention_grad's dq (part 0), dk (1), dv (2) of group g; rows qkv_stride(d, D) apart.
__device__ inline int64_t grad_offset(const AttentionDesc& d, int part, int64_t g) {
  return d.heads ? packed_row(d, g) + part * d.heads * d.D : (part * d.G + g) * d.T * d.D;
}
__device__ inline AttentionRows query_rows(const AttentionDesc& d, const float* q, int64_t g) {
  return {q + (d.heads ? packed_row(d, g) : g * d.T * d.D), nullptr, d.T, d.D, qkv_stride(d, d.D)};
}
__device__ inline AttentionRows dy_rows(const AttentionDesc& d, const float* dy, int64_t g) {
  return {dy + out_offset(d, g), nullptr, d.T, d.E, out_stride(d)};
}
// Group g's keys (values): the first `used` rows of its key group, then k2's (v2's).
__device__ inline AttentionRows key_rows(const AttentionDesc& d, const float* k, const float* k2, int64_t g, int64_t used) {
  const int64_t kvg = g / d.rep;
  return {k + (d.heads ? packed_row(d, g) + d.heads * d.D : kvg * d.cap * d.D), k2 ? k2 + kvg * d.S2 * d.D : nullptr, used, d.D,
          qkv_stride(d, d.D)};
}
__device__ inline AttentionRows value_rows(const AttentionDesc& d, const float* v, const float* v2, int64_t g, int64_t used) {
  const int64_t kvg = g / d.rep;
  return {v + (d.heads ? packed_row(d, g) + 2 * d.heads * d.D : kvg * d.cap * d.E), v2 ? v2 + kvg * d.S2 * d.E : nullptr, used,
          d.E, qkv_stride(d, d.E)};
}

// The tiled kernels' shared-memory layout: rows padded to Dq floats (a multiple of 4, for float4
// reads), tile rows and the block's own q and dy rows Dt floats apart (an odd count of float4s,
// so rows read together fall in different banks), score rows of Sp floats (the keys rounded up to
// tiles of 32, plus 4: rows four apart start 16 banks apart), one tile's floats.
struct TiledShape {
  int Dq = 0, Dt = 0, Sp = 0, tile_floats = 0;
};

// Blocks for the G query groups' row blocks of `rows` (a grid-stride loop past the cap). The
// launch for the groups the tensor-core kernels left (nonfinite_only) mostly reads a flag per row
// block and moves on, so a few blocks per multiprocessor walk them all: a full grid (3,072 blocks
// at the GPU-sized GPT's shape, each with the kernel's shared memory) only launched blocks that
// exit.
constexpr int64_t kLeftoverBlocks = 512;
inline unsigned attention_grid(const AttentionDesc& d, int64_t rows) {
  const int64_t cap = d.nonfinite_only ? kLeftoverBlocks : int64_t{1} << 20;
  return static_cast<unsigned>(std::min<int64_t>(d.G * ((d.T + rows - 1) / rows), cap));
}

// The device's per-block shared memory limit (opt-in), read once per process.
size_t attention_shared_limit();

// Fewer query rows than this take the per-row kernels (a decode step, a short prompt).
constexpr int64_t kTiledMinRows = 8;

// Whether the tiled kernels take this attention (grad: attention_grad): no run-time position, at
// least kTiledMinRows rows, some keys, and the block's score rows within the device's shared memory.
bool attention_tiled_fits(const AttentionDesc& d, bool grad);
// As launch_attention / launch_attention_grad; `finite` is null where blocks may not skip, and
// the grad's statistics are 3 floats per query row.
cudaError_t launch_attention_tiled(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                                   const AttentionDesc& d, const int* finite, cudaStream_t stream);
// The tensor-core kernels (attention_tf32x3.cu). The forward: whether it takes d with these operands
// (tf32x3_attention_shape, no position or k2, 16-byte aligned rows, its shared memory within the
// device's limit), and its launch, over the groups whose `finite` flag is 1.
bool attention_tf32x3_fits(const AttentionDesc& d, const float* q, const float* k, const float* v, const float* out);
cudaError_t launch_attention_tf32x3(const float* q, const float* k, const float* v, float* out, const AttentionDesc& d,
                                    const int* finite, cudaStream_t stream);
// The gradient's (3 kernels): `stats` G T float2 (each query row's log-sum-exp and sum_j p dp).
bool attention_grad_tf32x3_fits(const AttentionDesc& d, const float* q, const float* k, const float* v, const float* dy,
                                const float* out);
cudaError_t launch_attention_grad_tf32x3(const float* q, const float* k, const float* v, const float* dy, float* out,
                                         const AttentionDesc& d, const int* finite, float2* stats, cudaStream_t stream);
// `probs` (null, or 2 G T T floats): the dq kernel stores each row's probabilities and score
// gradients there, and the dk/dv kernel reads them instead of recomputing them.
cudaError_t launch_attention_grad_tiled(const float* q, const float* k, const float* v, const float* dy, float* out,
                                        const AttentionDesc& d, const int* finite, float* stats, float* probs, cudaStream_t stream);

}  // namespace volta::cuda
