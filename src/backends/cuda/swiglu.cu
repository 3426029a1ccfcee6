// swiglu and its gradient, mirroring ref_elementwise.cpp's Swiglu and ref_grad.cpp's SwigluGrad:
// one thread per (row, j), in double with the reference's f32 roundings, so the bits are the
// CPU reference's.
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

}  // namespace

cudaError_t launch_swiglu(const float* x, const float* dy, float* out, int64_t rows, int64_t F, cudaStream_t stream) {
  const int64_t n = rows * F;
  if (n == 0) return cudaSuccess;
  swiglu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, rows, F);
  return cudaGetLastError();
}

}  // namespace volta::cuda
