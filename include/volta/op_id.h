// The op ids and categories of ops.def, alone: plain C++17, so CUDA sources (nvcc) share them.
// The rest of each op's contract is ir::OpInfo (volta/ir.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace volta::ir {

enum class Op : uint8_t {
#define VOLTA_OP(Id, ...) Id,
#include "volta/ops.def"
#undef VOLTA_OP
};

constexpr int kNumOps = 0
#define VOLTA_OP(Id, ...) +1
#include "volta/ops.def"
#undef VOLTA_OP
    ;

// What an op is (ops.def's category column). Unary and Binary are the fusable elementwise ops,
// whose math is written once in src/ir/scalar_math.h.
enum class OpCategory : uint8_t {
  Leaf, Unary, Binary, Elementwise, Linear, Norm, Attention, Fused, Layout, Select, Pool, Reduction, Loss,
  Gradient, Training, Cache
};

namespace detail {
constexpr OpCategory kCategories[] = {
#define VOLTA_OP(Id, name, min_in, max_in, category, ...) OpCategory::category,
#include "volta/ops.def"
#undef VOLTA_OP
};
}  // namespace detail

constexpr OpCategory op_category(Op op) { return detail::kCategories[static_cast<int>(op)]; }

// For X-macro expansions of ops.def that treat the fusable elementwise ops (Unary and Binary
// rows) as one template: VOLTA_IF_FUSABLE(category, x) is x for those rows and nothing for the
// others, VOLTA_UNLESS_FUSABLE the opposite, VOLTA_FUSABLE_PICK(category, yes, no) one of the two.
// A category added to OpCategory needs its line here.
#define VOLTA_IF_FUSABLE(category, x) VOLTA_FUSABLE_##category(x, )
#define VOLTA_UNLESS_FUSABLE(category, x) VOLTA_FUSABLE_##category(, x)
#define VOLTA_FUSABLE_PICK(category, yes, no) VOLTA_FUSABLE_##category(yes, no)
#define VOLTA_FUSABLE_Leaf(yes, no) no
#define VOLTA_FUSABLE_Unary(yes, no) yes
#define VOLTA_FUSABLE_Binary(yes, no) yes
#define VOLTA_FUSABLE_Elementwise(yes, no) no
#define VOLTA_FUSABLE_Linear(yes, no) no
#define VOLTA_FUSABLE_Norm(yes, no) no
#define VOLTA_FUSABLE_Attention(yes, no) no
#define VOLTA_FUSABLE_Fused(yes, no) no
#define VOLTA_FUSABLE_Layout(yes, no) no
#define VOLTA_FUSABLE_Select(yes, no) no
#define VOLTA_FUSABLE_Pool(yes, no) no
#define VOLTA_FUSABLE_Reduction(yes, no) no
#define VOLTA_FUSABLE_Loss(yes, no) no
#define VOLTA_FUSABLE_Gradient(yes, no) no
#define VOLTA_FUSABLE_Training(yes, no) no
#define VOLTA_FUSABLE_Cache(yes, no) no

// The fusable elementwise ops' operand count (categories Unary and Binary), 0 for the others.
constexpr int elementwise_arity(OpCategory c) { return c == OpCategory::Unary ? 1 : c == OpCategory::Binary ? 2 : 0; }
constexpr int elementwise_arity(Op op) { return elementwise_arity(op_category(op)); }

namespace detail {
template <OpCategory c, Op op, typename F>
bool visit_if(Op want, F& f) {
  if constexpr (op_category(op) == c) {
    if (want == op) {
      f(std::integral_constant<Op, op>{});
      return true;
    }
  }
  return false;
}
template <OpCategory c, typename F, size_t... I>
bool visit(Op want, F& f, std::index_sequence<I...>) {
  return (visit_if<c, static_cast<Op>(I)>(want, f) || ...);
}
}  // namespace detail

// Calls f(std::integral_constant<Op, op>{}) when `op` is of category `c`, so f sees the op as a
// compile-time constant (one instantiation per op of the category); false for any other op.
// The CPU and CUDA elementwise kernels dispatch through it.
template <OpCategory c, typename F>
bool with_op_of_category(Op op, F&& f) {
  return detail::visit<c>(op, f, std::make_index_sequence<static_cast<size_t>(kNumOps)>{});
}

}  // namespace volta::ir
