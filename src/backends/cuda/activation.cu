// Activations and their gradients, mirroring ref_activation.cpp: gelu, swiglu, and the fused
// backward kernels of relu, gelu, silu and swiglu. One thread per element (per (row, j) for
// swiglu), in double with the reference's f32 roundings (ir/scalar_math.h), so the bits are the
// CPU reference's; except gelu's erf form and its gradient, the training step's largest
// elementwise ops, which evaluate the reference's expressions in f32 (erff, expf: within a few
// ulp of the reference, as the CPU's vector kernels are), where the double erf and exp made them
// three times their memory time on an H100.
#include "backends/cuda/launch.cuh"
#include "ir/scalar_math.h"

namespace volta::cuda {
namespace {

__global__ void swiglu_kernel(const float* x, const float* dy, float* out, int64_t rows, int64_t F) {
  const int64_t n = rows * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / F, j = i % F;
    const double g = x[r * 2 * F + j], u = x[r * 2 * F + F + j];
    if (dy) ir::swiglu_grads(g, u, dy[i], out + r * 2 * F + j, out + r * 2 * F + F + j);
    else out[i] = ir::swiglu_value(g, u);
  }
}

constexpr float kInvSqrt2 = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
__device__ inline float gelu_erf_f32(float v) { return 0.5f * v * (1.0f + erff(v * kInvSqrt2)); }
__device__ inline float gelu_erf_derivative_f32(float v) {  // Phi(x) + x phi(x)
  return 0.5f * (1.0f + erff(v * kInvSqrt2)) + v * kInvSqrt2Pi * expf(-0.5f * v * v);
}

__global__ void gelu_kernel(const float* x, float* out, int64_t n, bool tanh_form) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = tanh_form ? static_cast<float>(ir::gelu_tanh(x[i])) : gelu_erf_f32(x[i]);
}

// The erf forms four elements a thread (float4_walk): each element's expression as above.
__global__ void gelu4_kernel(const float4* x, float4* out, uint32_t n4) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const float4 v = x[i];
    out[i] = make_float4(gelu_erf_f32(v.x), gelu_erf_f32(v.y), gelu_erf_f32(v.z), gelu_erf_f32(v.w));
  }
}
__global__ void gelu_grad4_kernel(const float4* x, const float4* dy, float4* out, uint32_t n4) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const float4 v = x[i], g = dy[i];
    out[i] = make_float4(gelu_erf_derivative_f32(v.x) * g.x, gelu_erf_derivative_f32(v.y) * g.y, gelu_erf_derivative_f32(v.z) * g.z,
                         gelu_erf_derivative_f32(v.w) * g.w);
  }
}

__global__ void relu_grad_kernel(const float* x, const float* dy, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void gelu_grad_kernel(const float* x, const float* dy, float* out, int64_t n, bool tanh_form) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = tanh_form ? static_cast<float>(ir::gelu_tanh_derivative(x[i]) * dy[i]) : gelu_erf_derivative_f32(x[i]) * dy[i];
  }
}

__global__ void silu_grad_kernel(const float* x, const float* dy, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<float>(ir::silu_derivative(x[i]) * dy[i]);
}

}  // namespace

cudaError_t launch_swiglu(const float* x, const float* dy, float* out, int64_t rows, int64_t F, cudaStream_t stream) {
  const int64_t n = rows * F;
  if (n == 0) return cudaSuccess;
  swiglu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, rows, F);
  return cudaGetLastError();
}

cudaError_t launch_gelu(const float* x, float* out, int64_t n, bool tanh_form, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!tanh_form && float4_walk(n, {x, out}))
    gelu4_kernel<<<grid_for(n / 4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(out),
                                                          static_cast<uint32_t>(n / 4));
  else
    gelu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n, tanh_form);
  return cudaGetLastError();
}

cudaError_t launch_relu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  relu_grad_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, n);
  return cudaGetLastError();
}

cudaError_t launch_silu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  silu_grad_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, n);
  return cudaGetLastError();
}

cudaError_t launch_gelu_grad(const float* x, const float* dy, float* out, int64_t n, bool tanh_form, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!tanh_form && float4_walk(n, {x, dy, out}))
    gelu_grad4_kernel<<<grid_for(n / 4), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(dy),
                                                               reinterpret_cast<float4*>(out), static_cast<uint32_t>(n / 4));
  else
    gelu_grad_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, n, tanh_form);
  return cudaGetLastError();
}

}  // namespace volta::cuda
