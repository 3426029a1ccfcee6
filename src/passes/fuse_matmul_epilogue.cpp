// Folds a matmul's elementwise epilogue into it:
//   add(matmul(a, b), bias) or add(bias, matmul(a, b))  ->  matmul(a, b, bias)
//   relu(matmul(...)) / gelu(matmul(...))              ->  matmul(...) {activation}
// where bias is an f32 [N] vector (N: the matmul's columns) and gelu is the erf form. Only when
// the matmul is the one (live) reader's input, so nothing else needs the value that disappears:
// a training graph's gelu_grad reads the pre-activation, so there only the bias is folded.
// The CPU kernel applies the epilogue with the bits of the unfused kernels.
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

bool plain_matmul(const ir::Node& n) {
  auto act = n.attrs.get_string("activation", "none");
  return n.op == ir::Op::Matmul && act.is_ok() && *act == "none";
}

}  // namespace

Result<ir::Graph> fuse_matmul_epilogue(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int> readers, live_readers(g));
  auto only_reader = [&](int32_t id) { return readers[static_cast<size_t>(id)] == 1; };
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int32_t> order, ir::topological_order(g));
  for (int32_t id : order) {  // inputs first: gelu(add(matmul, bias)) folds completely
    ir::Node& y = out.node(id);
    if (y.op == ir::Op::Add) {
      for (int side = 0; side < 2; ++side) {
        const ir::Node& m = out.node(y.inputs[static_cast<size_t>(side)]);
        const ir::Node& bias = out.node(y.inputs[static_cast<size_t>(1 - side)]);
        if (!plain_matmul(m) || m.inputs.size() != 2 || !only_reader(m.id) || m.type != y.type || m.type.shape.empty() ||
            bias.type != TensorType{DType::f32, {m.type.shape.back()}})
          continue;
        const int32_t bias_id = bias.id;
        y.op = ir::Op::Matmul;
        y.attrs = m.attrs;
        y.inputs = {m.inputs[0], m.inputs[1], bias_id};  // the old matmul loses its reader
        break;
      }
    } else if (y.op == ir::Op::Relu || y.op == ir::Op::Gelu) {
      auto approx = y.attrs.get_string("approximate", "none");
      const ir::Node& m = out.node(y.inputs[0]);
      if (!approx.is_ok() || *approx != "none" || !plain_matmul(m) || !only_reader(m.id)) continue;
      const std::string act = y.op == ir::Op::Relu ? "relu" : "gelu";
      y.op = ir::Op::Matmul;
      y.inputs = m.inputs;
      y.attrs = m.attrs;
      y.attrs.set("activation", act);
    }
  }
  return out;
}

}  // namespace volta::passes
