// The fused attention's tiled f32 gradient: the dq kernel (scores, probabilities and ds of the
// block's query rows, stored for the dk/dv kernel where they fit) and the dk/dv kernel. The dq
// kernel and the dk/dv kernel compute each score, probability and ds with the same expressions,
// so the two halves of the gradient see the same bits. attention_tiles.cuh has the block's layout.
#include "backends/cuda/attention_tiles.cuh"

namespace volta::cuda {
namespace {

using namespace tiled;

// ---- attention_grad, part 1: dq and each query row's statistics (max, sum, sum(dp * p)) ----
// Shared memory: q and dy rows [32][Dt] each, one tile [32][Dt], p and ds [32][Sp] each.
template <int C>
__global__ void __launch_bounds__(kThreadsPerBlock) attention_tiled_dq_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                              const float* __restrict__ v, const float* __restrict__ dy,
                                                                              float* __restrict__ dq, AttentionDesc d, TiledShape ts,
                                                                              const int* __restrict__ finite, float* __restrict__ stats,
                                                                              float* __restrict__ probs) {
  extern __shared__ float4 sm4[];
  const int D = static_cast<int>(d.D), Dq = ts.Dq, Sp = ts.Sp;
  float* qs = reinterpret_cast<float*>(sm4);
  float* dys = qs + kRows * ts.Dt;
  float* tile = dys + kRows * ts.Dt;
  float* ps = tile + ts.tile_floats;
  float* dps = ps + kRows * Sp;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t T = d.T, row_blocks = (T + kRows - 1) / kRows;
  const float scale = static_cast<float>(d.scale);
  for (int64_t b = blockIdx.x; b < d.G * row_blocks; b += gridDim.x) {
    const int64_t g = b / row_blocks, i0 = (b % row_blocks) * kRows;
    if (d.nonfinite_only && finite[g] != 0) continue;  // the tensor-core kernels took it (flags always given then)
    const AttentionRows keys = key_rows(d, k, nullptr, g, T), vals = value_rows(d, v, nullptr, g, T);
    const int64_t end = keys_end(d, finite, g, i0, T);
    const int n_keys = static_cast<int>(end);  // the score rows' length, an int as Sp is
    load_tile(qs, ts.Dt, Dq, query_rows(d, q, g), i0, T - i0, D);
    load_tile(dys, ts.Dt, Dq, dy_rows(d, dy, g), i0, T - i0, D);
    score_rows<C>(qs, Dq, ts.Dt, tile, keys, end, i0, d, scale, ps, Sp, warp, lane);
    // dp = dy . v, the same dot products as the scores (no mask: only read where p is)
    AttentionDesc open = d;
    open.causal = false;
    score_rows<C>(dys, Dq, ts.Dt, tile, vals, end, i0, open, 1.0f, dps, Sp, warp, lane);
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      float m, l;
      softmax_row(ps + row * Sp, n_keys, lane, m, l);
      float part = 0.0f;
      for (int j = lane; j < n_keys; j += 32) part = fmaf(dps[row * Sp + j], ps[row * Sp + j], part);
      const float pdp = warp_sum(part);
      for (int j = lane; j < n_keys; j += 32) dps[row * Sp + j] = score_grad(ps[row * Sp + j], dps[row * Sp + j], pdp, scale);
      const int64_t i = i0 + row;
      if (i >= T) continue;
      if (probs != nullptr)  // the row's p and ds for the dk/dv kernel, keys [0, end)
        for (int j = lane; j < n_keys; j += 32) {
          probs[(g * T + i) * T + j] = masked_zero(d, i, j) ? 0.0f : ps[row * Sp + j];
          probs[((d.G + g) * T + i) * T + j] = dps[row * Sp + j];
        }
      if (lane == 0) {
        float* st = stats + (g * T + i) * 3;
        st[0] = m, st[1] = l, st[2] = pdp;
      }
    }
    __syncthreads();
    weighted_sum<C>(dps, Sp, tile, keys, end, i0, T, dq + grad_offset(d, 0, g), qkv_stride(d, D), warp, lane);
  }
}

