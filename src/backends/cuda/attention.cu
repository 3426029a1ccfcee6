// The attention family, mirroring ref_attention.cpp. Rotary position embeddings (rope_rows): one thread per pair
// (x1, x2) of a row, each product rounded to f32 before the add (no fused multiply-add), so the
// bits are the CPU's.
#include <cmath>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

__global__ void rope_kernel(const float* x, const float* cos, const float* sin, const int32_t* position, float* out,
                            int64_t rows, int64_t T, int64_t half, int64_t table_rows) {
  const int64_t p0 = position ? *position : 0;
  const bool bad = p0 < 0 || p0 > table_rows - T;
  const int64_t n = rows * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half, j = i % half;
    float* y = out + r * 2 * half;
    if (bad) {
      y[j] = y[half + j] = NAN;
      continue;
    }
    const float* xr = x + r * 2 * half;
    const int64_t t = (p0 + r % T) * half + j;
    const float c = cos[t], s = sin[t], x1 = xr[j], x2 = xr[half + j];
    y[j] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
    y[half + j] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
  }
}

}  // namespace

cudaError_t launch_rope(const float* x, const float* cos, const float* sin, const int32_t* position, float* out, int64_t rows,
                        int64_t T, int64_t half, int64_t table_rows, cudaStream_t stream) {
  const int64_t n = rows * half;
  if (n == 0) return cudaSuccess;
  rope_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, cos, sin, position, out, rows, T, half, table_rows);
  return cudaGetLastError();
}

}  // namespace volta::cuda
