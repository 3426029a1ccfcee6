// The attention family, mirroring ref_attention.cpp.
//
// attention and attention_grad (kernels.h has the contract) take the tiled f32 kernels of
// attention_tiled.cu where those fit; here are the per-row kernels for the rest (decode steps,
// a few rows, score rows longer than shared memory holds): a block of 4 warps takes 16 rows
// (queries; keys for dk and dv), 4 per warp, and walks tiles of 32 rows of the other side held
// in shared memory, one per lane. A lane's score is a dot product in double rounded to f32, the
// reference's; a row's statistics come from butterflies over the lanes, after which every lane
// holds the same value; a row's weighted sums run over the tile's rows in order, in double.
//
// rope (rope_rows): one thread per pair (x1, x2) of a row, each product rounded to f32 before the
// add (no fused multiply-add), so the bits are the CPU's.
#include <cmath>

#include "backends/cuda/attention_tiled.cuh"

namespace volta::cuda {
namespace {

constexpr int kWarps = 4, kRowsPerWarp = 4, kRows = kWarps * kRowsPerWarp, kTile = 32;
constexpr int kAttnThreads = kWarps * 32;
constexpr int kLaneDims = static_cast<int>(kAttentionMaxDim / 32);  // output dims per lane
constexpr unsigned kFull = 0xffffffffu;
constexpr double kNegInf = -INFINITY;

// dst[r][0, width) (row stride `stride`) = rows r0 + r of src, zeros past `count` rows.
__device__ inline void load_rows(float* dst, int stride, const AttentionRows& src, int64_t r0, int64_t count, int n_rows, int width) {
  for (int t = static_cast<int>(threadIdx.x); t < n_rows * width; t += blockDim.x) {
    const int r = t / width, c = t % width;
    dst[r * stride + c] = r < count ? src.row(r0 + r)[c] : 0.0f;
  }
}

// A warp's kRowsPerWarp dot products, row r of a (a + r * a_step) with row r of b: each the
// reference's chain over d in order, in double, rounded to f32. The rows' chains interleave, so
// the multiply-adds of one row wait on each other, not those of all rows.
__device__ inline void dots(const float* a, int a_step, const float* b, int b_step, int D, float (&out)[kRowsPerWarp]) {
  double s[kRowsPerWarp] = {};
  for (int d = 0; d < D; ++d)
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      s[r] = fma(static_cast<double>(a[r * a_step + d]), static_cast<double>(b[r * b_step + d]), s[r]);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) out[r] = static_cast<float>(s[r]);
}

// acc[r][c] += w[r] of lane jj times rows[jj][lane + 32 c], for the tile's rows jj = 0..n-1 in
// order: each output's sum over the tile, in double.
__device__ inline void accumulate(const float (&w)[kRowsPerWarp], const float* rows, int stride, int width, int n, int lane,
                                  double (&acc)[kRowsPerWarp][kLaneDims]) {
  for (int jj = 0; jj < n; ++jj)
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const double wj = __shfl_sync(kFull, w[r], jj);
#pragma unroll
      for (int c = 0; c < kLaneDims; ++c)
        if (lane + 32 * c < width) acc[r][c] = fma(wj, static_cast<double>(rows[jj * stride + lane + 32 * c]), acc[r][c]);
    }
}

// A row's softmax statistics over the keys so far: the max m (NaN-ignoring) and the sum l of
// exp(z - m). While every z is -inf nothing is added: the row's result is nan if that lasts
// (as the reference's 0/0), and those terms are exact zeros if a finite z comes later.
__device__ inline void add_scores(double z, double& m, double& l) {
  const double m_new = fmax(m, warp_max(z));
  if (m_new == kNegInf) return;
  const double terms = warp_sum(exp(z - m_new));
  l = l * exp(m - m_new) + terms;
  m = m_new;
}

// The probability the reference stores: f32(exp(z - m) / l).
__device__ inline float probability(double z, double m, double l) { return static_cast<float>(exp(z - m) / l); }

