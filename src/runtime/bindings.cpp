// Seeded values for params and inputs: counter-based, one stream per name, so the values do
// not depend on the order of nodes or on how many other values were drawn.
#include <algorithm>

#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta {

Result<Bindings> init_params(const ir::Graph& g, uint64_t seed) {
  Bindings out;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Param) continue;
    Tensor t = Tensor::zeros(n.type.dtype, n.type.shape);
    VOLTA_ASSIGN_OR_RETURN(std::string kind, n.attrs.get_string("init", "normal"));
    VOLTA_ASSIGN_OR_RETURN(double std, n.attrs.get_float("std", 0.02));
    VOLTA_ASSIGN_OR_RETURN(double scale, n.attrs.get_float("scale", 0.0));
    const uint64_t stream = stream_for(n.name);
    if (kind == "normal") fill_normal(t, seed, stream, 0.0f, static_cast<float>(std));
    else if (kind == "uniform") fill_uniform(t, seed, stream, static_cast<float>(-scale), static_cast<float>(scale));
    else if (kind == "ones") std::fill_n(t.data<float>(), t.numel(), 1.0f);
    else if (kind != "zeros") return invalid_argument("[param] unknown init '" + kind + "' " + ir::node_ref(n));
    out.emplace(n.name, std::move(t));
  }
  return out;
}

Result<Bindings> random_inputs(const ir::Graph& g, uint64_t seed) {
  // Integer inputs index something: keep them inside the smallest range any user accepts.
  std::vector<int64_t> bound(g.size(), -1);
  for (const ir::Node& n : g.nodes) {
    int64_t limit = -1;
    int32_t index_input = -1;
    if (n.op == ir::Op::Embedding) {
      limit = g.node(n.inputs[0]).type.shape[0];
      index_input = n.inputs[1];
    } else if (n.op == ir::Op::CrossEntropy) {
      limit = g.node(n.inputs[0]).type.shape.back();
      index_input = n.inputs[1];
    }
    if (index_input >= 0) {
      int64_t& b = bound[static_cast<size_t>(index_input)];
      b = b < 0 ? limit : std::min(b, limit);
    }
  }
  Bindings out;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Input) continue;
    Tensor t = Tensor::zeros(n.type.dtype, n.type.shape);
    const uint64_t stream = stream_for(n.name);
    if (n.type.dtype == DType::f32) {
      fill_normal(t, seed, stream, 0.0f, 1.0f);
    } else {
      int64_t b = bound[static_cast<size_t>(n.id)];
      fill_uniform_int(t, seed, stream, 0, b < 0 ? 2 : std::max<int64_t>(b, 1));
    }
    out.emplace(n.name, std::move(t));
  }
  return out;
}

}  // namespace volta
