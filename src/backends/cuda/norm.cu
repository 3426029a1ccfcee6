// layer_norm and rms_norm over the last axis and their gradients, mirroring ref_norm.cpp:
// statistics in double, two passes (mean, then centred variance). One warp per row (8 rows a
// block): each lane sums its columns lane, lane + 32, ... in order, then a fixed xor butterfly
// over the lanes, after which every lane holds the same sum. A block per row spent its time in
// the tree's barriers on rows of a few hundred floats.
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / 32;

// The warp's rows: r0 = this warp's first, then a stride of every warp of the grid.
__device__ inline int64_t first_row() { return int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32; }
__device__ inline int64_t row_stride() { return int64_t{gridDim.x} * kRowsPerBlock; }

__global__ void __launch_bounds__(kThreads) norm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                                        const float* __restrict__ beta, float* __restrict__ out,
                                                        int64_t rows, int64_t D, double eps, bool center) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t r = first_row(); r < rows; r += row_stride()) {
    const float* xr = x + r * D;
    double mean = 0.0;
    if (center) {
      double s = 0.0;
      for (int64_t d = lane; d < D; d += 32) s += xr[d];
      mean = warp_sum(s) / static_cast<double>(D);
    }
    double s2 = 0.0;  // layer_norm: biased variance; rms_norm: mean square
    for (int64_t d = lane; d < D; d += 32) {
      const double c = xr[d] - mean;
      s2 += c * c;
    }
    const double inv = 1.0 / sqrt(warp_sum(s2) / static_cast<double>(D) + eps);
    for (int64_t d = lane; d < D; d += 32) {
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
  const int lane = static_cast<int>(threadIdx.x % 32);
  const double inv_d = 1.0 / static_cast<double>(D);
  for (int64_t r = first_row(); r < rows; r += row_stride()) {
    const float* xr = x + r * D;
    const float* dyr = dy + r * D;
    double mean = 0.0;
    if (center) {
      double s = 0.0;
      for (int64_t d = lane; d < D; d += 32) s += xr[d];
      mean = warp_sum(s) * inv_d;
    }
    double s2 = 0.0;
    for (int64_t d = lane; d < D; d += 32) s2 += (xr[d] - mean) * (xr[d] - mean);
    const double rstd = 1.0 / sqrt(warp_sum(s2) * inv_d + eps);
    double g_sum = 0.0, gx_sum = 0.0;
    for (int64_t d = lane; d < D; d += 32) {
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      g_sum += g;
      gx_sum += g * ((xr[d] - mean) * rstd);
    }
    const double g_mean = warp_sum(g_sum) * inv_d;
    const double gx_mean = warp_sum(gx_sum) * inv_d;
    for (int64_t d = lane; d < D; d += 32) {
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
  norm_kernel<<<row_grid((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, stream>>>(x, gamma, beta, out, rows, D, eps,
                                                                                             center);
  return cudaGetLastError();
}

cudaError_t launch_norm_grad(const float* x, const float* gamma, const float* dy, float* out, int64_t rows, int64_t D,
                             double eps, bool center, cudaStream_t stream) {
  if (rows == 0 || D == 0) return cudaSuccess;
  norm_grad_kernel<<<row_grid((rows + kRowsPerBlock - 1) / kRowsPerBlock), kThreads, 0, stream>>>(x, gamma, dy, out, rows, D,
                                                                                                  eps, center);
  return cudaGetLastError();
}

}  // namespace volta::cuda
