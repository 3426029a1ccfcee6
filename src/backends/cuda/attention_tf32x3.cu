// The fused attention and its gradient on tensor cores, the run-to-run level's kernels
// (capabilities.cpp picks them where tf32x3_attention_shape holds). Every f32 operand x is split
// into a tf32 part big = rna(x) and a tf32 remainder small = rna(x - big); a product is
// accumulated as small * big + big * small + big * big (the small * small term, about 2^-22 of
// it, dropped), so the products keep about f32's precision (errors against float64 of 1e-6 to
// 3e-6 of the output's norm, measured on an H200 at the GPU-sized GPT's shape) at the tensor
// cores' rate. Blocks of 4 warps take 64 rows, 16 a warp (queries; keys for dk and dv); tiles of
// 64 rows go through shared memory, split once. The forward's softmax is online (a running max
// and sum per row, the output rescaled as the max grows). The gradient runs three kernels: the
// rows' statistics (the forward again: L = the log-sum-exp of the scaled scores, and
// sum_j p dp = dy . y), dq per query block, and dk and dv per key block, each recomputing the
// probabilities from L. The order of every sum is fixed by the shapes (the mma's own order
// within a step), so the bits repeat run to run, but they differ from the strict kernels'.
// Groups with a nan or infinity among their operands return at once: the launchers in
// attention.cu run the f32 kernels (tiled or per row) on those, which keep the reference's
// special values.
#include "backends/cuda/attention_tiled.cuh"

