// The shape/dtype rules of the gated MLP activations: swiglu and its gradient.
#include "ir/infer_rules.h"

namespace volta::ir::rules {

// swiglu: x [..., 2F] -> [..., F]. swiglu_grad: x [..., 2F], dy [..., F] -> x's type.
Result<TensorType> infer_swiglu(Op op, std::span<const TensorType> in) {
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  const Shape& x = in[0].shape;
  if (x.empty() || x.back() % 2 != 0)
    return fail(op, "x must be [..., 2F] (the gate, then the up projection), got " + in[0].to_string());
  Shape half = x;
  half.back() /= 2;
  if (op == Op::Swiglu) return TensorType{DType::f32, half};
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "dy"));
  if (in[1].shape != half) return fail(op, "dy " + in[1].to_string() + " must be x " + in[0].to_string() + " with its last axis halved");
  return in[0];
}

}  // namespace volta::ir::rules
