// Batched matmul, mirroring ref_matmul.cpp: out[..., m, n] = sum_k A(m, k) * B(k, n), operands
// optionally transposed, batch dims broadcast. A tiled shared-memory kernel: a 64x64 output
// tile per 256-thread block, 16-deep k slices staged in shared memory, 4x4 outputs per thread.
// Each output is one f32 fma chain over k = 0, 1, ..., K-1 in that order (no split-K, no
// atomics), so the bits depend only on the inputs.
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

}  // namespace

cudaError_t launch_matmul(const float* a, const float* b, float* out, const MatmulDesc& d, cudaStream_t stream) {
  if (d.M == 0 || d.N == 0 || d.batch == 0) return cudaSuccess;
  const int64_t gx = (d.N + BN - 1) / BN, gy = (d.M + BM - 1) / BM;
  if (gx > 0x7fffffff || gy > 65535) return cudaErrorInvalidConfiguration;  // beyond any planned shape
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy),
                  static_cast<unsigned>(d.batch < 65535 ? d.batch : 65535));
  matmul_kernel<<<grid, kThreads, 0, stream>>>(a, b, out, d);
  return cudaGetLastError();
}

}  // namespace volta::cuda