namespace volta::cuda {
namespace {

constexpr int kBlockRows = 64, kDim = 64, kLd = kDim + 4, kTile = kBlockRows * kLd, kTcThreads = 128;
// The forward and the statistics at 3 blocks a multiprocessor (168 registers: on an H200 133 us
// against 139 at 2); dq and dk/dv hold more accumulators, 2 blocks.
constexpr size_t kForwardShared = 4 * kTile * sizeof(uint32_t);    // k and v tiles, big and small parts
constexpr size_t kDqShared = 6 * kTile * sizeof(uint32_t);         // dy, k, v
constexpr size_t kDkvShared = 6 * kTile * sizeof(uint32_t) + kBlockRows * sizeof(float2);  // q, dy, v; the rows' statistics

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void split(float x, uint32_t& big, uint32_t& small) {
  big = to_tf32(x);
  small = to_tf32(x - __uint_as_float(big));
}
// c += a b for one m16n8k8 step: a's fragment (rows lane / 4 and + 8, columns lane % 4 and + 4),
// b's (rows lane % 4 and + 4, column lane / 4), c's (rows lane / 4 and + 8, columns 2 (lane % 4) + 0, 1).
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma3(float c[4], const uint32_t ab[4], const uint32_t as[4], uint32_t bb0, uint32_t bb1,
                                     uint32_t bs0, uint32_t bs1) {
  mma(c, as, bb0, bb1);
  mma(c, ab, bs0, bs1);
  mma(c, ab, bb0, bb1);
}

struct Lane {
  int warp, gr, tg;  // the warp; the lane's row group and its place in it
};
__device__ __forceinline__ Lane lane_of() {
  const int lane = static_cast<int>(threadIdx.x % 32);
  return {static_cast<int>(threadIdx.x / 32), lane / 4, lane % 4};
}

// Rows [r0, r0 + 64) of `rows` (64 floats each, float4-aligned), split, into big[64][kLd] and small.
__device__ __forceinline__ void load_split(const AttentionRows& rows, int64_t r0, uint32_t* big, uint32_t* small) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kBlockRows * kDim / 4; idx += kTcThreads) {
    const int r = idx / (kDim / 4), c = idx % (kDim / 4) * 4;
    const float4 x = *reinterpret_cast<const float4*>(rows.a + (r0 + r) * rows.stride + c);
    uint4 b, s;
    split(x.x, b.x, s.x);
    split(x.y, b.y, s.y);
    split(x.z, b.z, s.z);
    split(x.w, b.w, s.w);
    *reinterpret_cast<uint4*>(big + r * kLd + c) = b;
    *reinterpret_cast<uint4*>(small + r * kLd + c) = s;
  }
}
// The a fragment of a split tile's rows r0 + gr (+ 8), columns 8 kk + tg (+ 4).
__device__ __forceinline__ void tile_fragment(const uint32_t* big, const uint32_t* small, const Lane& l, int kk, uint32_t ab[4],
                                              uint32_t as[4]) {
  const int at = (l.warp * 16 + l.gr) * kLd + kk * 8 + l.tg;
  ab[0] = big[at], ab[1] = big[at + 8 * kLd], ab[2] = big[at + 4], ab[3] = big[at + 8 * kLd + 4];
  as[0] = small[at], as[1] = small[at + 8 * kLd], as[2] = small[at + 4], as[3] = small[at + 8 * kLd + 4];
}
// The a fragments of the warp's 16 rows of rows [r0, r0 + 64), split once, staged through big
// and small (the block's other loads issued before this share its barrier).
__device__ __forceinline__ void own_fragments(const AttentionRows& rows, int64_t r0, uint32_t* big, uint32_t* small, const Lane& l,
                                              uint32_t fb[8][4], uint32_t fs[8][4]) {
  load_split(rows, r0, big, small);
  __syncthreads();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) tile_fragment(big, small, l, kk, fb[kk], fs[kk]);
  __syncthreads();
}
// A fragment source for the product helpers: fragments held in registers.
struct Held {
  const uint32_t (&fb)[8][4];
  const uint32_t (&fs)[8][4];
  __device__ __forceinline__ void operator()(int kk, uint32_t ab[4], uint32_t as[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) ab[i] = fb[kk][i], as[i] = fs[kk][i];
  }
};
// The a fragment of accumulators c (16 rows by 64 columns) for k step kk: index tg stands for
// column 2 tg of the step and tg + 4 for 2 tg + 1 (where the accumulators hold them), so the b
// operand's rows are read in that order (by_rows).
__device__ __forceinline__ void acc_fragment(const float c[8][4], int kk, uint32_t ab[4], uint32_t as[4]) {
  split(c[kk][0], ab[0], as[0]);
  split(c[kk][2], ab[1], as[1]);
  split(c[kk][1], ab[2], as[2]);
  split(c[kk][3], ab[3], as[3]);
}
// acc (16 x 64) += a (16 x 64, fragments from `fragment(kk, ab, as)`) times tile^T: each row of
// the split tile is a column of b ("by columns": the tile holds b transposed, as k for q kᵀ).
template <typename Fragment>
__device__ __forceinline__ void product_by_columns(float acc[8][4], const uint32_t* big, const uint32_t* small, const Lane& l,
                                                   Fragment fragment) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    uint32_t ab[4], as[4];
    fragment(kk, ab, as);
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const int at = (n * 8 + l.gr) * kLd + kk * 8 + l.tg;
      mma3(acc[n], ab, as, big[at], big[at + 4], small[at], small[at + 4]);
    }
  }
}
// acc (16 x 64) += c (16 x 64 accumulators, acc_fragment's order) times the split tile (its rows
// the k dim: v for p v).
__device__ __forceinline__ void product_by_rows(float acc[8][4], const float c[8][4], const uint32_t* big, const uint32_t* small,
                                                const Lane& l) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    uint32_t ab[4], as[4];
    acc_fragment(c, kk, ab, as);
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const int at = (kk * 8 + 2 * l.tg) * kLd + n * 8 + l.gr;
      mma3(acc[n], ab, as, big[at], big[at + kLd], small[at], small[at + kLd]);
    }
  }
}
__device__ __forceinline__ void clear(float c[8][4]) {
#pragma unroll
  for (int n = 0; n < 8; ++n) c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
}
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
// A 16 x 64 block of rows r0, r0 + 8 (by the lane's row group) into `rows` (scaled).
__device__ __forceinline__ void store_rows(const float c[8][4], float* row0, int64_t stride, const Lane& l, float scale) {
  float* row1 = row0 + 8 * stride;
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    *reinterpret_cast<float2*>(row0 + n * 8 + 2 * l.tg) = make_float2(c[n][0] * scale, c[n][1] * scale);
    *reinterpret_cast<float2*>(row1 + n * 8 + 2 * l.tg) = make_float2(c[n][2] * scale, c[n][3] * scale);
  }
}
// A score times the scale, rounded on its own (no fused multiply-add): the forward takes the
// row's max and L off this value, and the gradient's kernels recompute it bit for bit.
__device__ __forceinline__ float scaled_score(float s, float scale) { return __fmul_rn(s, scale); }
// A probability recomputed from the row's statistics: L = max + log(sum) of the scaled scores.
__device__ __forceinline__ float probability(float s, float scale, float L) { return expf(scaled_score(s, scale) - L); }
// ds = p (dp - sum_j p dp). A probability that is 1 holds its row's whole mass (the first row of a
// causal mask; or the other keys hold under 2^-25 of it, whose terms are below f32's rounding):
// sum_j p dp is then this dp, and ds 0, exactly so in the reference; the statistics' dy . y
// rounds differently, so that case is written out. (The dq kernel's scores are the statistics
// kernel's products in the same order, each rounded before the max is taken off, so there a
// causal mask's first row has p exactly 1; the dk/dv kernel sums its products transposed, so
// there p may be 1 - 1 ulp and ds about 1e-7 of dp, within the tolerance.)
__device__ __forceinline__ float score_gradient(float p, float dp, float pdp) { return p == 1.0f ? 0.0f : p * (dp - pdp); }
// The row block of a block, the longest rows first (causal: their key tiles), and its group.
__device__ __forceinline__ void block_of(const AttentionDesc& d, int64_t& rb, int64_t& g) {
  rb = d.T / kBlockRows - 1 - static_cast<int64_t>(blockIdx.x) / d.G;
  g = static_cast<int64_t>(blockIdx.x) % d.G;
}

