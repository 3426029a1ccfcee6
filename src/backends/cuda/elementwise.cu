// Elementwise kernels, mirroring ref_elementwise.cpp: every op of category Unary or Binary in
// ops.def. Each element is
// ir/scalar_math.h's double evaluation rounded once to f32, the same functions the CPU reference
// evaluates (for + - * / that is the correctly rounded result).
#include "backends/cuda/launch.cuh"
#include "ir/scalar_math.h"

namespace volta::cuda {
namespace {

template <ir::Op op, typename I>
__global__ void binary_kernel(const float* x, const float* y, float* out, int64_t n, StridedIndex idx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ox = strided_offset<I>(idx, 0, static_cast<I>(i));
    const int64_t oy = strided_offset<I>(idx, 1, static_cast<I>(i));
    out[i] = static_cast<float>(ir::scalar_binary<op>(static_cast<double>(x[ox]), static_cast<double>(y[oy])));
  }
}

// Operands out-shaped (period 0) or repeating every `period` elements: one remainder at most
// per operand instead of a division per dim (index arithmetic is what a bias add spends on).
template <ir::Op op, typename I>
__global__ void binary_period_kernel(const float* x, const float* y, float* out, I n, I px, I py) {
  for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const I ox = px == 0 ? i : i % px, oy = py == 0 ? i : i % py;
    out[i] = static_cast<float>(ir::scalar_binary<op>(static_cast<double>(x[ox]), static_cast<double>(y[oy])));
  }
}

template <ir::Op op>
__global__ void unary_kernel(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<float>(ir::scalar_unary<op>(static_cast<double>(x[i])));
}

// binary_period_kernel four outputs a thread (float4_walk, periods multiples of 4).
template <ir::Op op>
__global__ void binary_period4_kernel(const float4* x, const float4* y, float4* out, uint32_t n4, uint32_t px4, uint32_t py4) {
  auto f = [](float a, float b) { return static_cast<float>(ir::scalar_binary<op>(static_cast<double>(a), static_cast<double>(b))); };
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
    const float4 a = x[px4 == 0 ? i : i % px4], b = y[py4 == 0 ? i : i % py4];
    out[i] = make_float4(f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w));
  }
}

}  // namespace

// One kernel instantiation per op of the category (ir::with_op_of_category); `op` picks it.
cudaError_t launch_binary(ir::Op op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx,
                          int64_t period_x, int64_t period_y, cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  ir::with_op_of_category<ir::OpCategory::Binary>(op, [&](auto k) {
    if (n == 0) {
      err = cudaSuccess;
      return;
    }
    // uint32_t: i + the grid's stride (at most 2^28) stays below 2^32 for any n < 2^31.
    if (period_x >= 0 && period_y >= 0 && period_x % 4 == 0 && period_y % 4 == 0 && float4_walk(n, {x, y, out}))
      binary_period4_kernel<decltype(k)::value><<<grid_for(n / 4), kThreads, 0, stream>>>(
          reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(y), reinterpret_cast<float4*>(out),
          static_cast<uint32_t>(n / 4), static_cast<uint32_t>(period_x / 4), static_cast<uint32_t>(period_y / 4));
    else if (period_x >= 0 && period_y >= 0 && n <= INT32_MAX)
      binary_period_kernel<decltype(k)::value, uint32_t><<<grid_for(n), kThreads, 0, stream>>>(
          x, y, out, static_cast<uint32_t>(n), static_cast<uint32_t>(period_x), static_cast<uint32_t>(period_y));
    else if (period_x >= 0 && period_y >= 0)
      binary_period_kernel<decltype(k)::value, int64_t><<<grid_for(n), kThreads, 0, stream>>>(x, y, out, n, period_x, period_y);
    else if (index_fits_32(idx, n, 2))
      binary_kernel<decltype(k)::value, int32_t><<<grid_for(n), kThreads, 0, stream>>>(x, y, out, n, idx);
    else
      binary_kernel<decltype(k)::value, int64_t><<<grid_for(n), kThreads, 0, stream>>>(x, y, out, n, idx);
    err = cudaGetLastError();
  });
  return err;
}

cudaError_t launch_unary(ir::Op op, const float* x, float* out, int64_t n, cudaStream_t stream) {
  cudaError_t err = cudaErrorInvalidValue;
  ir::with_op_of_category<ir::OpCategory::Unary>(op, [&](auto k) {
    if (n == 0) {
      err = cudaSuccess;
      return;
    }
    unary_kernel<decltype(k)::value><<<grid_for(n), kThreads, 0, stream>>>(x, out, n);
    err = cudaGetLastError();
  });
  return err;
}

}  // namespace volta::cuda
