// Elementwise kernels: every op of category Unary or Binary in ops.def, and gelu. Each element is
// ir/scalar_math.h's double evaluation rounded once to f32, the same functions the CPU reference
// evaluates (for + - * / that is the correctly rounded result).
#include <utility>

#include "backends/cuda/launch.cuh"
#include "ir/scalar_math.h"

namespace volta::cuda {
namespace {

template <ir::Op op>
__global__ void binary_kernel(const float* x, const float* y, float* out, int64_t n, StridedIndex idx, bool same_shape) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ox = same_shape ? i : strided_offset(idx, 0, i);
    const int64_t oy = same_shape ? i : strided_offset(idx, 1, i);
    out[i] = static_cast<float>(ir::scalar_binary<op>(static_cast<double>(x[ox]), static_cast<double>(y[oy])));
  }
}

template <ir::Op op>
__global__ void unary_kernel(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<float>(ir::scalar_unary<op>(static_cast<double>(x[i])));
}

__global__ void gelu_kernel(const float* x, float* out, int64_t n, bool tanh_form) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double v = x[i];
    out[i] = static_cast<float>(tanh_form ? ir::gelu_tanh(v) : ir::gelu_erf(v));
  }
}

// One kernel instantiation per op of the category; `want` picks it at run time.
template <ir::Op op>
bool try_binary(ir::Op want, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx, bool same,
                cudaStream_t s, cudaError_t& err) {
  if constexpr (ir::op_category(op) == ir::OpCategory::Binary) {
    if (want != op) return false;
    binary_kernel<op><<<grid_for(n), kThreads, 0, s>>>(x, y, out, n, idx, same);
    err = cudaGetLastError();
    return true;
  }
  return false;
}

template <ir::Op op>
bool try_unary(ir::Op want, const float* x, float* out, int64_t n, cudaStream_t s, cudaError_t& err) {
  if constexpr (ir::op_category(op) == ir::OpCategory::Unary) {
    if (want != op) return false;
    unary_kernel<op><<<grid_for(n), kThreads, 0, s>>>(x, out, n);
    err = cudaGetLastError();
    return true;
  }
  return false;
}

template <size_t... I>
cudaError_t binary(ir::Op op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx, bool same,
                   cudaStream_t s, std::index_sequence<I...>) {
  cudaError_t err = cudaErrorInvalidValue;
  (void)(try_binary<static_cast<ir::Op>(I)>(op, x, y, out, n, idx, same, s, err) || ...);
  return err;
}

template <size_t... I>
cudaError_t unary(ir::Op op, const float* x, float* out, int64_t n, cudaStream_t s, std::index_sequence<I...>) {
  cudaError_t err = cudaErrorInvalidValue;
  (void)(try_unary<static_cast<ir::Op>(I)>(op, x, out, n, s, err) || ...);
  return err;
}

}  // namespace

cudaError_t launch_binary(ir::Op op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx,
                          bool same_shape, cudaStream_t stream) {
  if (n == 0) return ir::op_category(op) == ir::OpCategory::Binary ? cudaSuccess : cudaErrorInvalidValue;
  return binary(op, x, y, out, n, idx, same_shape, stream, std::make_index_sequence<ir::kNumOps>{});
}

cudaError_t launch_unary(ir::Op op, const float* x, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return ir::op_category(op) == ir::OpCategory::Unary ? cudaSuccess : cudaErrorInvalidValue;
  return unary(op, x, out, n, stream, std::make_index_sequence<ir::kNumOps>{});
}

cudaError_t launch_gelu(const float* x, float* out, int64_t n, bool tanh_form, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gelu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n, tanh_form);
  return cudaGetLastError();
}

}  // namespace volta::cuda