// ---- the forward (Stats: the gradient's row statistics instead of the output) ----
template <bool Stats>
__global__ void __launch_bounds__(kTcThreads, 3) attention_tf32x3_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                        const float* __restrict__ v, const float* __restrict__ dy,
                                                                        float* __restrict__ out, float2* __restrict__ stats,
                                                                        AttentionDesc d, const int* __restrict__ finite) {
  extern __shared__ uint4 tc_shared[];
  uint32_t* kb = reinterpret_cast<uint32_t*>(tc_shared);
  uint32_t *ks = kb + kTile, *vb = ks + kTile, *vs = vb + kTile;
  int64_t rb, g;
  block_of(d, rb, g);
  if (finite[g] == 0) return;
  const Lane l = lane_of();
  const int64_t i0 = rb * kBlockRows;
  const AttentionRows keys = key_rows(d, k, nullptr, g, d.S1), vals = value_rows(d, v, nullptr, g, d.S1);
  const float scale = static_cast<float>(d.scale);

  uint32_t qb[8][4], qs[8][4];  // the warp's 16 query rows, staged through the k tile's space
  own_fragments(query_rows(d, q, g), i0, kb, ks, l, qb, qs);

  float o[8][4];
  clear(o);
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows gr and gr + 8: running max, this lane's part of the sum
  const int64_t row0 = i0 + l.warp * 16 + l.gr, row1 = row0 + 8;
  const int64_t tiles = d.causal ? rb + 1 : d.S1 / kBlockRows;
  for (int64_t kt = 0; kt < tiles; ++kt) {
    const int64_t j0 = kt * kBlockRows;
    load_split(keys, j0, kb, ks);
    load_split(vals, j0, vb, vs);
    __syncthreads();
    float s[8][4];
    clear(s);
    product_by_columns(s, kb, ks, l, Held{qb, qs});
    float mx0 = m0, mx1 = m1;
    const bool diagonal = d.causal && kt == rb;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t j = j0 + n * 8 + 2 * l.tg + e;
        float x0 = scaled_score(s[n][e], scale), x1 = scaled_score(s[n][2 + e], scale);
        if (diagonal && j > row0) x0 = -INFINITY;
        if (diagonal && j > row1) x1 = -INFINITY;
        s[n][e] = x0, s[n][2 + e] = x1;
        mx0 = fmaxf(mx0, x0), mx1 = fmaxf(mx1, x1);
      }
    // Each row keeps key j0 <= its own index, so the maxima are finite.
    mx0 = quad_max(mx0), mx1 = quad_max(mx1);
    const float c0 = expf(m0 - mx0), c1 = expf(m1 - mx1);
    m0 = mx0, m1 = mx1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      s[n][0] = expf(s[n][0] - m0), s[n][1] = expf(s[n][1] - m0);
      s[n][2] = expf(s[n][2] - m1), s[n][3] = expf(s[n][3] - m1);
      sum0 += s[n][0] + s[n][1], sum1 += s[n][2] + s[n][3];
      o[n][0] *= c0, o[n][1] *= c0, o[n][2] *= c1, o[n][3] *= c1;
    }
    l0 = l0 * c0 + sum0, l1 = l1 * c1 + sum1;
    product_by_rows(o, s, vb, vs, l);
    __syncthreads();
  }
  l0 = quad_sum(l0), l1 = quad_sum(l1);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  if constexpr (!Stats) {
#pragma unroll
    for (int n = 0; n < 8; ++n) o[n][0] *= inv0, o[n][1] *= inv0, o[n][2] *= inv1, o[n][3] *= inv1;
    store_rows(o, out + out_offset(d, g) + row0 * out_stride(d), out_stride(d), l, 1.0f);
  } else {
    // sum_j p dp of a row = dy . y
    const AttentionRows dys = dy_rows(d, dy, g);
    const float* dy0 = dys.a + row0 * dys.stride;
    const float* dy1 = dy0 + 8 * dys.stride;
    float d0 = 0.0f, d1 = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const float2 y0 = *reinterpret_cast<const float2*>(dy0 + n * 8 + 2 * l.tg), y1 = *reinterpret_cast<const float2*>(dy1 + n * 8 + 2 * l.tg);
      d0 = fmaf(y0.x, o[n][0] * inv0, d0), d0 = fmaf(y0.y, o[n][1] * inv0, d0);
      d1 = fmaf(y1.x, o[n][2] * inv1, d1), d1 = fmaf(y1.y, o[n][3] * inv1, d1);
    }
    d0 = quad_sum(d0), d1 = quad_sum(d1);
    if (l.tg == 0) {
      stats[g * d.T + row0] = make_float2(m0 + logf(l0), d0);
      stats[g * d.T + row1] = make_float2(m1 + logf(l1), d1);
    }
  }
}

