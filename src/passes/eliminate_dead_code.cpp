// Precondition: a verified graph. Keeps every node an output depends on, plus all inputs and
// params: they are the graph's interface, which callers bind by name whatever the passes did;
// and every node that writes state in place (ir::writes_input), whose effect is the write.
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

Result<ir::Graph> eliminate_dead_code(const ir::Graph& g) {
  std::vector<bool> live(g.size(), false);
  std::vector<int32_t> stack(g.outputs.begin(), g.outputs.end());
  for (const ir::Node& n : g.nodes) {
    bool writes = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) writes = writes || ir::writes_input(n.op, i);
    if (n.op == ir::Op::Input || n.op == ir::Op::Param || writes) stack.push_back(n.id);
  }
  while (!stack.empty()) {
    int32_t id = stack.back();
    stack.pop_back();
    if (live[static_cast<size_t>(id)]) continue;
    live[static_cast<size_t>(id)] = true;
    for (int32_t in : g.node(id).inputs) stack.push_back(in);
  }
  std::vector<int32_t> replace(g.size());
  for (size_t i = 0; i < g.size(); ++i) replace[i] = live[i] ? static_cast<int32_t>(i) : -1;
  return rebuild(g, replace);
}

}  // namespace volta::passes