// The dk/dv block's p and ds for query tile t0.. recomputed, with the dq kernel's expressions
// (so its bits): the scores and dp from the block's key and value rows `kr`, `vr` and the tile's
// q and dy rows (qt, dyt), the rows' statistics read into `st`; into pt and dst [32 keys][kPs].
// Ends with the block synchronised.
__device__ inline void recompute_probs(const float* kr, const float* vr, const float* qt, const float* dyt, const float* stats,
                                       float* st, float* pt, float* dst, const AttentionDesc& d, int64_t g, int64_t j0, int64_t t0,
                                       int Dq, int Dt, float scale) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t T = d.T;
  for (int t = static_cast<int>(threadIdx.x); t < kTile * 3; t += blockDim.x) st[t] = t0 + t / 3 < T ? stats[(g * T + t0) * 3 + t] : 0.0f;
  __syncthreads();
  const int64_t i = t0 + lane;  // this lane's query row
  float s[kRowsPerWarp], dp[kRowsPerWarp];
  dots8(kr + warp * kRowsPerWarp * Dq, Dq, qt + lane * Dt, s);
  dots8(vr + warp * kRowsPerWarp * Dq, Dq, dyt + lane * Dt, dp);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int row = warp * kRowsPerWarp + r;
    const int64_t j = j0 + row;
    float p = 0.0f, ds = 0.0f;
    if (i < T && j < T) {
      p = masked_zero(d, i, j) ? 0.0f : probability(masked_score(s[r], i, j, T, d, scale), st[lane * 3], st[lane * 3 + 1]);
      ds = score_grad(p, dp[r], st[lane * 3 + 2], scale);
    }
    pt[row * kPs + lane] = p;
    dst[row * kPs + lane] = ds;
  }
  __syncthreads();
}

// The dq kernel's stored probabilities and score gradients ([G, T, T] each, query rows by key
// columns) for the dk/dv block's keys j0.. and a query tile: each thread 8 of each
// (query row warp + 4 u of the tile, its lane's key), the next tile's loaded while the block
// works on the current one, and stored as they are read, query rows of kTile keys, for
// weighted_cols (a warp's stores then hit 32 banks; transposed, four lanes shared each bank).
// Zeros where the dq kernel wrote none: past T, and keys past its block's causal end, where the
// recomputed values are zeros too (masked, every operand finite).
struct StoredProbs {
  const float* p_rows;
  const float* ds_rows;
  const AttentionDesc& d;
  const int* finite;
  int64_t g, j0;
  float p[8], ds[8];

  __device__ void fetch(int64_t t0) {
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
    const int64_t j = j0 + lane;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int64_t i = t0 + warp + 4 * u;
      const bool stored = i < d.T && j < keys_end(d, finite, g, i / kRows * kRows, d.T);
      p[u] = stored ? p_rows[i * d.T + j] : 0.0f;
      ds[u] = stored ? ds_rows[i * d.T + j] : 0.0f;
    }
  }
  __device__ void fill(float* pt, float* dst, int64_t t0) {
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      pt[(warp + 4 * u) * kTile + lane] = p[u];
      dst[(warp + 4 * u) * kTile + lane] = ds[u];
    }
    if (t0 + kTile < d.T) fetch(t0 + kTile);
  }
};