// ---- attention_grad, dq: per 64 query rows, key tiles up to the diagonal ----
__global__ void __launch_bounds__(kTcThreads, 2) attention_tf32x3_dq_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                           const float* __restrict__ v, const float* __restrict__ dy,
                                                                           const float2* __restrict__ stats, float* __restrict__ grads,
                                                                           AttentionDesc d, const int* __restrict__ finite) {
  extern __shared__ uint4 tc_shared[];
  uint32_t* yb = reinterpret_cast<uint32_t*>(tc_shared);
  uint32_t *ys = yb + kTile, *kb = ys + kTile, *ks = kb + kTile, *vb = ks + kTile, *vs = vb + kTile;
  int64_t rb, g;
  block_of(d, rb, g);
  if (finite[g] == 0) return;
  const Lane l = lane_of();
  const int64_t i0 = rb * kBlockRows;
  const AttentionRows keys = key_rows(d, k, nullptr, g, d.T), vals = value_rows(d, v, nullptr, g, d.T);
  const float scale = static_cast<float>(d.scale);
  load_split(dy_rows(d, dy, g), i0, yb, ys);
  uint32_t qb[8][4], qs[8][4];
  own_fragments(query_rows(d, q, g), i0, kb, ks, l, qb, qs);
  const int64_t row0 = i0 + l.warp * 16 + l.gr, row1 = row0 + 8;
  const float2 st0 = stats[g * d.T + row0], st1 = stats[g * d.T + row1];
  float dq[8][4];
  clear(dq);
  const int64_t tiles = d.causal ? rb + 1 : d.T / kBlockRows;
  for (int64_t kt = 0; kt < tiles; ++kt) {
    const int64_t j0 = kt * kBlockRows;
    load_split(keys, j0, kb, ks);
    load_split(vals, j0, vb, vs);
    __syncthreads();
    float p[8][4], dp[8][4];
    clear(p);
    clear(dp);
    product_by_columns(p, kb, ks, l, Held{qb, qs});
    product_by_columns(dp, vb, vs, l, [&](int kk, uint32_t ab[4], uint32_t as[4]) { tile_fragment(yb, ys, l, kk, ab, as); });
    const bool diagonal = d.causal && kt == rb;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {  // ds = p (dp - sum_j p dp)
        const int64_t j = j0 + n * 8 + 2 * l.tg + e;
        const float p0 = diagonal && j > row0 ? 0.0f : probability(p[n][e], scale, st0.x);
        const float p1 = diagonal && j > row1 ? 0.0f : probability(p[n][2 + e], scale, st1.x);
        dp[n][e] = score_gradient(p0, dp[n][e], st0.y);
        dp[n][2 + e] = score_gradient(p1, dp[n][2 + e], st1.y);
      }
    product_by_rows(dq, dp, kb, ks, l);
    __syncthreads();
  }
  store_rows(dq, grads + grad_offset(d, 0, g) + row0 * qkv_stride(d, d.D), qkv_stride(d, d.D), l, scale);
}

