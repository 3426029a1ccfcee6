// layer_norm and rms_norm over the last axis and their gradients, mirroring ref_norm.cpp:
// statistics in double, two passes (mean, then centred variance), one block per row, fixed-order
// tree reductions.
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

__global__ void __launch_bounds__(kThreads) norm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                                        const float* __restrict__ beta, float* __restrict__ out,
                                                        int64_t rows, int64_t D, double eps, bool center) {
  __shared__ double buf[kThreads];
  auto add = [](double a, double b) { return a + b; };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * D;
    double mean = 0.0;
    if (center) {
      double s = 0.0;
      for (int64_t d = threadIdx.x; d < D; d += kThreads) s += xr[d];
      mean = block_reduce(s, buf, add) / static_cast<double>(D);
    }
    double s2 = 0.0;  // layer_norm: biased variance; rms_norm: mean square
    for (int64_t d = threadIdx.x; d < D; d += kThreads) {
      const double c = xr[d] - mean;
      s2 += c * c;
    }
    const double inv = 1.0 / sqrt(block_reduce(s2, buf, add) / static_cast<double>(D) + eps);
    for (int64_t d = threadIdx.x; d < D; d += kThreads) {
      double y = (xr[d] - mean) * inv * gamma[d];
      if (beta) y += beta[d];
      out[r * D + d] = static_cast<float>(y);
    }
  }
}

// g = dy * gamma, xhat = (x - mean) * rstd (mean 0 for rms_norm):
//   dx = rstd * (g - [mean(g)] - xhat * mean(g * xhat))
__global__ void __launch_bounds__(kThreads) norm_grad_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                                             const float* __restrict__ dy, float* __restrict__ out,
                                                             int64_t rows, int64_t D, double eps, bool center) {
  __shared__ double buf[kThreads];
  auto add = [](double a, double b) { return a + b; };
  const double inv_d = 1.0 / static_cast<double>(D);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * D;
    const float* dyr = dy + r * D;
    double mean = 0.0;
    if (center) {
      double s = 0.0;
      for (int64_t d = threadIdx.x; d < D; d += kThreads) s += xr[d];
      mean = block_reduce(s, buf, add) * inv_d;
    }
    double s2 = 0.0;
    for (int64_t d = threadIdx.x; d < D; d += kThreads) s2 += (xr[d] - mean) * (xr[d] - mean);
    const double rstd = 1.0 / sqrt(block_reduce(s2, buf, add) * inv_d + eps);
    double g_sum = 0.0, gx_sum = 0.0;
    for (int64_t d = threadIdx.x; d < D; d += kThreads) {
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      g_sum += g;
      gx_sum += g * ((xr[d] - mean) * rstd);
    }
    const double g_mean = block_reduce(g_sum, buf, add) * inv_d;
    const double gx_mean = block_reduce(gx_sum, buf, add) * inv_d;
    for (int64_t d = threadIdx.x; d < D; d += kThreads) {
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      const double centered = center ? g - g_mean : g;
      out[r * D + d] = static_cast<float>(rstd * (centered - (xr[d] - mean) * rstd * gx_mean));
    }
  }
}

}  // namespace

cudaError_t launch_norm(const float* x, const float* gamma, const float* beta, float* out, int64_t rows, int64_t D,
                        double eps, bool center, cudaStream_t stream) {
  if (rows == 0 || D == 0) return cudaSuccess;
  norm_kernel<<<static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)), kThreads, 0, stream>>>(x, gamma, beta, out,
                                                                                                  rows, D, eps, center);
  return cudaGetLastError();
}

cudaError_t launch_norm_grad(const float* x, const float* gamma, const float* dy, float* out, int64_t rows, int64_t D,
                             double eps, bool center, cudaStream_t stream) {
  if (rows == 0 || D == 0) return cudaSuccess;
  norm_grad_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, gamma, dy, out, rows, D, eps, center);
  return cudaGetLastError();
}

}  // namespace volta::cuda
