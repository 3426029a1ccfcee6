// Batched matmul, mirroring ref_matmul.cpp: out[..., m, n] = sum_k A(m, k) * B(k, n), operands
// optionally transposed, batch dims broadcast. Two tiled shared-memory kernels of 256 threads:
//   - small: a 64x64 output tile per block, 16-deep k slices, 4x4 outputs per thread;
//   - large: a 128x128 tile, 8-deep k slices double-buffered (the next slice's global loads are
//     in flight while the current one is multiplied), 8x8 outputs per thread read as float4s.
// In both, each output is one f32 fma chain over k = 0, 1, ..., K-1 in that order (no split-K,
// no atomics), so the bits depend only on the inputs, never on which kernel or tiling ran.
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

constexpr int BM = 64, BN = 64, BK = 16;

__global__ void __launch_bounds__(kThreads) matmul_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                          float* __restrict__ C, MatmulDesc d) {
  __shared__ float As[BK][BM + 1];  // As[k][m]; +1 breaks bank conflicts on the transposed store
  __shared__ float Bs[BK][BN + 1];  // Bs[k][n]
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 16, ty = tid / 16;  // this thread's outputs: rows ty + 16 i, cols tx + 16 j
  const int64_t m0 = int64_t{blockIdx.y} * BM, n0 = int64_t{blockIdx.x} * BN;
  // Consecutive threads walk the operand's contiguous dim so global loads coalesce.
  const bool a_k_fast = d.a_k == 1, b_n_fast = d.b_n == 1;
  for (int64_t z = blockIdx.z; z < d.batch; z += gridDim.z) {
    const float* a = A + strided_offset(d.batch_index, 0, z);
    const float* b = B + strided_offset(d.batch_index, 1, z);
    float* c = C + z * d.M * d.N;
    float acc[4][4] = {};
    for (int64_t k0 = 0; k0 < d.K; k0 += BK) {
      for (int i = tid; i < BM * BK; i += kThreads) {
        const int kk = a_k_fast ? i % BK : i / BM, mm = a_k_fast ? i / BK : i % BM;
        const int64_t m = m0 + mm, k = k0 + kk;
        As[kk][mm] = (m < d.M && k < d.K) ? a[m * d.a_m + k * d.a_k] : 0.0f;
      }
      for (int i = tid; i < BN * BK; i += kThreads) {
        const int kk = b_n_fast ? i / BN : i % BK, nn = b_n_fast ? i % BN : i / BK;
        const int64_t n = n0 + nn, k = k0 + kk;
        Bs[kk][nn] = (n < d.N && k < d.K) ? b[k * d.b_k + n * d.b_n] : 0.0f;
      }
      __syncthreads();
      // Only real k: padding would add +0 terms (turning a -0 sum into +0, inf * 0 into nan).
      const int kmax = static_cast<int>(d.K - k0 < BK ? d.K - k0 : BK);
      for (int kk = 0; kk < kmax; ++kk) {
        float av[4], bv[4];
        for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
        for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
      const int64_t m = m0 + ty + 16 * i;
      if (m >= d.M) continue;
      for (int j = 0; j < 4; ++j) {
        const int64_t n = n0 + tx + 16 * j;
        if (n < d.N) c[m * d.N + n] = acc[i][j];
      }
    }
  }
}

constexpr int LM = 128, LN = 128, LK = 8, LPAD = 4;  // LPAD keeps rows 16-byte aligned, spreads banks

__global__ void __launch_bounds__(kThreads) matmul_large_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                                float* __restrict__ C, MatmulDesc d) {
  __shared__ __align__(16) float As[2][LK][LM + LPAD];  // As[k][m]
  __shared__ __align__(16) float Bs[2][LK][LN + LPAD];  // Bs[k][n]
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % 16, ty = tid / 16;  // outputs: rows 4 ty + {0..3} and 64 + 4 ty + {0..3}; cols likewise
  const int64_t m0 = int64_t{blockIdx.y} * LM, n0 = int64_t{blockIdx.x} * LN;
  const bool a_k_fast = d.a_k == 1, b_n_fast = d.b_n == 1;
  constexpr int kLoads = LM * LK / kThreads;  // 4 elements of each operand per thread and slice
  for (int64_t z = blockIdx.z; z < d.batch; z += gridDim.z) {
    const float* a = A + strided_offset(d.batch_index, 0, z);
    const float* b = B + strided_offset(d.batch_index, 1, z);
    float* c = C + z * d.M * d.N;
    float ra[kLoads], rb[kLoads];
    // Consecutive threads walk each operand's contiguous dim so global loads coalesce.
    auto load = [&](int64_t k0) {
      for (int e = 0; e < kLoads; ++e) {
        const int i = tid + e * kThreads;
        const int akk = a_k_fast ? i % LK : i / LM, amm = a_k_fast ? i / LK : i % LM;
        const int64_t m = m0 + amm, ka = k0 + akk;
        ra[e] = (m < d.M && ka < d.K) ? a[m * d.a_m + ka * d.a_k] : 0.0f;
        const int bkk = b_n_fast ? i / LN : i % LK, bnn = b_n_fast ? i % LN : i / LK;
        const int64_t n = n0 + bnn, kb = k0 + bkk;
        rb[e] = (n < d.N && kb < d.K) ? b[kb * d.b_k + n * d.b_n] : 0.0f;
      }
    };
    auto store = [&](int buf) {
      for (int e = 0; e < kLoads; ++e) {
        const int i = tid + e * kThreads;
        As[buf][a_k_fast ? i % LK : i / LM][a_k_fast ? i / LK : i % LM] = ra[e];
        Bs[buf][b_n_fast ? i / LN : i % LK][b_n_fast ? i % LN : i / LK] = rb[e];
      }
    };
    float acc[8][8] = {};
    load(0);
    store(0);
    __syncthreads();
    for (int64_t k0 = 0; k0 < d.K; k0 += LK) {
      const int cur = static_cast<int>((k0 / LK) & 1);
      const bool more = k0 + LK < d.K;
      if (more) load(k0 + LK);
      // Only real k: padding would add +0 terms (turning a -0 sum into +0, inf * 0 into nan).
      const int kmax = static_cast<int>(d.K - k0 < LK ? d.K - k0 : LK);
      for (int kk = 0; kk < kmax; ++kk) {
        const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][kk][4 * ty]);
        const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][kk][64 + 4 * ty]);
        const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][kk][4 * tx]);
        const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][kk][64 + 4 * tx]);
        const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
      if (more) store(cur ^ 1);  // that buffer's readers finished before the last barrier
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t m = m0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
      if (m >= d.M) continue;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int64_t n = n0 + (j < 4 ? 4 * tx + j : 64 + 4 * tx + j - 4);
        if (n < d.N) c[m * d.N + n] = acc[i][j];
      }
    }
  }
}