// The warp's query rows i0.. (rows of `q`, stride D) scored against this lane's key j (`key`):
// scale * q . k as the reference rounds it, -inf where the causal mask drops it or past `end`.
struct Mask {
  int64_t end;  // keys from here on are left out (skipped by a causal block, or past the keys)
  bool causal;
  int64_t offset;
  double scale;
};
__device__ inline void scaled_scores(const float* q, const float* key, int D, int64_t j, int64_t i0, const Mask& mk,
                                     double (&z)[kRowsPerWarp]) {
  float s[kRowsPerWarp];
  dots(q, D, key, 0, D, s);
  for (int r = 0; r < kRowsPerWarp; ++r)
    z[r] = j >= mk.end || (mk.causal && j > i0 + r + mk.offset) ? kNegInf : mk.scale * static_cast<double>(s[r]);
}

// The first pass over keys [0, end): each of the warp's rows' softmax max m and sum l. `ks` is
// the block's key tile (row stride Dp).
__device__ inline void softmax_stats(const float* q, float* ks, int D, int Dp, const AttentionRows& keys, int64_t i0, const Mask& mk,
                                     int lane, double (&m)[kRowsPerWarp], double (&l)[kRowsPerWarp]) {
  double z[kRowsPerWarp];
  for (int r = 0; r < kRowsPerWarp; ++r) m[r] = kNegInf, l[r] = 0.0;
  for (int64_t t0 = 0; t0 < mk.end; t0 += kTile) {
    load_rows(ks, Dp, keys, t0, mk.end - t0, kTile, D);
    __syncthreads();
    scaled_scores(q, ks + lane * Dp, D, t0 + lane, i0, mk, z);
    for (int r = 0; r < kRowsPerWarp; ++r) add_scores(z[r], m[r], l[r]);
    __syncthreads();
  }
}

struct Window {  // the keys of one block's query rows after the run-time position
  int64_t S1, offset;
  bool bad;
};
__device__ inline Window window(const AttentionDesc& d) {
  Window w{d.S1, d.offset, false};
  if (d.position != nullptr) {
    const int64_t p = *d.position;
    w.bad = p < 0 || p > d.cap - d.T;
    w.S1 = p + d.T;
    w.offset = min(max(d.offset, -d.cap - 1), d.cap) + p;
  }
  return w;
}

// Whether rows [0, n) of `rows` are finite, as the block's threads see their share of them: a
// warp per row, its lanes along it (no division per element), kRowsInFlight rows a warp at a
// time with all their loads issued before any is tested. One row at a time, each warp waited a
// memory latency per row, and the check took about 60 us a call at the GPU-sized GPT's shape
// (three or four 12 MB operands: about 10 us of the H200's bandwidth).
constexpr int kRowsInFlight = 8;
__device__ inline bool rows_finite(const AttentionRows& rows, int64_t n) {
  bool ok = true;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t step = blockDim.x / 32;
  for (int64_t r0 = threadIdx.x / 32; r0 < n; r0 += kRowsInFlight * step)
    for (int64_t c = lane; c < rows.width; c += 32) {
      float x[kRowsInFlight];
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) {
        const int64_t r = r0 + u * step;
        x[u] = r < n ? rows.row(r)[c] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kRowsInFlight; ++u) ok &= static_cast<bool>(isfinite(x[u]));
    }
  return ok;
}

// finite[g] = 1 when every row group g reads (q, dy: its own, when given; k, v: its key group's
// used rows, k2's and v2's) is finite: then a causal block may skip what the mask zeroes.
__global__ void __launch_bounds__(kThreads) finite_kernel(const float* q, const float* dy, const float* k, const float* v, const float* k2,
                                                          const float* v2, AttentionDesc d, int* finite) {
  for (int64_t g = blockIdx.x; g < d.G; g += gridDim.x) {
    const int64_t keys = d.S1 + d.S2;
    bool ok = rows_finite(key_rows(d, k, k2, g, d.S1), keys) && rows_finite(value_rows(d, v, v2, g, d.S1), keys);
    if (q) ok = rows_finite(query_rows(d, q, g), d.T) && ok;
    if (dy) ok = rows_finite(dy_rows(d, dy, g), d.T) && ok;
    ok = __syncthreads_and(ok);
    if (threadIdx.x == 0) finite[g] = ok ? 1 : 0;
  }
}

