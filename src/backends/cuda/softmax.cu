// Softmax / log_softmax, mirroring ref_softmax.cpp: max-subtracted, in double, one block per
// row; the row max and the sum of exponentials are tree reductions in a fixed order.
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
    for (int64_t k = threadIdx.x; k < d.n; k += kThreads)
      out[base + k * d.inner] = static_cast<float>(d.as_log ? z(k) - mx - log_sum : exp(z(k) - mx) / sum);
  }
}

}  // namespace

cudaError_t launch_softmax(const float* x, float* out, const SoftmaxDesc& d, cudaStream_t stream) {
  const int64_t rows = d.outer * d.inner;
  if (rows == 0 || d.n == 0) return cudaSuccess;
  softmax_kernel<<<static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)), kThreads, 0, stream>>>(x, out, d);
  return cudaGetLastError();
}

}  // namespace volta::cuda