// ---- attention_grad, part 2: dk and dv per key row, over the query rows that see it ----
// Shared memory: key and value rows [32][Dq] each, q and dy tiles [32][Dt] each, the tile's p
// and ds [32 keys][kPs] each (kStored: [32 queries][kTile]), and its rows' statistics [32][3]. kStored: p and ds come from the
// dq kernel (StoredProbs), so neither the key and value rows nor the statistics are read.
// kQuad (stored, head width 64): a thread's 4 keys (first rg) by 4 columns (from cq), through
// weighted_cols_4x4.
template <int C, bool kStored, bool kQuad>
__global__ void __launch_bounds__(kThreadsPerBlock, kDkvMinBlocks) attention_tiled_dkv_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                               const float* __restrict__ v, const float* __restrict__ dy,
                                                                               float* __restrict__ grads, AttentionDesc d, TiledShape ts,
                                                                               const int* __restrict__ finite,
                                                                               const float* __restrict__ stats,
                                                                               const float* __restrict__ probs) {
  extern __shared__ float4 sm4[];
  const int D = static_cast<int>(d.D), Dq = ts.Dq, Dt = ts.Dt;
  float* kr = reinterpret_cast<float*>(sm4);
  float* vr = kr + kRows * Dq;
  float* qt = vr + kRows * Dq;
  float* dyt = qt + kTile * Dt;
  float* pt = dyt + kTile * Dt;
  float* dst = pt + kRows * kPs;
  float* st = dst + kRows * kPs;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t T = d.T, row_blocks = (T + kRows - 1) / kRows;
  const float scale = static_cast<float>(d.scale);
  for (int64_t b = blockIdx.x; b < d.G * row_blocks; b += gridDim.x) {
    const int64_t g = b / row_blocks, j0 = (b % row_blocks) * kRows;
    if (d.nonfinite_only && finite[g] != 0) continue;  // the tensor-core kernels took it
    const bool skip = finite != nullptr && finite[g] != 0;
    const int64_t start = skip ? min(max(j0 - d.offset, int64_t{0}), T) : 0;  // the first query row that sees a key here
    if constexpr (!kStored) {
      load_tile(kr, Dq, Dq, key_rows(d, k, nullptr, g, T), j0, T - j0, D);
      load_tile(vr, Dq, Dq, value_rows(d, v, nullptr, g, T), j0, T - j0, D);
    }
    const AttentionRows qrows = query_rows(d, q, g), dyrows = dy_rows(d, dy, g);
    float dk_acc[kRowsPerWarp][C] = {}, dv_acc[kRowsPerWarp][C] = {};
    float4 dk4[4] = {}, dv4[4] = {};
    const int rg = warp * kRowsPerWarp + lane / 16 * 4, cq = lane % 16 * 4;
    TileStream<2 * C> q_in(qrows, start, T, Dq, D, Dt), dy_in(dyrows, start, T, Dq, D, Dt);
    StoredProbs stored{kStored ? probs + g * T * T : nullptr, kStored ? probs + (d.G + g) * T * T : nullptr, d, finite, g, j0, {}, {}};
    if constexpr (kStored) stored.fetch(start);
    for (int64_t t0 = start; t0 < T; t0 += kTile) {
      q_in.fill(qt, t0);
      dy_in.fill(dyt, t0);
      if constexpr (kStored) {
        stored.fill(pt, dst, t0);
        __syncthreads();
      } else {
        recompute_probs(kr, vr, qt, dyt, stats, st, pt, dst, d, g, j0, t0, Dq, Dt, scale);
      }
      const int n = static_cast<int>(min(int64_t{kTile}, T - t0));
      if constexpr (kQuad) {
        weighted_cols_4x4(pt + rg, kTile, dyt, Dt, cq, n, dv4);
        weighted_cols_4x4(dst + rg, kTile, qt, Dt, cq, n, dk4);
      } else if constexpr (kStored) {
        weighted_cols<C>(pt + warp * kRowsPerWarp, kTile, dyt, Dt, D, n, lane, dv_acc);
        weighted_cols<C>(dst + warp * kRowsPerWarp, kTile, qt, Dt, D, n, lane, dk_acc);
      } else {
        weighted_rows<C>(pt + warp * kRowsPerWarp * kPs, kPs, dyt, Dt, D, n, lane, dv_acc);
        weighted_rows<C>(dst + warp * kRowsPerWarp * kPs, kPs, qt, Dt, D, n, lane, dk_acc);
      }
      __syncthreads();
    }
    float* dk = grads + grad_offset(d, 1, g);
    float* dv = grads + grad_offset(d, 2, g);
    const int64_t rs = qkv_stride(d, D);
    if constexpr (kQuad) {
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const int64_t j = j0 + rg + a;
        if (j >= T) continue;
        store4(dk + j * rs + cq, dk4[a]);
        store4(dv + j * rs + cq, dv4[a]);
      }
    } else {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t j = j0 + warp * kRowsPerWarp + r;
        if (j >= T) continue;
#pragma unroll
        for (int c = 0; c < C; ++c)
          if (lane + 32 * c < D) {
            dk[j * rs + lane + 32 * c] = dk_acc[r][c];
            dv[j * rs + lane + 32 * c] = dv_acc[r][c];
          }
      }
    }
    __syncthreads();  // kr, vr are reloaded by the next block
  }
}

template <int C>
struct LaunchGrad {
  static cudaError_t run(const float* q, const float* k, const float* v, const float* dy, float* out, const AttentionDesc& d,
                         const TiledShape& ts, const int* finite, float* stats, float* probs, cudaStream_t stream) {
    const size_t a = dq_shared(ts), b = dkv_shared(ts);
    if (cudaError_t e = allow_shared(attention_tiled_dq_kernel<C>, a); e != cudaSuccess) return e;
    attention_tiled_dq_kernel<C><<<attention_grid(d, kRows), kThreadsPerBlock, a, stream>>>(q, k, v, dy, out, d, ts, finite, stats, probs);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    auto dkv = probs == nullptr ? attention_tiled_dkv_kernel<C, false, false>
               : C == 2 && d.D == 64 ? attention_tiled_dkv_kernel<C, true, (C == 2)>
                                     : attention_tiled_dkv_kernel<C, true, false>;
    if (cudaError_t e = allow_shared(dkv, b); e != cudaSuccess) return e;
    dkv<<<attention_grid(d, kRows), kThreadsPerBlock, b, stream>>>(q, k, v, dy, out, d, ts, finite, stats, probs);
    return cudaGetLastError();
  }
};

}  // namespace

cudaError_t launch_attention_grad_tiled(const float* q, const float* k, const float* v, const float* dy, float* out,
                                        const AttentionDesc& d, const int* finite, float* stats, float* probs, cudaStream_t stream) {
  return by_lane_dims<LaunchGrad>(d.D, q, k, v, dy, out, d, tiled_shape(d, d.T), finite, stats, probs, stream);
}

}  // namespace volta::cuda
