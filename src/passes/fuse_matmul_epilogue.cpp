// Folds a matmul's elementwise epilogue into it:
//   add(matmul(a, b), bias) or add(bias, matmul(a, b))  ->  matmul(a, b, bias)
//   relu(matmul(...)) / gelu(matmul(...))              ->  matmul(...) {activation}
//   gelu_grad(x, matmul(a, b))                         ->  matmul(a, b, x) {activation=gelu_grad}
// where bias is an f32 [N] vector (N: the matmul's columns; a [1, ..., 1, N] one is reshaped, a
// view) and gelu is the erf form. Only when
// the matmul is the one (live) reader's input, so nothing else needs the value that disappears:
// a training graph's gelu_grad reads the pre-activation, so there only the bias is folded into
// the forward matmul; the backward's gelu_grad folds into the matmul that makes its dy (the MLP's
// d hidden), which then never reaches memory as a whole tensor.
// The CPU kernel applies the epilogue with the bits of the unfused kernels, on each task's block
// of the product while it is in cache.
//
// fuse_matmul_residual, after it, folds the residual add of a transformer block:
//   add(r, matmul(...)) or add(matmul(...), r)  ->  matmul(..., r) {residual = 1}
// where r has the sum's type (no broadcast) and the matmul (with or without its own epilogue) is
// the one reader's input. r is added last, with the bits of the separate add: a decode step then
// runs 8 fewer ops per token and a training step's forward writes the projections' outputs once.
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

bool plain_matmul(const ir::Node& n) {
  auto act = n.attrs.get_string("activation", "none");
  return n.op == ir::Op::Matmul && act.is_ok() && *act == "none";
}

// f32 [N], or [1, ..., 1, N] of rank <= `rank` (ONNX's Gemm bias is often [1, N]).
bool row_bias(const TensorType& t, int64_t n, size_t rank) {
  if (t.dtype != DType::f32 || t.shape.empty() || t.shape.size() > rank || t.shape.back() != n) return false;
  for (size_t d = 0; d + 1 < t.shape.size(); ++d)
    if (t.shape[d] != 1) return false;
  return true;
}

// A new node reshaping `id` to [n] (a view: no copy at run time), named after it.
int32_t as_vector(ir::Graph& g, int32_t id, int64_t n) {
  ir::Node r;
  r.op = ir::Op::Reshape;
  r.inputs = {id};
  r.attrs.set("shape", std::vector<int64_t>{n});
  r.type = TensorType{DType::f32, {n}};
  return append_node(g, std::move(r), g.node(id).name + "/as_vector");
}

}  // namespace

Result<ir::Graph> fuse_matmul_epilogue(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int32_t> order, ir::topological_order(g));
  for (int32_t id : order) {  // inputs first: gelu(add(matmul, bias)) folds completely
    ir::Node& y = out.node(id);
    if (y.op == ir::Op::Add) {
      for (int side = 0; side < 2; ++side) {
        const ir::Node& m = out.node(y.inputs[static_cast<size_t>(side)]);
        const ir::Node& bias = out.node(y.inputs[static_cast<size_t>(1 - side)]);
        if (!plain_matmul(m) || m.inputs.size() != 2 || !readers.one(m.id) || m.type != y.type ||
            !row_bias(bias.type, m.type.shape.back(), m.type.shape.size()))
          continue;
        const int64_t n = m.type.shape.back();
        const std::vector<int32_t> ab = m.inputs;
        const ir::Attrs attrs = m.attrs;
        int32_t bias_id = bias.id;
        if (bias.type.shape.size() > 1) bias_id = as_vector(out, bias_id, n);  // invalidates y, m, bias
        ir::Node& fused = out.node(id);
        fused.op = ir::Op::Matmul;
        fused.attrs = attrs;
        fused.inputs = {ab[0], ab[1], bias_id};  // the old matmul loses its reader
        break;
      }
    } else if (y.op == ir::Op::GeluGrad) {
      auto approx = y.attrs.get_string("approximate", "none");
      const ir::Node& m = out.node(y.inputs[1]);
      if (!approx.is_ok() || *approx != "none" || !plain_matmul(m) || m.inputs.size() != 2 || !readers.one(m.id) ||
          m.type != y.type || out.node(y.inputs[0]).type != y.type)
        continue;
      const int32_t x = y.inputs[0];
      const std::vector<int32_t> ab = m.inputs;
      y.op = ir::Op::Matmul;
      y.attrs = m.attrs;
      y.attrs.set("activation", std::string("gelu_grad"));
      y.inputs = {ab[0], ab[1], x};  // the old matmul loses its reader
    } else if (y.op == ir::Op::Relu || y.op == ir::Op::Gelu) {
      auto approx = y.attrs.get_string("approximate", "none");
      const ir::Node& m = out.node(y.inputs[0]);
      if (!approx.is_ok() || *approx != "none" || !plain_matmul(m) || !readers.one(m.id)) continue;
      const std::string act = y.op == ir::Op::Relu ? "relu" : "gelu";
      y.op = ir::Op::Matmul;
      y.inputs = m.inputs;
      y.attrs = m.attrs;
      y.attrs.set("activation", act);
    }
  }
  return out;
}

Result<ir::Graph> fuse_matmul_residual(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int32_t> order, ir::topological_order(g));
  for (int32_t id : order) {
    const ir::Node& y = out.node(id);
    if (y.op != ir::Op::Add || y.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const ir::Node& m = out.node(y.inputs[static_cast<size_t>(side)]);
      const int32_t r = y.inputs[static_cast<size_t>(1 - side)];
      auto residual = m.attrs.get_int("residual", 0);
      if (m.op != ir::Op::Matmul || m.inputs.size() < 2 || !residual.is_ok() || *residual != 0 || m.attrs.has("out_perm") ||
          !readers.one(m.id) || m.type != y.type || out.node(r).type != y.type || r == m.id)
        continue;
      std::vector<int32_t> inputs = m.inputs;
      inputs.push_back(r);
      ir::Attrs attrs = m.attrs;
      attrs.set("residual", int64_t{1});
      ir::Node& fused = out.node(id);
      fused.op = ir::Op::Matmul;
      fused.inputs = std::move(inputs);  // the old matmul loses its reader
      fused.attrs = std::move(attrs);
      break;
    }
  }
  return out;
}

}  // namespace volta::passes
