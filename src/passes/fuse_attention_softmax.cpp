// Folds the elementwise prologue of an attention softmax into the softmax kernel, and the
// matching epilogue of its gradient into softmax_grad:
//   softmax(causal_mask(mul(x, c), offset=o, value=-inf))  ->  softmax(x, scale=c, causal_offset=o)
//   mul(causal_mask(softmax_grad(y, dy), offset=o, value=0), c)  ->  softmax_grad(y, dy, scale=c)
// where c is a scalar constant and y is a fused softmax with the same offset (so y, and with
// it the gradient, is already exactly 0 where the mask would write 0). A node is folded only
// when the fused node is its one reader, so nothing else sees a value that disappears.
// Two full passes over the attention scores become none.
#include <cmath>
#include <limits>

#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

// The value of a one-element f32 constant, if `id` is one.
bool scalar_constant(const ir::Graph& g, int32_t id, double* value) {
  const ir::Node& n = g.node(id);
  if (n.op != ir::Op::Constant || n.type.dtype != DType::f32 || n.type.numel() != 1 || !n.value.defined()) return false;
  *value = n.value.data<float>()[0];
  return true;
}

// mul(a, c) or mul(c, a) with a scalar constant c and a of the mul's own type: a's id, or -1.
int32_t scaled_operand(const ir::Graph& g, const ir::Node& mul, double* c) {
  if (mul.op != ir::Op::Mul) return -1;
  for (int side = 0; side < 2; ++side) {
    const int32_t a = mul.inputs[static_cast<size_t>(side)], k = mul.inputs[static_cast<size_t>(1 - side)];
    if (scalar_constant(g, k, c) && g.node(a).type == mul.type) return a;
  }
  return -1;
}

// The float attribute `key` (causal_mask's `value` defaults to -inf) equals `want`.
bool attr_is(const ir::Node& n, const char* key, double want) {
  auto v = n.attrs.get_float(key, -std::numeric_limits<double>::infinity());
  return v.is_ok() && *v == want;
}

}  // namespace

Result<ir::Graph> fuse_attention_softmax(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));

  // Forward: softmax <- causal_mask(-inf) <- mul(x, c).
  for (ir::Node& sm : out.nodes) {
    if (sm.op != ir::Op::Softmax || sm.attrs.has("scale") || sm.attrs.has("causal_offset") || !last_axis(sm)) continue;
    const ir::Node& mask = out.node(sm.inputs[0]);
    if (mask.op != ir::Op::CausalMask || !readers.one(mask.id) ||
        !attr_is(mask, "value", -std::numeric_limits<double>::infinity()))
      continue;
    double c = 0;
    const int32_t x = scaled_operand(out, out.node(mask.inputs[0]), &c);
    if (x < 0 || !readers.one(mask.inputs[0])) continue;
    VOLTA_ASSIGN_OR_RETURN(const int64_t offset, mask.attrs.get_int("offset", 0));
    sm.attrs.set("scale", c);
    sm.attrs.set("causal_offset", offset);
    sm.inputs = {x};  // the mask and the mul now have no reader; dead-code elimination drops them
  }

  // Backward: mul(causal_mask(softmax_grad(y, dy), 0), c), y from a fused softmax.
  std::vector<int32_t> replace(out.size());
  for (size_t i = 0; i < out.size(); ++i) replace[i] = static_cast<int32_t>(i);
  for (const ir::Node& mul : out.nodes) {
    double c = 0;
    const int32_t m = scaled_operand(out, mul, &c);
    if (m < 0 || !readers.one(m)) continue;
    const ir::Node& mask = out.node(m);
    if (mask.op != ir::Op::CausalMask || !attr_is(mask, "value", 0.0)) continue;
    ir::Node& sg = out.node(mask.inputs[0]);
    if (sg.op != ir::Op::SoftmaxGrad || !readers.one(sg.id) || !last_axis(sg) || !attr_is(sg, "scale", 1.0)) continue;
    const ir::Node& y = out.node(sg.inputs[0]);
    VOLTA_ASSIGN_OR_RETURN(const int64_t offset, mask.attrs.get_int("offset", 0));
    auto y_offset = y.attrs.get_int("causal_offset", 0);
    if (y.op != ir::Op::Softmax || !y.attrs.has("causal_offset") || !y_offset.is_ok() || *y_offset != offset) continue;
    auto y_scale = y.attrs.get_float("scale", 1.0);
    if (!y_scale.is_ok() || *y_scale != c) continue;
    sg.attrs.set("scale", c);
    replace[static_cast<size_t>(mul.id)] = sg.id;  // readers of the mul read the gradient itself
    // the mask is left without live readers: dead-code elimination drops it
  }
  return rebuild(out, replace);
}

}  // namespace volta::passes