// ---- attention_grad, dk and dv: per 64 keys, query tiles from the diagonal on ----
__global__ void __launch_bounds__(kTcThreads, 2) attention_tf32x3_dkv_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                            const float* __restrict__ v, const float* __restrict__ dy,
                                                                            const float2* __restrict__ stats, float* __restrict__ grads,
                                                                            AttentionDesc d, const int* __restrict__ finite) {
  extern __shared__ uint4 tc_shared[];
  uint32_t* qb = reinterpret_cast<uint32_t*>(tc_shared);
  uint32_t *qs = qb + kTile, *yb = qs + kTile, *ys = yb + kTile, *vb = ys + kTile, *vs = vb + kTile;
  auto* rows_stats = reinterpret_cast<float2*>(vs + kTile);
  const int64_t blocks = d.T / kBlockRows, kb_index = static_cast<int64_t>(blockIdx.x) / d.G;  // the most query tiles first
  const int64_t g = static_cast<int64_t>(blockIdx.x) % d.G;
  if (finite[g] == 0) return;
  const Lane l = lane_of();
  const int64_t j0 = kb_index * kBlockRows;
  const AttentionRows queries = query_rows(d, q, g), dys = dy_rows(d, dy, g);
  const float scale = static_cast<float>(d.scale);
  load_split(value_rows(d, v, nullptr, g, d.T), j0, vb, vs);
  uint32_t kfb[8][4], kfs[8][4];  // the warp's 16 keys, staged through the q tile's space
  own_fragments(key_rows(d, k, nullptr, g, d.T), j0, qb, qs, l, kfb, kfs);
  const int64_t key0 = j0 + l.warp * 16 + l.gr, key1 = key0 + 8;
  float dk[8][4], dv[8][4];
  clear(dk);
  clear(dv);
  for (int64_t qt = d.causal ? kb_index : 0; qt < blocks; ++qt) {
    const int64_t i0 = qt * kBlockRows;
    load_split(queries, i0, qb, qs);
    load_split(dys, i0, yb, ys);
    if (threadIdx.x < kBlockRows) rows_stats[threadIdx.x] = stats[g * d.T + i0 + threadIdx.x];
    __syncthreads();
    float p[8][4], dp[8][4];  // transposed: rows the warp's keys, columns the tile's queries
    clear(p);
    clear(dp);
    product_by_columns(p, qb, qs, l, Held{kfb, kfs});
    const bool diagonal = d.causal && qt == kb_index;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = n * 8 + 2 * l.tg + e;
        const int64_t i = i0 + c;
        const float L = rows_stats[c].x;
        p[n][e] = diagonal && i < key0 ? 0.0f : probability(p[n][e], scale, L);
        p[n][2 + e] = diagonal && i < key1 ? 0.0f : probability(p[n][2 + e], scale, L);
      }
    product_by_rows(dv, p, yb, ys, l);
    product_by_columns(dp, yb, ys, l, [&](int kk, uint32_t ab[4], uint32_t as[4]) { tile_fragment(vb, vs, l, kk, ab, as); });
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pdp = rows_stats[n * 8 + 2 * l.tg + e].y;
        dp[n][e] = score_gradient(p[n][e], dp[n][e], pdp);
        dp[n][2 + e] = score_gradient(p[n][2 + e], dp[n][2 + e], pdp);
      }
    product_by_rows(dk, dp, qb, qs, l);
    __syncthreads();
  }
  const int64_t stride = qkv_stride(d, d.D);
  store_rows(dk, grads + grad_offset(d, 1, g) + key0 * stride, stride, l, scale);
  store_rows(dv, grads + grad_offset(d, 2, g) + key0 * stride, stride, l, 1.0f);
}

