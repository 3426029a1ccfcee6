// Stores GELU's derivative beside its value where the backward pass needs it:
//   y = gelu(h)   ...   matmul(a, b, h) {activation = gelu_grad}   (or gelu_grad(h, dy))
//   ->  gg = gelu_and_grad(h) [2, ...]   y = plane 0 of gg   d = plane 1 of gg
//       ...   matmul(a, b, d) {activation = mul}   (or mul(d, dy))
// (the planes are slices along the first axis and reshapes: views). The forward's kernel takes
// both from one exp and erf, and the backward's epilogue becomes a multiply instead of computing
// them again (a training step's MLP: the d hidden product's epilogue). h, whose only readers
// were the gelu and its gradients, is then dead after the forward's gelu; the derivative takes
// its place in memory. Bits: plane 0 is gelu's, and d times dy is gelu_grad's, so nothing
// changes. Only when every live reader of h is the gelu or reads h as gelu_grad's x (erf form).
#include <string>
#include <vector>

#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

bool erf_form(const ir::Node& n) {
  auto approx = n.attrs.get_string("approximate", "none");
  return approx.is_ok() && *approx == "none";
}

// Reads h as the x of a gelu_grad: the matmul epilogue (its third input) or the op (its first).
bool gelu_grad_of(const ir::Node& r, int32_t h) {
  if (r.op == ir::Op::GeluGrad) return erf_form(r) && r.inputs.size() == 2 && r.inputs[0] == h && r.inputs[1] != h;
  if (r.op != ir::Op::Matmul) return false;
  auto act = r.attrs.get_string("activation", "none");
  return act.is_ok() && *act == "gelu_grad" && r.inputs.size() >= 3 && r.inputs[2] == h && r.inputs[0] != h &&
         r.inputs[1] != h && (r.inputs.size() == 3 || r.inputs[3] != h);
}

}  // namespace

Result<ir::Graph> store_gelu_grad(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  const auto live = [&](int32_t id) { return readers.count[static_cast<size_t>(id)] > 0; };
  std::vector<std::vector<int32_t>> read_by(g.size());  // live readers, once per input slot
  for (const ir::Node& n : g.nodes)
    if (live(n.id))
      for (int32_t in : n.inputs) read_by[static_cast<size_t>(in)].push_back(n.id);
  for (const ir::Node& y : g.nodes) {
    if (y.op != ir::Op::Gelu || !erf_form(y) || !live(y.id) || y.type.dtype != DType::f32) continue;
    const int32_t h = y.inputs[0];
    const std::vector<int32_t>& rs = read_by[static_cast<size_t>(h)];
    // Every read of h (a graph output's too: the counts then differ) is the gelu's or a gradient's.
    std::vector<int32_t> grads;
    bool others = static_cast<int>(rs.size()) != readers.count[static_cast<size_t>(h)];
    for (int32_t r : rs) {
      if (r == y.id) continue;
      if (gelu_grad_of(g.node(r), h)) grads.push_back(r);
      else others = true;
    }
    if (others || grads.empty()) continue;
    ir::Node both;
    both.op = ir::Op::GeluAndGrad;
    both.inputs = {h};
    Shape s = y.type.shape;
    s.insert(s.begin(), 2);
    both.type = TensorType{DType::f32, s};
    const std::string name = y.name;
    const int32_t gg = append_node(out, std::move(both), name + "/and_grad");
    take_plane(out, y.id, gg, 0);
    ir::Node grad;  // becomes plane 1: the derivative, of the gelu's type
    grad.op = ir::Op::Reshape;
    grad.type = out.node(y.id).type;
    const int32_t d = append_node(out, std::move(grad), name + "/grad");
    take_plane(out, d, gg, 1);
    for (int32_t r : grads) {
      ir::Node& n = out.node(r);
      if (n.op == ir::Op::Matmul) {
        n.attrs.set("activation", std::string("mul"));
        n.inputs[2] = d;
      } else {  // gelu_grad(h, dy) -> mul(d, dy): d first, as gelu_grad's product has it
        n.op = ir::Op::Mul;
        n.inputs = {d, n.inputs[1]};
        n.attrs = ir::Attrs{};
      }
    }
  }
  return out;
}

}  // namespace volta::passes
