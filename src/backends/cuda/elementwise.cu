// Elementwise kernels, mirroring ref_elementwise.cpp: each element is computed in double and
// rounded once to f32, like the reference (for + - * / that is the correctly rounded result).
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

template <BinaryOp op>
__device__ inline double apply(double x, double y) {
  if constexpr (op == BinaryOp::Add) return x + y;
  if constexpr (op == BinaryOp::Sub) return x - y;
  if constexpr (op == BinaryOp::Mul) return x * y;
  return x / y;
}

template <BinaryOp op>
__global__ void binary_kernel(const float* x, const float* y, float* out, int64_t n, StridedIndex idx, bool same_shape) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t ox = same_shape ? i : strided_offset(idx, 0, i);
    const int64_t oy = same_shape ? i : strided_offset(idx, 1, i);
    out[i] = static_cast<float>(apply<op>(static_cast<double>(x[ox]), static_cast<double>(y[oy])));
  }
}

// Stable in both tails, as in the reference.
__device__ inline double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  const double e = exp(x);
  return e / (1.0 + e);
}

template <UnaryOp op>
__device__ inline double apply(double x) {
  if constexpr (op == UnaryOp::Neg) return -x;
  if constexpr (op == UnaryOp::Exp) return exp(x);
  if constexpr (op == UnaryOp::Log) return log(x);
  if constexpr (op == UnaryOp::Sqrt) return sqrt(x);
  if constexpr (op == UnaryOp::Tanh) return tanh(x);
  if constexpr (op == UnaryOp::Relu) return isnan(x) ? x : (x > 0 ? x : 0.0);  // NaN propagates, relu(-0) = +0
  if constexpr (op == UnaryOp::GeluErf) return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
  if constexpr (op == UnaryOp::GeluTanh) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  if constexpr (op == UnaryOp::Silu) return x * sigmoid(x);
  return sigmoid(x);
}

template <UnaryOp op>
__global__ void unary_kernel(const float* x, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<float>(apply<op>(static_cast<double>(x[i])));
}

template <BinaryOp op>
cudaError_t binary(const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx, bool same,
                   cudaStream_t s) {
  binary_kernel<op><<<grid_for(n), kThreads, 0, s>>>(x, y, out, n, idx, same);
  return cudaGetLastError();
}

template <UnaryOp op>
cudaError_t unary(const float* x, float* out, int64_t n, cudaStream_t s) {
  unary_kernel<op><<<grid_for(n), kThreads, 0, s>>>(x, out, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_binary(BinaryOp op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx,
                          bool same_shape, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case BinaryOp::Add: return binary<BinaryOp::Add>(x, y, out, n, idx, same_shape, stream);
    case BinaryOp::Sub: return binary<BinaryOp::Sub>(x, y, out, n, idx, same_shape, stream);
    case BinaryOp::Mul: return binary<BinaryOp::Mul>(x, y, out, n, idx, same_shape, stream);
    case BinaryOp::Div: return binary<BinaryOp::Div>(x, y, out, n, idx, same_shape, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_unary(UnaryOp op, const float* x, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case UnaryOp::Neg: return unary<UnaryOp::Neg>(x, out, n, stream);
    case UnaryOp::Exp: return unary<UnaryOp::Exp>(x, out, n, stream);
    case UnaryOp::Log: return unary<UnaryOp::Log>(x, out, n, stream);
    case UnaryOp::Sqrt: return unary<UnaryOp::Sqrt>(x, out, n, stream);
    case UnaryOp::Tanh: return unary<UnaryOp::Tanh>(x, out, n, stream);
    case UnaryOp::Relu: return unary<UnaryOp::Relu>(x, out, n, stream);
    case UnaryOp::GeluErf: return unary<UnaryOp::GeluErf>(x, out, n, stream);
    case UnaryOp::GeluTanh: return unary<UnaryOp::GeluTanh>(x, out, n, stream);
    case UnaryOp::Silu: return unary<UnaryOp::Silu>(x, out, n, stream);
    case UnaryOp::Sigmoid: return unary<UnaryOp::Sigmoid>(x, out, n, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace volta::cuda
