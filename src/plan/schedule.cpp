// The schedule: non-leaf nodes in a deterministic topological order.
#include "volta/plan.h"

namespace volta::plan {

Result<std::vector<int32_t>> make_schedule(const ir::Graph& g) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, ir::topological_order(g));
  std::vector<int32_t> schedule;
  for (int32_t id : order)
    if (!ir::is_leaf(g.node(id).op)) schedule.push_back(id);
  return schedule;
}

Status verify_schedule(const ir::Graph& g, const std::vector<int32_t>& schedule) {
  std::vector<int32_t> step_of(g.size(), -1);
  for (size_t s = 0; s < schedule.size(); ++s) {
    int32_t id = schedule[s];
    if (id < 0 || id >= static_cast<int32_t>(g.size()))
      return internal_error("schedule step " + std::to_string(s) + " names node id " + std::to_string(id) + " outside the graph");
    if (ir::is_leaf(g.node(id).op)) return internal_error("schedule runs leaf " + ir::node_ref(g.node(id)));
    if (step_of[static_cast<size_t>(id)] >= 0) return internal_error("schedule runs " + ir::node_ref(g.node(id)) + " twice");
    step_of[static_cast<size_t>(id)] = static_cast<int32_t>(s);
    for (int32_t in : g.node(id).inputs)
      if (!ir::is_leaf(g.node(in).op) && step_of[static_cast<size_t>(in)] < 0)
        return internal_error("schedule runs " + ir::node_ref(g.node(id)) + " before its input '" + g.node(in).name + "'");
  }
  for (const ir::Node& n : g.nodes)
    if (!ir::is_leaf(n.op) && step_of[static_cast<size_t>(n.id)] < 0)
      return internal_error("schedule never runs " + ir::node_ref(n));
  return Status::ok();
}

}  // namespace volta::plan