// ---- attention ----
// Shared memory: q rows [kRows][D], a key tile [kTile][D + 1], a value tile [kTile][E].
__global__ void __launch_bounds__(kAttnThreads) attention_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                 const float* __restrict__ v, const float* __restrict__ k2,
                                                                 const float* __restrict__ v2, float* __restrict__ out,
                                                                 AttentionDesc d, const int* __restrict__ finite) {
  extern __shared__ float sm[];
  const int D = static_cast<int>(d.D), E = static_cast<int>(d.E), Dp = D + 1;
  float* qs = sm;
  float* ks = qs + kRows * D;
  float* vs = ks + kTile * Dp;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t row_blocks = (d.T + kRows - 1) / kRows;
  const Window w = window(d);
  const int64_t S = w.S1 + d.S2;
  for (int64_t b = blockIdx.x; b < d.G * row_blocks; b += gridDim.x) {
    const int64_t g = b / row_blocks, i0 = (b % row_blocks) * kRows;
    if (d.nonfinite_only && finite[g] != 0) continue;  // the tensor-core kernel took it (flags always given then)
    float* o = out + out_offset(d, g);
    const int64_t o_rs = out_stride(d);
    if (w.bad) {
      for (int64_t t = threadIdx.x; t < kRows * E; t += blockDim.x)
        if (i0 + t / E < d.T) o[(i0 + t / E) * o_rs + t % E] = NAN;
      continue;
    }
    const AttentionRows keys = key_rows(d, k, k2, g, w.S1), vals = value_rows(d, v, v2, g, w.S1);
    const bool skip = finite != nullptr && finite[g] != 0;  // only passed for a causal mask with offset >= 0
    const int64_t end = skip ? min(max(i0 + kRows + w.offset, int64_t{0}), S) : S;  // keys any of the rows keeps
    load_rows(qs, D, query_rows(d, q, g), i0, d.T - i0, kRows, D);
    __syncthreads();
    const float* my_q = qs + warp * kRowsPerWarp * D;
    const int64_t my_i0 = i0 + warp * kRowsPerWarp;
    const Mask mk{end, d.causal, w.offset, d.scale};
    double m[kRowsPerWarp], l[kRowsPerWarp], z[kRowsPerWarp];
    softmax_stats(my_q, ks, D, Dp, keys, my_i0, mk, lane, m, l);
    double acc[kRowsPerWarp][kLaneDims] = {};
    for (int64_t t0 = 0; t0 < end; t0 += kTile) {
      load_rows(ks, Dp, keys, t0, end - t0, kTile, D);
      load_rows(vs, E, vals, t0, end - t0, kTile, E);
      __syncthreads();
      float p[kRowsPerWarp];
      scaled_scores(my_q, ks + lane * Dp, D, t0 + lane, my_i0, mk, z);
      for (int r = 0; r < kRowsPerWarp; ++r) p[r] = probability(z[r], m[r], l[r]);
      accumulate(p, vs, E, E, static_cast<int>(min(int64_t{kTile}, end - t0)), lane, acc);
      __syncthreads();
    }
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = i0 + warp * kRowsPerWarp + r;
      if (i >= d.T) continue;
#pragma unroll
      for (int c = 0; c < kLaneDims; ++c)
        if (lane + 32 * c < E) o[i * o_rs + lane + 32 * c] = m[r] == kNegInf ? NAN : static_cast<float>(acc[r][c]);
    }
  }
}

