// Cross-entropy forward and backward, mirroring ref_loss.cpp (targets checked and counted on the
// device by check_indices, layout.cu): max-subtracted
// log-sum-exp in double, one block per row. The forward's mean is a second, single-block pass
// over the per-row losses in a fixed order (strided per-thread sums, then a tree), so the loss
// has the same bits from run to run.
#include <cmath>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

template <typename Id>
__device__ inline int64_t target_at(const void* targets, int64_t r) {
  return static_cast<int64_t>(static_cast<const Id*>(targets)[r]);
}

// Row max and sum of exp(x - max), as the block's shared results.
__device__ inline void row_stats(const float* xr, int64_t C, double* buf, double& mx, double& sum) {
  double m = -INFINITY;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) m = fmax(m, static_cast<double>(xr[c]));
  mx = block_reduce(m, buf, [](double a, double b) { return fmax(a, b); });
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += kThreads) s += exp(static_cast<double>(xr[c]) - mx);
  sum = block_reduce(s, buf, [](double a, double b) { return a + b; });
}

template <typename Id>
__global__ void __launch_bounds__(kThreads) row_loss_kernel(const float* __restrict__ logits, const void* targets,
                                                            int64_t rows, int64_t C, bool has_ignore, int64_t ignore,
                                                            double* __restrict__ row_loss) {
  __shared__ double buf[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = target_at<Id>(targets, r);
    if (has_ignore && t == ignore) {  // uniform across the block: no reduction is entered
      if (threadIdx.x == 0) row_loss[r] = 0.0;
      continue;
    }
    const float* xr = logits + r * C;
    double mx, sum;
    row_stats(xr, C, buf, mx, sum);
    if (threadIdx.x == 0) row_loss[r] = t < 0 || t >= C ? NAN : log(sum) - (static_cast<double>(xr[t]) - mx);
  }
}

__global__ void __launch_bounds__(kThreads) mean_kernel(const double* __restrict__ row_loss, int64_t rows,
                                                        const int64_t* __restrict__ counted, float* __restrict__ out) {
  __shared__ double buf[kThreads];
  double s = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += kThreads) s += row_loss[r];
  s = block_reduce(s, buf, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) out[0] = static_cast<float>(s / static_cast<double>(*counted));  // 0/0 = nan with no rows
}

template <typename Id>
__global__ void __launch_bounds__(kThreads) grad_kernel(const float* __restrict__ logits, const void* targets,
                                                        const float* __restrict__ dloss, int64_t rows, int64_t C,
                                                        bool has_ignore, int64_t ignore, const int64_t* __restrict__ counted,
                                                        float* __restrict__ out) {
  __shared__ double buf[kThreads];
  const double scale = *counted ? static_cast<double>(dloss[0]) / static_cast<double>(*counted) : 0.0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t t = target_at<Id>(targets, r);
    float* gr = out + r * C;
    if (has_ignore && t == ignore) {
      for (int64_t c = threadIdx.x; c < C; c += kThreads) gr[c] = 0.0f;
      continue;
    }
    const float* xr = logits + r * C;
    double mx, sum;
    row_stats(xr, C, buf, mx, sum);
    for (int64_t c = threadIdx.x; c < C; c += kThreads) {
      const double p = exp(static_cast<double>(xr[c]) - mx) / sum;
      gr[c] = static_cast<float>(scale * (p - (c == t ? 1.0 : 0.0)));
    }
  }
}

}  // namespace

cudaError_t launch_cross_entropy(const float* logits, const void* targets, bool targets_i64, int64_t rows, int64_t C,
                                 bool has_ignore, int64_t ignore, const int64_t* counted, double* row_loss, float* out,
                                 cudaStream_t stream) {
  if (rows > 0 && C > 0) {
    if (targets_i64)
      row_loss_kernel<int64_t><<<row_grid(rows), kThreads, 0, stream>>>(logits, targets, rows, C, has_ignore, ignore, row_loss);
    else
      row_loss_kernel<int32_t><<<row_grid(rows), kThreads, 0, stream>>>(logits, targets, rows, C, has_ignore, ignore, row_loss);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  mean_kernel<<<1, kThreads, 0, stream>>>(row_loss, C > 0 ? rows : 0, counted, out);
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_grad(const float* logits, const void* targets, bool targets_i64, const float* dloss,
                                      int64_t rows, int64_t C, bool has_ignore, int64_t ignore, const int64_t* counted,
                                      float* out, cudaStream_t stream) {
  if (rows == 0 || C == 0) return cudaSuccess;
  if (targets_i64)
    grad_kernel<int64_t><<<row_grid(rows), kThreads, 0, stream>>>(logits, targets, dloss, rows, C, has_ignore, ignore, counted, out);
  else
    grad_kernel<int32_t><<<row_grid(rows), kThreads, 0, stream>>>(logits, targets, dloss, rows, C, has_ignore, ignore, counted, out);
  return cudaGetLastError();
}

}  // namespace volta::cuda