// The large tile pays once it alone fills the device about once; below that the small tile's
// four times as many blocks keep more multiprocessors busy. Either gives the same bits.
constexpr int64_t kLargeTilesMin = 128;

}  // namespace

cudaError_t launch_matmul(const float* a, const float* b, float* out, const MatmulDesc& d, cudaStream_t stream) {
  if (d.M == 0 || d.N == 0 || d.batch == 0) return cudaSuccess;
  const int64_t lx = (d.N + LN - 1) / LN, ly = (d.M + LM - 1) / LM;
  if (lx * ly * d.batch >= kLargeTilesMin && ly <= 65535) {
    const dim3 grid(static_cast<unsigned>(lx), static_cast<unsigned>(ly),
                    static_cast<unsigned>(d.batch < 65535 ? d.batch : 65535));
    matmul_large_kernel<<<grid, kThreads, 0, stream>>>(a, b, out, d);
    return cudaGetLastError();
  }
  const int64_t gx = (d.N + BN - 1) / BN, gy = (d.M + BM - 1) / BM;
  if (gx > 0x7fffffff || gy > 65535) return cudaErrorInvalidConfiguration;  // beyond any planned shape
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy),
                  static_cast<unsigned>(d.batch < 65535 ? d.batch : 65535));
  matmul_kernel<<<grid, kThreads, 0, stream>>>(a, b, out, d);
  return cudaGetLastError();
}

}  // namespace volta::cuda