// ---- attention_grad, part 1: dq and each query row's statistics ----
// Shared memory: q and dy rows [kRows][D] each, key and value tiles [kTile][D + 1] each.
__global__ void __launch_bounds__(kAttnThreads) attention_dq_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                    const float* __restrict__ v, const float* __restrict__ dy,
                                                                    float* __restrict__ dq, AttentionDesc d,
                                                                    const int* __restrict__ finite, double* __restrict__ stats) {
  extern __shared__ float sm[];
  const int D = static_cast<int>(d.D), Dp = D + 1;
  float* qs = sm;
  float* dys = qs + kRows * D;
  float* ks = dys + kRows * D;
  float* vs = ks + kTile * Dp;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t T = d.T, row_blocks = (T + kRows - 1) / kRows;
  for (int64_t b = blockIdx.x; b < d.G * row_blocks; b += gridDim.x) {
    const int64_t g = b / row_blocks, i0 = (b % row_blocks) * kRows;
    if (d.nonfinite_only && finite[g] != 0) continue;  // the tensor-core kernels took it
    const AttentionRows keys = key_rows(d, k, nullptr, g, T), vals = value_rows(d, v, nullptr, g, T);
    const bool skip = d.causal && d.offset >= 0 && finite[g] != 0;
    const int64_t end = skip ? min(max(i0 + kRows + d.offset, int64_t{0}), T) : T;
    load_rows(qs, D, query_rows(d, q, g), i0, T - i0, kRows, D);
    load_rows(dys, D, dy_rows(d, dy, g), i0, T - i0, kRows, D);
    __syncthreads();
    const float* my_q = qs + warp * kRowsPerWarp * D;
    const float* my_dy = dys + warp * kRowsPerWarp * D;
    const int64_t my_i0 = i0 + warp * kRowsPerWarp;
    const Mask mk{end, d.causal, d.offset, d.scale};
    // With the key and value tiles loaded: the scores and dp = dy . v (0 past the keys).
    auto scores = [&](int64_t t0, double (&z)[kRowsPerWarp], float (&dp)[kRowsPerWarp]) {
      scaled_scores(my_q, ks + lane * Dp, D, t0 + lane, my_i0, mk, z);
      dots(my_dy, D, vs + lane * Dp, 0, D, dp);
      if (t0 + lane >= end)
        for (int r = 0; r < kRowsPerWarp; ++r) dp[r] = 0.0f;
    };
    double m[kRowsPerWarp], l[kRowsPerWarp], pdp[kRowsPerWarp] = {}, z[kRowsPerWarp];
    float dp[kRowsPerWarp];
    softmax_stats(my_q, ks, D, Dp, keys, my_i0, mk, lane, m, l);
    // sum over the keys of dp * p, dp = dy . v (each rounded to f32 as the reference stores it)
    for (int64_t t0 = 0; t0 < end; t0 += kTile) {
      load_rows(ks, Dp, keys, t0, end - t0, kTile, D);
      load_rows(vs, Dp, vals, t0, end - t0, kTile, D);
      __syncthreads();
      scores(t0, z, dp);
      for (int r = 0; r < kRowsPerWarp; ++r) pdp[r] += warp_sum(static_cast<double>(dp[r]) * probability(z[r], m[r], l[r]));
      __syncthreads();
    }
    double acc[kRowsPerWarp][kLaneDims] = {};
    for (int64_t t0 = 0; t0 < end; t0 += kTile) {
      load_rows(ks, Dp, keys, t0, end - t0, kTile, D);
      load_rows(vs, Dp, vals, t0, end - t0, kTile, D);
      __syncthreads();
      float ds[kRowsPerWarp];
      scores(t0, z, dp);
      for (int r = 0; r < kRowsPerWarp; ++r)
        ds[r] = static_cast<float>(d.scale * probability(z[r], m[r], l[r]) * (dp[r] - pdp[r]));
      accumulate(ds, ks, Dp, D, static_cast<int>(min(int64_t{kTile}, end - t0)), lane, acc);
      __syncthreads();
    }
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = i0 + warp * kRowsPerWarp + r;
      if (i >= T) continue;
#pragma unroll
      for (int c = 0; c < kLaneDims; ++c)
        if (lane + 32 * c < D) dq[grad_offset(d, 0, g) + i * qkv_stride(d, D) + lane + 32 * c] = static_cast<float>(acc[r][c]);
      if (lane == 0) {
        double* st = stats + (g * T + i) * 3;
        st[0] = m[r], st[1] = l[r], st[2] = pdp[r];
      }
    }
  }
}

