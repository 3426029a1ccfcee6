#include "rewrite.h"

namespace volta::passes {

Result<ir::Graph> rebuild(const ir::Graph& g, const std::vector<int32_t>& replace) {
  // Follow merge chains to the surviving node (replace[r] == r).
  auto survivor = [&](int32_t id) {
    for (size_t hops = 0; id >= 0 && replace[static_cast<size_t>(id)] != id && hops <= g.size(); ++hops)
      id = replace[static_cast<size_t>(id)];
    return id;
  };
  std::vector<int32_t> new_id(g.size(), -1);
  ir::Graph out;
  out.name = g.name;
  for (const ir::Node& n : g.nodes) {
    if (replace[static_cast<size_t>(n.id)] != n.id) continue;
    new_id[static_cast<size_t>(n.id)] = static_cast<int32_t>(out.nodes.size());
    out.nodes.push_back(n);
    out.nodes.back().id = new_id[static_cast<size_t>(n.id)];
  }
  auto remap = [&](int32_t old, const std::string& who) -> Result<int32_t> {
    int32_t s = survivor(old);
    if (s < 0 || new_id[static_cast<size_t>(s)] < 0)
      return internal_error("rewrite dropped value '" + g.node(old).name + "' still read by " + who);
    return new_id[static_cast<size_t>(s)];
  };
  for (ir::Node& n : out.nodes)
    for (int32_t& in : n.inputs) {
      VOLTA_ASSIGN_OR_RETURN(in, remap(in, "'" + n.name + "'"));
    }
  for (int32_t o : g.outputs) {
    VOLTA_ASSIGN_OR_RETURN(int32_t id, remap(o, "the graph outputs"));
    out.outputs.push_back(id);
  }
  return out;
}

Result<Readers> live_readers(const ir::Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (int32_t o : g.outputs) live[static_cast<size_t>(o)] = true;
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int32_t> order, ir::topological_order(g));
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (live[static_cast<size_t>(*it)])
      for (int32_t in : g.node(*it).inputs) live[static_cast<size_t>(in)] = true;
  std::vector<int> readers(g.size(), 0);
  for (const ir::Node& n : g.nodes)
    if (live[static_cast<size_t>(n.id)])
      for (int32_t in : n.inputs) ++readers[static_cast<size_t>(in)];
  for (int32_t o : g.outputs) ++readers[static_cast<size_t>(o)];
  return Readers{std::move(readers)};
}

bool last_axis(const ir::Node& n) {
  auto axis = n.attrs.get_int("axis", -1);
  return axis.is_ok() && axis_index(*axis, static_cast<int64_t>(n.type.shape.size())) ==
                             static_cast<int64_t>(n.type.shape.size()) - 1;
}

int32_t append_node(ir::Graph& g, ir::Node n, const std::string& base) {
  n.id = static_cast<int32_t>(g.size());
  n.name = base;
  for (int k = 1; g.find(n.name) >= 0; ++k) n.name = base + "_" + std::to_string(k);
  g.nodes.push_back(std::move(n));
  return g.nodes.back().id;
}

void take_rows(ir::Graph& g, int32_t id, int32_t src, int64_t start, int64_t end, const char* suffix) {
  ir::Node slice;
  slice.op = ir::Op::Slice;
  slice.inputs = {src};
  slice.attrs.set("axis", int64_t{0});
  slice.attrs.set("start", start);
  slice.attrs.set("end", end);
  Shape rows = g.node(src).type.shape;
  rows[0] = end - start;
  slice.type = TensorType{g.node(src).type.dtype, rows};
  const int32_t s = append_node(g, std::move(slice), g.node(id).name + suffix);
  ir::Node& n = g.node(id);
  n.op = ir::Op::Reshape;
  n.inputs = {s};
  n.attrs = ir::Attrs{};
  n.attrs.set("shape", n.type.shape);
}

}  // namespace volta::passes
