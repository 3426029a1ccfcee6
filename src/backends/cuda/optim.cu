// Optimizer updates, mirroring ref_optim.cpp (semantics in include/volta/optim.h): every
// element is updated in double from its own values only, so the bits match the CPU reference
// up to the device's pow / sqrt, and never depend on the launch shape.
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

__global__ void sgd_kernel(OptimDesc d, float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    double step = static_cast<double>(g[i]) * d.grad_scale + d.weight_decay * p[i];
    if (buf) {
      step = d.momentum * buf[i] + step;
      buf[i] = static_cast<float>(step);
    }
    p[i] = static_cast<float>(p[i] - d.lr * step);
  }
}

__global__ void adam_kernel(OptimDesc d, float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, int64_t n) {
  const bool decoupled = d.kind == 2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    double w = p[i];
    double grad = static_cast<double>(g[i]) * d.grad_scale;
    if (decoupled) w *= 1.0 - d.lr * d.weight_decay;
    else grad += d.weight_decay * w;
    const double mi = d.beta1 * m[i] + (1.0 - d.beta1) * grad;
    const double vi = d.beta2 * v[i] + (1.0 - d.beta2) * grad * grad;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    p[i] = static_cast<float>(w - d.lr * (mi / d.c1) / (sqrt(vi / d.c2) + d.eps));
  }
}

}  // namespace

cudaError_t launch_optimizer_update(const OptimDesc& d, float* param, const float* grad, float* state0, float* state1,
                                    int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (d.kind == 0) sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(d, param, grad, state0, n);
  else adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(d, param, grad, state0, state1, n);
  return cudaGetLastError();
}

}  // namespace volta::cuda