// ---- attention_grad, part 2: dk and dv, per key row, over the query rows that see it ----
// Shared memory: key and value rows [kRows][D] each, q and dy tiles [kTile][D + 1] each, the
// tile's statistics [kTile][3] (doubles, after the floats).
__global__ void __launch_bounds__(kAttnThreads) attention_dkv_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                     const float* __restrict__ v, const float* __restrict__ dy,
                                                                     float* __restrict__ grads, AttentionDesc d, const int* __restrict__ finite,
                                                                     const double* __restrict__ stats) {
  extern __shared__ float sm[];
  const int D = static_cast<int>(d.D), Dp = D + 1;
  float* kr = sm;
  float* vr = kr + kRows * D;
  float* qt = vr + kRows * D;
  float* dyt = qt + kTile * Dp;
  double* st = reinterpret_cast<double*>(sm + ((2 * kRows * D + 2 * kTile * Dp + 1) / 2) * 2);
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t T = d.T, row_blocks = (T + kRows - 1) / kRows;
  for (int64_t b = blockIdx.x; b < d.G * row_blocks; b += gridDim.x) {
    const int64_t g = b / row_blocks, j0 = (b % row_blocks) * kRows;
    if (d.nonfinite_only && finite[g] != 0) continue;  // the tensor-core kernels took it
    const bool skip = d.causal && d.offset >= 0 && finite[g] != 0;
    const int64_t start = skip ? min(max(j0 - d.offset, int64_t{0}), T) : 0;  // the first query row that sees a key here
    load_rows(kr, D, key_rows(d, k, nullptr, g, T), j0, T - j0, kRows, D);
    load_rows(vr, D, value_rows(d, v, nullptr, g, T), j0, T - j0, kRows, D);
    const AttentionRows qrows = query_rows(d, q, g), dyrows = dy_rows(d, dy, g);
    double dk_acc[kRowsPerWarp][kLaneDims] = {}, dv_acc[kRowsPerWarp][kLaneDims] = {};
    for (int64_t t0 = start; t0 < T; t0 += kTile) {
      load_rows(qt, Dp, qrows, t0, T - t0, kTile, D);
      load_rows(dyt, Dp, dyrows, t0, T - t0, kTile, D);
      for (int t = static_cast<int>(threadIdx.x); t < kTile * 3; t += blockDim.x)
        st[t] = t0 + t / 3 < T ? stats[(g * T + t0) * 3 + t] : 0.0;
      __syncthreads();
      const int64_t i = t0 + lane;  // this lane's query row
      float p[kRowsPerWarp], ds[kRowsPerWarp], s[kRowsPerWarp], dp[kRowsPerWarp];
      dots(qt + lane * Dp, 0, kr + warp * kRowsPerWarp * D, D, D, s);
      dots(dyt + lane * Dp, 0, vr + warp * kRowsPerWarp * D, D, D, dp);
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int64_t j = j0 + warp * kRowsPerWarp + r;
        p[r] = ds[r] = 0.0f;
        if (i >= T || j >= T) continue;
        const double z = d.causal && j > i + d.offset ? kNegInf : d.scale * static_cast<double>(s[r]);
        p[r] = masked_zero(d, i, j) ? 0.0f : probability(z, st[lane * 3], st[lane * 3 + 1]);
        ds[r] = static_cast<float>(d.scale * p[r] * (dp[r] - st[lane * 3 + 2]));
      }
      const int n = static_cast<int>(min(int64_t{kTile}, T - t0));
      accumulate(p, dyt, Dp, D, n, lane, dv_acc);
      accumulate(ds, qt, Dp, D, n, lane, dk_acc);
      __syncthreads();
    }
    float* dk = grads + grad_offset(d, 1, g);
    float* dv = grads + grad_offset(d, 2, g);
    const int64_t rs = qkv_stride(d, D);
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t j = j0 + warp * kRowsPerWarp + r;
      if (j >= T) continue;
#pragma unroll
      for (int c = 0; c < kLaneDims; ++c)
        if (lane + 32 * c < D) {
          dk[j * rs + lane + 32 * c] = static_cast<float>(dk_acc[r][c]);
          dv[j * rs + lane + 32 * c] = static_cast<float>(dv_acc[r][c]);
        }
    }
    __syncthreads();  // kr, vr are reloaded by the next block
  }
}

