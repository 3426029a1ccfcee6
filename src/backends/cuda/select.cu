// causal_mask, mirroring ref_select.cpp: out = x where j <= i + offset, `fill` elsewhere.
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

__global__ void causal_mask_kernel(const float* x, float* out, int64_t n, int64_t R, int64_t C, int64_t offset,
                                   float fill) {
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = k % C, i = (k / C) % R;
    out[k] = j > i + offset ? fill : x[k];
  }
}

}  // namespace

cudaError_t launch_causal_mask(const float* x, float* out, int64_t mats, int64_t R, int64_t C, int64_t offset,
                               float fill, cudaStream_t stream) {
  const int64_t n = mats * R * C;
  if (n == 0) return cudaSuccess;
  causal_mask_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n, R, C, offset, fill);
  return cudaGetLastError();
}

}  // namespace volta::cuda
