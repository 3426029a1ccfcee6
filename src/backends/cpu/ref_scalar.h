// The elementwise ops one element at a time, in double (rounded once to f32 by the caller; for
// + - * / that equals the correctly rounded f32 result). The reference kernels and the fused
// elementwise kernels both evaluate these, so a fused chain has the bits of the unfused ops.
#pragma once

#include <cmath>

#include "volta/ir.h"

namespace volta::cpu::ref {

// Stable in both tails: never evaluates exp of a large positive number.
inline double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

constexpr bool scalar_binary_op(ir::Op op) {
  return op == ir::Op::Add || op == ir::Op::Sub || op == ir::Op::Mul || op == ir::Op::Div || op == ir::Op::Pow;
}

template <ir::Op op>
inline double scalar_unary(double x) {
  using ir::Op;
  if constexpr (op == Op::Neg) return -x;
  else if constexpr (op == Op::Exp) return std::exp(x);
  else if constexpr (op == Op::Log) return std::log(x);
  else if constexpr (op == Op::Sqrt) return std::sqrt(x);
  else if constexpr (op == Op::Tanh) return std::tanh(x);
  else if constexpr (op == Op::Relu) return std::isnan(x) ? x : (x > 0 ? x : 0.0);  // nan propagates; relu(-0) = +0
  else if constexpr (op == Op::Sigmoid) return sigmoid(x);
  else if constexpr (op == Op::Silu) return x * sigmoid(x);
  else if constexpr (op == Op::Erf) return std::erf(x);
  else if constexpr (op == Op::Abs) return std::fabs(x);
  else if constexpr (op == Op::Sign) return std::isnan(x) ? x : (x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0);  // sign(+-0) = 0
  else static_assert(op == Op::Neg, "not a unary elementwise op");
}

template <ir::Op op>
inline double scalar_binary(double x, double y) {
  using ir::Op;
  if constexpr (op == Op::Add) return x + y;
  else if constexpr (op == Op::Sub) return x - y;
  else if constexpr (op == Op::Mul) return x * y;
  else if constexpr (op == Op::Div) return x / y;
  else if constexpr (op == Op::Pow) return std::pow(x, y);
  else static_assert(op == Op::Add, "not a binary elementwise op");
}

// Calls f.template operator()<op>() for the fusable elementwise op `op` (ir::elementwise_arity).
template <typename F>
bool with_elementwise_op(ir::Op op, F&& f) {
  using ir::Op;
  switch (op) {
#define VOLTA_EW_CASE(X) \
  case Op::X: f.template operator()<Op::X>(); return true;
    VOLTA_EW_CASE(Add) VOLTA_EW_CASE(Sub) VOLTA_EW_CASE(Mul) VOLTA_EW_CASE(Div) VOLTA_EW_CASE(Pow)
    VOLTA_EW_CASE(Neg) VOLTA_EW_CASE(Exp) VOLTA_EW_CASE(Log) VOLTA_EW_CASE(Sqrt) VOLTA_EW_CASE(Tanh)
    VOLTA_EW_CASE(Relu) VOLTA_EW_CASE(Sigmoid) VOLTA_EW_CASE(Silu) VOLTA_EW_CASE(Erf) VOLTA_EW_CASE(Abs)
    VOLTA_EW_CASE(Sign)
#undef VOLTA_EW_CASE
    default: return false;
  }
}

}  // namespace volta::cpu::ref