bool aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Shapes, layouts and alignment the kernels take (every row read as float4s), and their shared
// memory within the device's limit (the gradient's kernels take more than some GPUs allow a block).
bool tf32x3_fits(const AttentionDesc& d, bool grad, std::initializer_list<const float*> pointers) {
  if (d.position != nullptr || d.S2 != 0 || d.G == 0 || d.G * (d.T / kBlockRows) > (int64_t{1} << 31) - 1) return false;
  if (!tf32x3_attention_shape(d.T, d.S1, d.D, d.E, d.causal, d.offset) || (d.heads == 0 && d.cap % 4 != 0)) return false;
  for (const float* p : pointers)
    if (!aligned(p)) return false;
  return (grad ? std::max(kDqShared, kDkvShared) : kForwardShared) <= attention_shared_limit();
}

}  // namespace

bool attention_tf32x3_fits(const AttentionDesc& d, const float* q, const float* k, const float* v, const float* out) {
  return tf32x3_fits(d, false, {q, k, v, out});
}

cudaError_t launch_attention_tf32x3(const float* q, const float* k, const float* v, float* out, const AttentionDesc& d,
                                    const int* finite, cudaStream_t stream) {
  if (cudaError_t e = allow_shared(attention_tf32x3_kernel<false>, kForwardShared); e != cudaSuccess) return e;
  const auto blocks = static_cast<unsigned>(d.G * (d.T / kBlockRows));
  attention_tf32x3_kernel<false><<<blocks, kTcThreads, kForwardShared, stream>>>(q, k, v, nullptr, out, nullptr, d, finite);
  return cudaGetLastError();
}

bool attention_grad_tf32x3_fits(const AttentionDesc& d, const float* q, const float* k, const float* v, const float* dy,
                                const float* out) {
  return tf32x3_fits(d, true, {q, k, v, dy, out});
}

cudaError_t launch_attention_grad_tf32x3(const float* q, const float* k, const float* v, const float* dy, float* out,
                                         const AttentionDesc& d, const int* finite, float2* stats, cudaStream_t stream) {
  if (cudaError_t e = allow_shared(attention_tf32x3_kernel<true>, kForwardShared); e != cudaSuccess) return e;
  if (cudaError_t e = allow_shared(attention_tf32x3_dq_kernel, kDqShared); e != cudaSuccess) return e;
  if (cudaError_t e = allow_shared(attention_tf32x3_dkv_kernel, kDkvShared); e != cudaSuccess) return e;
  const auto blocks = static_cast<unsigned>(d.G * (d.T / kBlockRows));
  attention_tf32x3_kernel<true><<<blocks, kTcThreads, kForwardShared, stream>>>(q, k, v, dy, nullptr, stats, d, finite);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  attention_tf32x3_dq_kernel<<<blocks, kTcThreads, kDqShared, stream>>>(q, k, v, dy, stats, out, d, finite);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  attention_tf32x3_dkv_kernel<<<blocks, kTcThreads, kDkvShared, stream>>>(q, k, v, dy, stats, out, d, finite);
  return cudaGetLastError();
}

}  // namespace volta::cuda
