// The math of the elementwise ops, one element at a time in double, written once: the CPU
// reference kernels, the fused elementwise kernels (CPU and the fusion program) and the CUDA
// kernels all evaluate these functions, and each caller rounds the result once to f32 (for
// + - * / that equals the correctly rounded f32 result). Plain C++17 and __host__ __device__
// under nvcc; the C math functions are called unqualified so the device overloads are found.
//
// Every op of category Unary or Binary in ops.def must have its case here: the CPU dispatch
// (backends/cpu/ref_scalar.h) instantiates each one, and a missing case fails its static_assert.
#pragma once

#include <math.h>

#include <type_traits>

#include "volta/op_id.h"

#if defined(__CUDACC__)
#define VOLTA_HD __host__ __device__
#else
#define VOLTA_HD
#endif

namespace volta::ir {

template <Op>
inline constexpr bool kNoScalarMath = false;

// Stable in both tails: never evaluates exp of a large positive number.
VOLTA_HD inline double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  const double e = exp(x);
  return e / (1.0 + e);
}

template <Op op>
VOLTA_HD inline double scalar_unary(double x) {
  if constexpr (op == Op::Neg) return -x;
  else if constexpr (op == Op::Exp) return exp(x);
  else if constexpr (op == Op::Log) return log(x);
  else if constexpr (op == Op::Sqrt) return sqrt(x);
  else if constexpr (op == Op::Tanh) return tanh(x);
  else if constexpr (op == Op::Relu) return x != x ? x : (x > 0 ? x : 0.0);  // nan propagates; relu(-0) = +0
  else if constexpr (op == Op::Sigmoid) return sigmoid(x);
  else if constexpr (op == Op::Silu) return x * sigmoid(x);
  else if constexpr (op == Op::Erf) return erf(x);
  else if constexpr (op == Op::Abs) return fabs(x);
  else if constexpr (op == Op::Sign) return x != x ? x : (x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0);  // sign(+-0) = 0
  else static_assert(kNoScalarMath<op>, "a Unary op of ops.def without its math here");
}

template <Op op>
VOLTA_HD inline double scalar_binary(double x, double y) {
  if constexpr (op == Op::Add) return x + y;
  else if constexpr (op == Op::Sub) return x - y;
  else if constexpr (op == Op::Mul) return x * y;
  else if constexpr (op == Op::Div) return x / y;
  else if constexpr (op == Op::Pow) return pow(x, y);
  else static_assert(kNoScalarMath<op>, "a Binary op of ops.def without its math here");
}

// The integer math of the ops that also take i32 / i64 operands (ops.def says which): every
// result in the operand's own width, two's complement, so + - * and neg wrap as the integer ops
// of ONNX runtimes do; div truncates toward zero, x / 0 = 0 and min / -1 = min (no trap on any
// input); pow by squaring with wrapping products, a negative exponent giving the truncated
// 1 / a^-e (1 for a = 1, +-1 for a = -1, else 0).
constexpr bool has_integer_math(Op op) {
  return op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Div || op == Op::Pow || op == Op::Neg ||
         op == Op::Abs || op == Op::Sign || op == Op::Relu || op == Op::BitwiseAnd;
}

template <typename T>
struct Wrapping {  // T's arithmetic done in its unsigned twin, which is defined to wrap
  using U = typename std::make_unsigned<T>::type;
  static VOLTA_HD T add(T a, T b) { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); }
  static VOLTA_HD T sub(T a, T b) { return static_cast<T>(static_cast<U>(a) - static_cast<U>(b)); }
  static VOLTA_HD T mul(T a, T b) { return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); }
};

template <Op op, typename T>
VOLTA_HD inline T integer_unary(T x) {
  using W = Wrapping<T>;
  if constexpr (op == Op::Neg) return W::sub(0, x);
  else if constexpr (op == Op::Abs) return x < 0 ? W::sub(0, x) : x;
  else if constexpr (op == Op::Sign) return static_cast<T>((x > 0) - (x < 0));
  else if constexpr (op == Op::Relu) return x > 0 ? x : 0;
  else static_assert(kNoScalarMath<op>, "an op without integer math");
}

template <Op op, typename T>
VOLTA_HD inline T integer_binary(T a, T b) {
  using W = Wrapping<T>;
  if constexpr (op == Op::Add) return W::add(a, b);
  else if constexpr (op == Op::Sub) return W::sub(a, b);
  else if constexpr (op == Op::Mul) return W::mul(a, b);
  else if constexpr (op == Op::BitwiseAnd) return static_cast<T>(a & b);
  else if constexpr (op == Op::Div) {
    if (b == 0) return 0;
    if (b == -1) return W::sub(0, a);  // min / -1 overflows: its wrapped value, min
    return static_cast<T>(a / b);
  } else if constexpr (op == Op::Pow) {
    if (b < 0) return a == 1 ? T{1} : a == -1 ? ((b & 1) ? T{-1} : T{1}) : T{0};
    T r = 1;
    for (T e = b, base = a; e > 0; e >>= 1) {
      if (e & 1) r = W::mul(r, base);
      if (e > 1) base = W::mul(base, base);
    }
    return r;
  } else static_assert(kNoScalarMath<op>, "an op without integer math");
}

VOLTA_HD inline double silu_derivative(double x) {  // s (1 + x (1 - s)), s = sigmoid(x)
  const double s = sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

// swiglu on one (gate, up) pair and its gradient for dy, each with the f32 roundings of the
// unfused ops: silu(gate) stored, then times up; d gate = silu'(gate) * (dy * up stored), d up =
// dy * silu(gate) stored.
VOLTA_HD inline float swiglu_value(double g, double u) {
  return static_cast<float>(static_cast<double>(static_cast<float>(scalar_unary<Op::Silu>(g))) * u);
}
VOLTA_HD inline void swiglu_grads(double g, double u, double d, float* dg, float* du) {
  *dg = static_cast<float>(silu_derivative(g) * static_cast<float>(d * u));
  *du = static_cast<float>(d * static_cast<float>(scalar_unary<Op::Silu>(g)));
}

// gelu (approximate = "none": x Phi(x) with the erf; "tanh": the tanh approximation) and its
// derivative, which gelu_grad multiplies by dy.
constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kPi = 3.141592653589793;
constexpr double kGeluTanhC = 0.7978845608028654;  // sqrt(2 / pi)

VOLTA_HD inline double gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x * kSqrt2 / 2.0)); }
VOLTA_HD inline double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(kGeluTanhC * (x + 0.044715 * x * x * x))); }
VOLTA_HD inline double gelu_erf_derivative(double v) {  // Phi(x) + x phi(x)
  return 0.5 * (1.0 + erf(v / kSqrt2)) + v * (1.0 / sqrt(2.0 * kPi)) * exp(-0.5 * v * v);
}
VOLTA_HD inline double gelu_tanh_derivative(double v) {
  const double t = tanh(kGeluTanhC * (v + 0.044715 * v * v * v));
  return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * kGeluTanhC * (1.0 + 3.0 * 0.044715 * v * v);
}

}  // namespace volta::ir
