// The schedule: non-leaf nodes in a deterministic topological order, the ready node of the
// smallest place first (its id, or its earliest reader's place; a graph already in topological
// order keeps its order). A node that writes an input in place (ir::writes_input: the training
// step's state updates) also waits for every other reader of that input, so nothing reads a
// param after its update.
#include <algorithm>
#include <queue>
#include <utility>

#include "volta/plan.h"

namespace volta::plan {

namespace {

// For each node, the nodes that must run before it beyond its inputs: the other readers of a
// value it writes in place.
std::vector<std::vector<int32_t>> write_after_read(const ir::Graph& g) {
  std::vector<std::vector<int32_t>> after(g.size());
  std::vector<std::vector<int32_t>> readers(g.size());
  bool any = false;
  for (const ir::Node& n : g.nodes) {
    for (int32_t in : n.inputs) readers[static_cast<size_t>(in)].push_back(n.id);
    for (size_t i = 0; i < n.inputs.size(); ++i) any = any || ir::writes_input(n.op, i);
  }
  if (!any) return after;
  for (const ir::Node& n : g.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (ir::writes_input(n.op, i))
        for (int32_t r : readers[static_cast<size_t>(n.inputs[i])])
          if (r != n.id) after[static_cast<size_t>(n.id)].push_back(r);
  return after;
}

}  // namespace

Result<std::vector<int32_t>> make_schedule(const ir::Graph& g) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, ir::topological_order(g));  // also rejects cycles
  const std::vector<std::vector<int32_t>> after = write_after_read(g);
  std::vector<int32_t> pending(g.size(), 0);
  std::vector<std::vector<int32_t>> users(g.size());
  for (const ir::Node& n : g.nodes) {
    for (int32_t in : n.inputs) users[static_cast<size_t>(in)].push_back(n.id);
    for (int32_t r : after[static_cast<size_t>(n.id)]) users[static_cast<size_t>(r)].push_back(n.id);
    pending[static_cast<size_t>(n.id)] =
        static_cast<int32_t>(n.inputs.size() + after[static_cast<size_t>(n.id)].size());
  }
  // Each node's place: its id, or the place of its earliest reader if that comes first. A node a
  // pass added (appended to the graph) then runs where the nodes it replaced stood, as soon as
  // its inputs are ready, instead of after every node of a smaller id: the training step's
  // fused norm parameter gradients ran at the very end of the backward pass, reading their
  // activations back from L3. A graph in topological order keeps its order. Readers come
  // before their inputs in reverse topological order, so each place is final when it is passed on.
  std::vector<int32_t> place(g.size());
  for (size_t i = 0; i < place.size(); ++i) place[i] = static_cast<int32_t>(i);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int32_t in : g.node(*it).inputs)
      place[static_cast<size_t>(in)] = std::min(place[static_cast<size_t>(in)], place[static_cast<size_t>(*it)]);
  // Kahn's algorithm over inputs plus the write-after-read edges, the smallest place (then id)
  // first.
  using Ready = std::pair<int32_t, int32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  for (const ir::Node& n : g.nodes)
    if (pending[static_cast<size_t>(n.id)] == 0) ready.push({place[static_cast<size_t>(n.id)], n.id});
  std::vector<int32_t> schedule;
  size_t done = 0;
  while (!ready.empty()) {
    const int32_t id = ready.top().second;
    ready.pop();
    ++done;
    if (!ir::is_leaf(g.node(id).op)) schedule.push_back(id);
    for (int32_t u : users[static_cast<size_t>(id)])
      if (--pending[static_cast<size_t>(u)] == 0) ready.push({place[static_cast<size_t>(u)], u});
  }
  if (done != g.size()) {
    for (const ir::Node& n : g.nodes)
      if (pending[static_cast<size_t>(n.id)] > 0)
        return invalid_argument("[" + std::string(ir::op_name(n.op)) + "] writes a value in place that a node it depends on " +
                                "also reads later " + ir::node_ref(n));
  }
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
  // In-place writers after every other reader of what they write.
  const std::vector<std::vector<int32_t>> after = write_after_read(g);
  for (const ir::Node& n : g.nodes)
    for (int32_t r : after[static_cast<size_t>(n.id)])
      if (!ir::is_leaf(g.node(r).op) && step_of[static_cast<size_t>(r)] > step_of[static_cast<size_t>(n.id)])
        return internal_error("schedule runs " + ir::node_ref(n) + ", which writes a value in place, before its reader '" +
                              g.node(r).name + "'");
  return Status::ok();
}

}  // namespace volta::plan
