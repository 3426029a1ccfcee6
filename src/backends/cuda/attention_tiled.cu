// The fused attention's tiled f32 forward, for shapes whose score rows fit in shared memory
// (attention.cu takes the rest: decode steps, long rows, no keys); attention_tiles.cuh has the
// block's layout and the parts it shares with the gradient's kernels.
#include "backends/cuda/attention_tiles.cuh"

namespace volta::cuda {
namespace {

using namespace tiled;

// ---- attention: out [G, T, E] (or packed_heads' [.., T, H D]) ----
// Shared memory: q rows [32][Dt], one tile [32][max(Dt, E)], scores [32][Sp].
template <int C>
__global__ void __launch_bounds__(kThreadsPerBlock) attention_tiled_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                           const float* __restrict__ v, const float* __restrict__ k2,
                                                                           const float* __restrict__ v2, float* __restrict__ out,
                                                                           AttentionDesc d, TiledShape ts, const int* __restrict__ finite) {
  extern __shared__ float4 sm4[];
  float* qs = reinterpret_cast<float*>(sm4);
  float* tile = qs + kRows * ts.Dt;
  float* sc = tile + ts.tile_floats;
  const int D = static_cast<int>(d.D), Dq = ts.Dq;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t row_blocks = (d.T + kRows - 1) / kRows, S = d.S1 + d.S2;
  const float scale = static_cast<float>(d.scale);
  for (int64_t b = blockIdx.x; b < d.G * row_blocks; b += gridDim.x) {
    const int64_t g = b / row_blocks, i0 = (b % row_blocks) * kRows;
    if (d.nonfinite_only && finite[g] != 0) continue;  // the tensor-core kernel took it (flags always given then)
    const AttentionRows keys = key_rows(d, k, k2, g, d.S1), vals = value_rows(d, v, v2, g, d.S1);
    const int64_t end = keys_end(d, finite, g, i0, S);
    load_tile(qs, ts.Dt, Dq, query_rows(d, q, g), i0, d.T - i0, D);
    score_rows<C>(qs, Dq, ts.Dt, tile, keys, end, i0, d, scale, sc, ts.Sp, warp, lane);
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float m, l;
      softmax_row(sc + (warp * kRowsPerWarp + r) * ts.Sp, static_cast<int>(end), lane, m, l);
    }
    __syncthreads();
    weighted_sum<C>(sc, ts.Sp, tile, vals, end, i0, d.T, out + out_offset(d, g), out_stride(d), warp, lane);
  }
}

// The device's per-block shared memory limit (opt-in).
size_t read_shared_limit() {
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return 48 * 1024;
  return static_cast<size_t>(bytes);
}

template <int C>
struct LaunchForward {
  static cudaError_t run(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                         const AttentionDesc& d, const TiledShape& ts, const int* finite, cudaStream_t stream) {
    const size_t shared = forward_shared(ts);
    if (cudaError_t e = allow_shared(attention_tiled_kernel<C>, shared); e != cudaSuccess) return e;
    attention_tiled_kernel<C><<<attention_grid(d, kRows), kThreadsPerBlock, shared, stream>>>(q, k, v, k2, v2, out, d, ts, finite);
    return cudaGetLastError();
  }
};

}  // namespace

size_t attention_shared_limit() {
  static const size_t limit = read_shared_limit();  // once per process
  return limit;
}

bool attention_tiled_fits(const AttentionDesc& d, bool grad) {
  const size_t limit = attention_shared_limit();
  const int64_t keys = grad ? d.T : d.S1 + d.S2;
  if (d.position != nullptr || d.T < kTiledMinRows || keys == 0 || d.D == 0 || d.D > kAttentionMaxDim || d.E > kAttentionMaxDim)
    return false;
  const TiledShape ts = tiled_shape(d, keys);
  return (grad ? std::max(dq_shared(ts), dkv_shared(ts)) : forward_shared(ts)) <= limit;
}

cudaError_t launch_attention_tiled(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                                   const AttentionDesc& d, const int* finite, cudaStream_t stream) {
  // C from the wider of the two head widths: TileStream<2 C> holds a tile of either
  return by_lane_dims<LaunchForward>(std::max(d.D, d.E), q, k, v, k2, v2, out, d, tiled_shape(d, d.S1 + d.S2), finite, stream);
}

}  // namespace volta::cuda
