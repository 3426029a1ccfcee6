// The fused attention's forward on tensor cores, the run-to-run level's kernel (capabilities.cpp
// picks it where tf32x3_attention_shape holds). Every f32 operand x is split into a tf32 part
// big = rna(x) and a tf32 remainder small = rna(x - big); a product is accumulated as
// small * big + big * small + big * big (the small * small term, about 2^-22 of it, dropped), so
// the products keep about f32's precision (error against float64 about 1e-6 of the output's norm,
// measured on an H200 at the GPU-sized GPT's shape) at the tensor cores' rate. A block takes 64
// query rows of one group, 4 warps of 16; key tiles of 64 go through shared memory, split once;
// the softmax is online (a running max and sum per row, the output rescaled as the max grows).
// The order of every sum is fixed by the shapes (the mma's own order within a step), so the
// bits repeat run to run, but they differ from the strict kernels'. Groups with a nan or
// infinity among q, k, v return at once: launch_attention runs the tiled f32 kernel on those,
// which keeps the reference's special values.
#include "backends/cuda/attention_tiled.cuh"

namespace volta::cuda {
namespace {

constexpr int kBlockRows = 64, kTileKeys = 64, kDim = 64, kLd = kDim + 4, kTcThreads = 128;
// 3 blocks a multiprocessor (168 registers): on an H200 133 us against 139 at 2 (197 registers).
constexpr int kMinBlocks = 3;
constexpr size_t kShared = 4 * kTileKeys * kLd * sizeof(uint32_t);  // k and v tiles, big and small parts

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

// Rows [r0, r0 + 64) of `rows` (64 floats each, float4-aligned), split, into big[64][kLd] and small.
__device__ __forceinline__ void load_split(const AttentionRows& rows, int64_t r0, uint32_t* big, uint32_t* small) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kTileKeys * kDim / 4; idx += kTcThreads) {
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

__global__ void __launch_bounds__(kTcThreads, kMinBlocks) attention_tf32x3_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                                                               const float* __restrict__ v, float* __restrict__ out,
                                                                               AttentionDesc d, const int* __restrict__ finite) {
  extern __shared__ uint4 tc_shared[];
  uint32_t* kb = reinterpret_cast<uint32_t*>(tc_shared);
  uint32_t* ks = kb + kTileKeys * kLd;
  uint32_t* vb = ks + kTileKeys * kLd;
  uint32_t* vs = vb + kTileKeys * kLd;
  const int64_t row_blocks = d.T / kBlockRows;
  const int64_t rb = row_blocks - 1 - static_cast<int64_t>(blockIdx.x) / d.G;  // the longest rows first
  const int64_t g = static_cast<int64_t>(blockIdx.x) % d.G;
  if (finite[g] == 0) return;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int gr = lane / 4, tg = lane % 4;  // the lane's row group and its place in it
  const int64_t i0 = rb * kBlockRows;
  const AttentionRows keys = key_rows(d, k, nullptr, g, d.S1), vals = value_rows(d, v, nullptr, g, d.S1);
  const float scale = static_cast<float>(d.scale);

  // The warp's 16 query rows as a fragments, split once (staged through the k tile's space).
  load_split(query_rows(d, q, g), i0, kb, ks);
  __syncthreads();
  uint32_t qb[8][4], qs[8][4];
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const int at = (warp * 16 + gr) * kLd + kk * 8 + tg;
    qb[kk][0] = kb[at], qb[kk][1] = kb[at + 8 * kLd], qb[kk][2] = kb[at + 4], qb[kk][3] = kb[at + 8 * kLd + 4];
    qs[kk][0] = ks[at], qs[kk][1] = ks[at + 8 * kLd], qs[kk][2] = ks[at + 4], qs[kk][3] = ks[at + 8 * kLd + 4];
  }
  __syncthreads();

  float o[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // rows gr and gr + 8: running max, this lane's part of the sum
  const int64_t row0 = i0 + warp * 16 + gr, row1 = row0 + 8;
  const int64_t tiles = d.causal ? rb + 1 : d.S1 / kTileKeys;
  for (int64_t kt = 0; kt < tiles; ++kt) {
    const int64_t j0 = kt * kTileKeys;
    load_split(keys, j0, kb, ks);
    load_split(vals, j0, vb, vs);
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        const int at = (n * 8 + gr) * kLd + kk * 8 + tg;
        mma3(s[n], qb[kk], qs[kk], kb[at], kb[at + 4], ks[at], ks[at + 4]);
      }
    }
    float mx0 = m0, mx1 = m1;
    const bool diagonal = d.causal && kt == rb;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t j = j0 + n * 8 + 2 * tg + e;
        float x0 = s[n][e] * scale, x1 = s[n][2 + e] * scale;
        if (diagonal && j > row0) x0 = -INFINITY;
        if (diagonal && j > row1) x1 = -INFINITY;
        s[n][e] = x0, s[n][2 + e] = x1;
        mx0 = fmaxf(mx0, x0), mx1 = fmaxf(mx1, x1);
      }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    // Each row keeps key j0 <= its own index, so the maxima are finite.
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
    // o += p v. The probabilities are used where the scores' accumulators hold them: in a k
    // step, index tg stands for key 2 tg and tg + 4 for key 2 tg + 1, so v's rows are read in that order.
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      uint32_t pb[4], ps[4];
      split(s[kk][0], pb[0], ps[0]);
      split(s[kk][2], pb[1], ps[1]);
      split(s[kk][1], pb[2], ps[2]);
      split(s[kk][3], pb[3], ps[3]);
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        const int at = (kk * 8 + 2 * tg) * kLd + n * 8 + gr;
        mma3(o[n], pb, ps, vb[at], vb[at + kLd], vs[at], vs[at + kLd]);
      }
    }
    __syncthreads();
  }
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  float* y0 = out + out_offset(d, g) + row0 * out_stride(d);
  float* y1 = y0 + 8 * out_stride(d);
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    *reinterpret_cast<float2*>(y0 + n * 8 + 2 * tg) = make_float2(o[n][0] * inv0, o[n][1] * inv0);
    *reinterpret_cast<float2*>(y1 + n * 8 + 2 * tg) = make_float2(o[n][2] * inv1, o[n][3] * inv1);
  }
}

bool aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

bool attention_tf32x3_fits(const AttentionDesc& d, const float* q, const float* k, const float* v, const float* out) {
  if (d.position != nullptr || d.S2 != 0 || d.G == 0 || d.G * (d.T / kBlockRows) > (int64_t{1} << 31) - 1) return false;
  if (!tf32x3_attention_shape(d.T, d.S1, d.D, d.E, d.causal, d.offset)) return false;
  // float4 reads of every row
  const int64_t qkv = d.heads ? 3 * d.heads * d.D : d.D, o = d.heads ? d.heads * d.D : d.E;
  return aligned(q) && aligned(k) && aligned(v) && aligned(out) && qkv % 4 == 0 && o % 4 == 0 && d.cap % 4 == 0 &&
         attention_tiled_fits(d, false);
}

cudaError_t launch_attention_tf32x3(const float* q, const float* k, const float* v, float* out, const AttentionDesc& d,
                                    const int* finite, cudaStream_t stream) {
  if (cudaError_t e = allow_shared(attention_tf32x3_kernel, kShared); e != cudaSuccess) return e;
  const auto blocks = static_cast<unsigned>(d.G * (d.T / kBlockRows));
  attention_tf32x3_kernel<<<blocks, kTcThreads, kShared, stream>>>(q, k, v, out, d, finite);
  return cudaGetLastError();
}

}  // namespace volta::cuda
