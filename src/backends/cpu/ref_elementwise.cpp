// Reference elementwise kernels: every Unary and Binary op of ops.def (binary ops with numpy
// broadcasting), clip, bitwise_and and fused_elementwise. Each f32 element is computed in double
// and rounded once to f32 (for + - * / this equals the correctly rounded f32 result); integer
// operands (ir::has_integer_math) compute in their own width.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/ref_scalar.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

template <typename F>
Status binary(const KernelArgs& a, F f) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const Shape& out_shape = a.out.shape();
  const std::array<Strides, 2> st = {broadcast_strides(a.in[0].shape(), out_shape),
                                     broadcast_strides(a.in[1].shape(), out_shape)};
  const float* x = in_f32(a, 0);
  const float* y = in_f32(a, 1);
  float* out = out_f32(a);
  for_each_index(out_shape, st, [&](int64_t n, const std::array<int64_t, 2>& off) {
    out[n] = static_cast<float>(f(static_cast<double>(x[off[0]]), static_cast<double>(y[off[1]])));
  });
  return Status::ok();
}

// An op with integer math (ir::has_integer_math) on i32 or i64 operands, in their width.
template <ir::Op op, typename T>
Status integer_typed(const KernelArgs& a) {
  const Shape& out_shape = a.out.shape();
  T* out = a.out.as<T>();
  const T* x = a.in[0].as<const T>();
  if constexpr (op == ir::Op::BitwiseAnd || ir::elementwise_arity(op) == 2) {
    const std::array<Strides, 2> st = {broadcast_strides(a.in[0].shape(), out_shape),
                                       broadcast_strides(a.in[1].shape(), out_shape)};
    const T* y = a.in[1].as<const T>();
    for_each_index(out_shape, st, [&](int64_t n, const std::array<int64_t, 2>& off) {
      out[n] = ir::integer_binary<op, T>(x[off[0]], y[off[1]]);
    });
  } else {
    for (int64_t i = 0; i < a.out.numel(); ++i) out[i] = ir::integer_unary<op, T>(x[i]);
  }
  return Status::ok();
}

template <ir::Op op>
Status integer(const KernelArgs& a) {
  const DType t = a.out.type.dtype;
  for (const TensorRef& in : a.in)
    if (in.type.dtype != t)
      return internal_error(op_prefix(a.node) + "integer operands differ in dtype " + ir::node_ref(a.node));
  if (t == DType::i32) return integer_typed<op, int32_t>(a);
  if (t == DType::i64) return integer_typed<op, int64_t>(a);
  return internal_error(op_prefix(a.node) + "integer math on " + dtype_name(t) + " " + ir::node_ref(a.node));
}

}  // namespace

// Every fusable elementwise op (ops.def's Unary and Binary rows): its math, element by element.
template <ir::Op op>
Status elementwise(const KernelArgs& a) {
  if constexpr (ir::has_integer_math(op))
    if (is_integer(a.out.type.dtype)) return integer<op>(a);
  if constexpr (ir::elementwise_arity(op) == 2) return binary(a, scalar_binary<op>);
  else return map_unary(a, scalar_unary<op>);
}
#define VOLTA_OP(Id, name, min_in, max_in, category, ...) \
  VOLTA_IF_FUSABLE(category, template Status elementwise<ir::Op::Id>(const KernelArgs& a);)
#include "volta/ops.def"
#undef VOLTA_OP

Status BitwiseAnd(const KernelArgs& a) { return integer<ir::Op::BitwiseAnd>(a); }

// Bounds are rounded to f32 first so that clip(x) is always one of x, min or max; nan stays nan.
Status Clip(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Clip>(a.node));
  const double lo = static_cast<float>(at->min), hi = static_cast<float>(at->max);
  return map_unary(a, [lo, hi](double x) {
    const double y = x < lo ? lo : x;  // numpy's order: min after max, so min > max gives max
    return y > hi ? hi : y;
  });
}

// Each step over the whole tensor (inputs broadcast first), rounded to f32 as its own node would
// store it.
Status FusedElementwise(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const ir::ElementwiseProgram p, elementwise_program(a));
  const Shape& shape = a.out.shape();
  const int64_t n = count(shape);
  std::vector<std::vector<float>> v(a.in.size() + p.steps.size(), std::vector<float>(static_cast<size_t>(n)));
  for (size_t i = 0; i < a.in.size(); ++i) {
    const float* x = in_f32(a, i);
    for_each_index(shape, std::array<Strides, 1>{broadcast_strides(a.in[i].shape(), shape)},
                   [&](int64_t k, const std::array<int64_t, 1>& off) { v[i][static_cast<size_t>(k)] = x[off[0]]; });
  }
  for (size_t j = 0; j < p.steps.size(); ++j) {
    const ir::ElementwiseStep& s = p.steps[j];
    std::vector<float>& out = v[a.in.size() + j];
    const std::vector<float>& x = v[static_cast<size_t>(s.a)];
    const std::vector<float>* y = s.b >= 0 ? &v[static_cast<size_t>(s.b)] : nullptr;
    with_elementwise_op(s.op, [&]<ir::Op op>() {
      for (size_t k = 0; k < out.size(); ++k) {
        if constexpr (scalar_binary_op(op)) out[k] = static_cast<float>(scalar_binary<op>(x[k], (*y)[k]));
        else out[k] = static_cast<float>(scalar_unary<op>(x[k]));
      }
    });
  }
  std::copy(v.back().begin(), v.back().end(), out_f32(a));
  return Status::ok();
}

Result<ir::ElementwiseProgram> elementwise_program(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::FusedElementwise>(a.node));
  const std::string& text = at->program;
  auto p = ir::parse_elementwise_program(text, static_cast<int32_t>(a.in.size()));
  if (!p.is_ok()) return invalid_argument(op_prefix(a.node) + "program: " + p.status().message() + " " + ir::node_ref(a.node));
  return p;
}

}  // namespace volta::cpu::ref
