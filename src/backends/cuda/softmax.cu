// Softmax / log_softmax and the softmax gradient, mirroring ref_softmax.cpp: max-subtracted, in
// double, one block per row; the row max, the sum of exponentials and the gradient's dot product
// are tree reductions in a fixed order.
#include <cmath>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

__global__ void __launch_bounds__(kThreads) softmax_kernel(const float* __restrict__ x, float* __restrict__ out,
                                                           SoftmaxDesc d) {
  __shared__ double buf[kThreads];
  const double ninf = -INFINITY;
  for (int64_t r = blockIdx.x; r < d.outer * d.inner; r += gridDim.x) {
    const int64_t o = r / d.inner, i = r % d.inner;
    const int64_t base = o * d.n * d.inner + i;
    int64_t offset = d.offset;
    if (d.position != nullptr) offset += min(max(int64_t{*d.position}, int64_t{0}), d.n);
    const int64_t keep_last = d.causal ? o % d.rows + offset : d.n;  // entries k > keep_last are left out
    auto z = [&](int64_t k) { return k > keep_last ? ninf : d.scale * static_cast<double>(x[base + k * d.inner]); };
    double mx = ninf;
    for (int64_t k = threadIdx.x; k < d.n; k += kThreads) mx = fmax(mx, z(k));
    mx = block_reduce(mx, buf, [](double a, double b) { return fmax(a, b); });
    double sum = 0.0;
    for (int64_t k = threadIdx.x; k < d.n; k += kThreads) sum += exp(z(k) - mx);
    sum = block_reduce(sum, buf, [](double a, double b) { return a + b; });
    const double log_sum = log(sum);
    // Masked entries are never read: exactly 0 (-inf for log_softmax) whatever x holds there,
    // even when the kept part holds nan; a row that keeps nothing is nan (ref_softmax.cpp).
    const bool none_kept = keep_last < 0;
    for (int64_t k = threadIdx.x; k < d.n; k += kThreads)
      out[base + k * d.inner] = static_cast<float>(none_kept      ? NAN
                                                   : k > keep_last ? (d.as_log ? ninf : 0.0)
                                                   : d.as_log      ? z(k) - mx - log_sum
                                                                   : exp(z(k) - mx) / sum);
  }
}

__global__ void __launch_bounds__(kThreads) softmax_grad_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                                                float* __restrict__ out, int64_t outer, int64_t n,
                                                                int64_t inner, double scale) {
  __shared__ double buf[kThreads];
  for (int64_t r = blockIdx.x; r < outer * inner; r += gridDim.x) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    double dot = 0.0;
    for (int64_t k = threadIdx.x; k < n; k += kThreads) dot += static_cast<double>(dy[base + k * inner]) * y[base + k * inner];
    dot = block_reduce(dot, buf, [](double a, double b) { return a + b; });
    for (int64_t k = threadIdx.x; k < n; k += kThreads) {
      const int64_t e = base + k * inner;
      out[e] = static_cast<float>(scale * y[e] * (dy[e] - dot));
    }
  }
}

}  // namespace

cudaError_t launch_softmax(const float* x, float* out, const SoftmaxDesc& d, cudaStream_t stream) {
  const int64_t rows = d.outer * d.inner;
  if (rows == 0 || d.n == 0) return cudaSuccess;
  softmax_kernel<<<static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)), kThreads, 0, stream>>>(x, out, d);
  return cudaGetLastError();
}

cudaError_t launch_softmax_grad(const float* y, const float* dy, float* out, int64_t outer, int64_t n, int64_t inner,
                                double scale, cudaStream_t stream) {
  if (outer * inner == 0 || n == 0) return cudaSuccess;
  softmax_grad_kernel<<<row_grid(outer * inner), kThreads, 0, stream>>>(y, dy, out, outer, n, inner, scale);
  return cudaGetLastError();
}

}  // namespace volta::cuda
