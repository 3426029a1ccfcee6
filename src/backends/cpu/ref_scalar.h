// The CPU's dispatch over the fusable elementwise ops (categories Unary and Binary of ops.def),
// whose math is ir/scalar_math.h: with_elementwise_op(op, f) calls f.template operator()<op>()
// with op a template argument. It instantiates every such op's scalar function, so an op added
// to the table without its math fails to compile.
#pragma once

#include <utility>

#include "ir/scalar_math.h"
#include "volta/ir.h"

namespace volta::cpu::ref {

using ir::scalar_binary;
using ir::scalar_unary;

constexpr bool scalar_binary_op(ir::Op op) { return ir::op_category(op) == ir::OpCategory::Binary; }

namespace detail {

template <ir::Op op, typename F>
bool call_if(ir::Op want, F& f) {
  if constexpr (ir::elementwise_arity(ir::op_category(op)) > 0) {
    if constexpr (scalar_binary_op(op)) (void)&scalar_binary<op>;
    else (void)&scalar_unary<op>;
    if (want == op) {
      f.template operator()<op>();
      return true;
    }
  }
  return false;
}

template <typename F, size_t... I>
bool dispatch(ir::Op op, F& f, std::index_sequence<I...>) {
  return (call_if<static_cast<ir::Op>(I)>(op, f) || ...);
}

}  // namespace detail

// False when `op` is not a fusable elementwise op (ir::elementwise_arity 0).
template <typename F>
bool with_elementwise_op(ir::Op op, F&& f) {
  return detail::dispatch(op, f, std::make_index_sequence<ir::kNumOps>{});
}

}  // namespace volta::cpu::ref
