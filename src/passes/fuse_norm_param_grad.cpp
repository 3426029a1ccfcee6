// Folds the parameter gradients of a layer_norm or rms_norm, as autograd writes them,
//   xhat = layer_norm(x, ones)   p = mul(dy, xhat)   d gamma = reduce_sum(p)   d beta = reduce_sum(dy)
// (the sums over all leading axes), into one norm_param_grad(x, dy) of [2, D] whose rows stand
// for the two sums (slices along the first axis and reshapes: views). xhat and the products are
// then never written: the CPU kernel makes them row by row and sums them as they come, with the
// bits of the unfused nodes. Only when xhat and p have no other (live) reader.
#include <algorithm>

#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

// A gain of ones: a constant of ones, or a broadcast of a scalar constant 1.
bool unit_gain(const ir::Graph& g, const ir::Node& n) {
  const ir::Node& c = n.op == ir::Op::Broadcast && n.inputs.size() == 1 ? g.node(n.inputs[0]) : n;
  if (c.op != ir::Op::Constant || !c.value.defined() || c.type.dtype != DType::f32) return false;
  const float* v = c.value.data<float>();
  return std::all_of(v, v + c.value.numel(), [](float x) { return x == 1.0f; });
}

// reduce_sum over exactly the axes before the last one of its rank->=2 input.
bool sums_leading_axes(const ir::Node& s, const TensorType& in) {
  if (s.op != ir::Op::ReduceSum || in.shape.size() < 2) return false;
  auto axes = s.attrs.get_ints("axes");
  if (!axes.is_ok()) return false;
  const auto rank = static_cast<int64_t>(in.shape.size());
  std::vector<int64_t> a;
  for (int64_t ax : *axes) a.push_back(axis_index(ax, rank));
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  if (static_cast<int64_t>(a.size()) != rank - 1) return false;
  for (int64_t i = 0; i + 1 < rank; ++i)
    if (a[static_cast<size_t>(i)] != i) return false;
  return true;
}

}  // namespace

Result<ir::Graph> fuse_norm_param_grad(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  const size_t n = g.size();
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& s = g.node(static_cast<int32_t>(i));
    if (s.op != ir::Op::ReduceSum || out.node(s.id).op != ir::Op::ReduceSum) continue;
    const ir::Node& p = g.node(s.inputs[0]);
    if (p.op != ir::Op::Mul || !readers.one(p.id) || !sums_leading_axes(s, p.type)) continue;
    for (int side = 0; side < 2; ++side) {
      const ir::Node& xhat = g.node(p.inputs[static_cast<size_t>(side)]);
      const ir::Node& dy = g.node(p.inputs[static_cast<size_t>(1 - side)]);
      if ((xhat.op != ir::Op::LayerNorm && xhat.op != ir::Op::RmsNorm) || xhat.inputs.size() != 2 ||
          !readers.one(xhat.id) || !unit_gain(g, g.node(xhat.inputs[1])) || dy.type != xhat.type ||
          xhat.type != p.type || xhat.type.dtype != DType::f32)
        continue;
      auto eps = xhat.attrs.get_float("eps", 1e-5);
      if (!eps.is_ok()) continue;
      ir::Node npg;
      npg.op = ir::Op::NormParamGrad;
      npg.inputs = {xhat.inputs[0], dy.id};
      npg.attrs.set("eps", *eps);
      npg.attrs.set("center", int64_t{xhat.op == ir::Op::LayerNorm ? 1 : 0});
      npg.type = TensorType{DType::f32, {2, xhat.type.shape.back()}};
      const int32_t id = append_node(out, std::move(npg), s.name + "/norm_param_grad");
      take_plane(out, s.id, id, 0);
      // d beta: a sum of dy over the same axes, if the graph has one.
      for (size_t j = 0; j < n; ++j) {
        const ir::Node& b = g.node(static_cast<int32_t>(j));
        if (b.op == ir::Op::ReduceSum && out.node(b.id).op == ir::Op::ReduceSum && b.inputs[0] == dy.id &&
            sums_leading_axes(b, dy.type) && b.type == s.type) {
          take_plane(out, b.id, id, 1);
          break;
        }
      }
      break;
    }
  }
  return out;
}

}  // namespace volta::passes
