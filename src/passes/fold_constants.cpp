// Precondition: a verified graph. Evaluates, with the reference CPU kernels, every node whose
// inputs are all constants (results up to kMaxFoldElements elements) and turns it into a
// constant of the same name. The inputs it no longer reads are left for dead-code elimination.
#include "backends/cpu/kernels.h"
#include "volta/passes.h"

namespace volta::passes {

Result<ir::Graph> fold_constants(const ir::Graph& g) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, ir::topological_order(g));
  ir::Graph out = g;
  for (int32_t id : order) {
    ir::Node& n = out.node(id);
    if (ir::is_leaf(n.op) || n.type.numel() > kMaxFoldElements) continue;
    bool all_constant = true;
    for (int32_t in : n.inputs) all_constant = all_constant && out.node(in).op == ir::Op::Constant;
    if (!all_constant) continue;
    std::vector<Tensor> inputs;
    for (int32_t in : n.inputs) inputs.push_back(out.node(in).value);
    VOLTA_ASSIGN_OR_RETURN(Tensor value, cpu::evaluate_reference(n, inputs));
    n.op = ir::Op::Constant;
    n.inputs.clear();
    n.attrs = {};
    n.value = std::move(value);
  }
  return out;
}

}  // namespace volta::passes
