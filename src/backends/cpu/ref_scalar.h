// The CPU's dispatch over the fusable elementwise ops (categories Unary and Binary of ops.def),
// whose math is ir/scalar_math.h: with_elementwise_op(op, f) calls f.template operator()<op>()
// with op a template argument. It instantiates every such op's scalar function, so an op added
// to the table without its math fails to compile.
#pragma once

#include "ir/scalar_math.h"
#include "volta/ir.h"

namespace volta::cpu::ref {

using ir::scalar_binary;
using ir::scalar_unary;

constexpr bool scalar_binary_op(ir::Op op) { return ir::op_category(op) == ir::OpCategory::Binary; }

// False when `op` is not a fusable elementwise op (ir::elementwise_arity 0).
template <typename F>
bool with_elementwise_op(ir::Op op, F&& f) {
  auto call = [&f](auto k) {
    constexpr ir::Op o = decltype(k)::value;
    if constexpr (scalar_binary_op(o)) (void)&scalar_binary<o>;  // every such op has its math
    else (void)&scalar_unary<o>;
    f.template operator()<o>();
  };
  return ir::with_op_of_category<ir::OpCategory::Unary>(op, call) || ir::with_op_of_category<ir::OpCategory::Binary>(op, call);
}

}  // namespace volta::cpu::ref