__global__ void rope_kernel(const float* x, const float* cos, const float* sin, const int32_t* position, float* out,
                            int64_t rows, int64_t T, int64_t half, int64_t table_rows) {
  const int64_t p0 = position ? *position : 0;
  const bool bad = p0 < 0 || p0 > table_rows - T;
  const int64_t n = rows * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half, j = i % half;
    float* y = out + r * 2 * half;
    if (bad) {
      y[j] = y[half + j] = NAN;
      continue;
    }
    const float* xr = x + r * 2 * half;
    const int64_t t = (p0 + r % T) * half + j;
    const float c = cos[t], s = sin[t], x1 = xr[j], x2 = xr[half + j];
    y[j] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    y[half + j] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
}

}  // namespace

cudaError_t launch_rope(const float* x, const float* cos, const float* sin, const int32_t* position, float* out, int64_t rows,
                        int64_t T, int64_t half, int64_t table_rows, cudaStream_t stream) {
  const int64_t n = rows * half;
  if (n == 0) return cudaSuccess;
  rope_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, cos, sin, position, out, rows, T, half, table_rows);
  return cudaGetLastError();
}

namespace {

// The f32 kernels for d once the flags are set: the tiled ones where a block's score rows fit in
// shared memory, else the per-row ones. `finite`: null where blocks may not skip.
cudaError_t attention_kernels(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                              const AttentionDesc& d, const int* finite, cudaStream_t stream) {
  if (attention_tiled_fits(d, false)) return launch_attention_tiled(q, k, v, k2, v2, out, d, finite, stream);
  const size_t shared = sizeof(float) * static_cast<size_t>(kRows * d.D + kTile * (d.D + 1) + kTile * d.E);
  if (cudaError_t e = allow_shared(attention_kernel, shared); e != cudaSuccess) return e;
  attention_kernel<<<attention_grid(d, kRows), kAttnThreads, shared, stream>>>(q, k, v, k2, v2, out, d, finite);
  return cudaGetLastError();
}

// The same for the gradient: `tiled_finite` null where the tiled kernels may not skip (the
// per-row ones read `finite` only where they may).
cudaError_t attention_grad_kernels(const float* q, const float* k, const float* v, const float* dy, float* out, const AttentionDesc& d,
                                   const int* tiled_finite, const int* finite, double* stats, float* probs, cudaStream_t stream) {
  if (attention_tiled_fits(d, true))
    return launch_attention_grad_tiled(q, k, v, dy, out, d, tiled_finite, reinterpret_cast<float*>(stats), probs, stream);
  const size_t dq_shared = sizeof(float) * static_cast<size_t>(2 * kRows * d.D + 2 * kTile * (d.D + 1));
  if (cudaError_t e = allow_shared(attention_dq_kernel, dq_shared); e != cudaSuccess) return e;
  attention_dq_kernel<<<attention_grid(d, kRows), kAttnThreads, dq_shared, stream>>>(q, k, v, dy, out, d, finite, stats);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const size_t floats = static_cast<size_t>(2 * kRows * d.D + 2 * kTile * (d.D + 1));
  const size_t dkv_shared = sizeof(float) * ((floats + 1) / 2 * 2) + sizeof(double) * kTile * 3;
  if (cudaError_t e = allow_shared(attention_dkv_kernel, dkv_shared); e != cudaSuccess) return e;
  attention_dkv_kernel<<<attention_grid(d, kRows), kAttnThreads, dkv_shared, stream>>>(q, k, v, dy, out, d, finite, stats);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_attention(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                             const AttentionDesc& d, int* finite, cudaStream_t stream) {
  if (d.G == 0 || d.T == 0 || d.E == 0) return cudaSuccess;
  if (d.D > kAttentionMaxDim || d.E > kAttentionMaxDim || d.D == 0) return cudaErrorInvalidValue;
  // Rows that keep no key (offset < 0) are nan, which skipping would lose; a decode step's
  // window is on the device.
  const bool skippable = d.causal && d.offset >= 0 && d.position == nullptr;
  if (skippable) {
    finite_kernel<<<row_grid(d.G), kThreads, 0, stream>>>(nullptr, nullptr, k, v, k2, v2, d, finite);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return attention_kernels(q, k, v, k2, v2, out, d, skippable ? finite : nullptr, stream);
}

cudaError_t launch_attention_run_to_run(const float* q, const float* k, const float* v, const float* k2, const float* v2,
                                        float* out, const AttentionDesc& d, int* finite, cudaStream_t stream) {
  if (!attention_tf32x3_fits(d, q, k, v, out)) return launch_attention(q, k, v, k2, v2, out, d, finite, stream);
  // q is checked too: an infinity in q splits into inf and nan parts, where the reference may keep finite scores.
  finite_kernel<<<row_grid(d.G), kThreads, 0, stream>>>(q, nullptr, k, v, nullptr, nullptr, d, finite);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (cudaError_t e = launch_attention_tf32x3(q, k, v, out, d, finite, stream); e != cudaSuccess) return e;
  AttentionDesc rest = d;
  rest.nonfinite_only = true;
  // the groups left have flag 0, so the f32 kernels read all their keys, as without flags
  return attention_kernels(q, k, v, nullptr, nullptr, out, rest, finite, stream);
}

cudaError_t launch_attention_grad_run_to_run(const float* q, const float* k, const float* v, const float* dy, float* out,
                                             const AttentionDesc& d, int* finite, double* stats, float* probs, cudaStream_t stream) {
  if (!attention_grad_tf32x3_fits(d, q, k, v, dy, out)) return launch_attention_grad(q, k, v, dy, out, d, finite, stats, probs, stream);
  finite_kernel<<<row_grid(d.G), kThreads, 0, stream>>>(q, dy, k, v, nullptr, nullptr, d, finite);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  // The tensor-core kernels' row statistics share the stats space with the f32 kernels', which run after them.
  if (cudaError_t e = launch_attention_grad_tf32x3(q, k, v, dy, out, d, finite, reinterpret_cast<float2*>(stats), stream); e != cudaSuccess)
    return e;
  AttentionDesc rest = d;
  rest.nonfinite_only = true;
  return attention_grad_kernels(q, k, v, dy, out, rest, finite, finite, stats, probs, stream);
}

cudaError_t launch_attention_grad(const float* q, const float* k, const float* v, const float* dy, float* out,
                                  const AttentionDesc& d, int* finite, double* stats, float* probs, cudaStream_t stream) {
  if (d.G == 0 || d.T == 0 || d.D == 0) return cudaSuccess;
  if (d.D > kAttentionMaxDim || d.E != d.D) return cudaErrorInvalidValue;
  const bool skippable = d.causal && d.offset >= 0;  // as attention's: only then may blocks skip
  if (skippable) {
    finite_kernel<<<row_grid(d.G), kThreads, 0, stream>>>(q, dy, k, v, nullptr, nullptr, d, finite);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return attention_grad_kernels(q, k, v, dy, out, d, skippable ? finite : nullptr, finite, stats, probs, stream);
}

}  // namespace volta::cuda
