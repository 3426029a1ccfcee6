// Fuses trees of elementwise ops (add, mul, exp, erf, ...: ir::elementwise_arity) into one
// fused_elementwise node whose `program` replays them, so the intermediate values are never
// written out as whole tensors. Roots are visited consumers first; an input joins a root's tree
// when it is itself fusable, has the root's type (the same shape: only the tree's leaves may
// broadcast) and the tree is its one (live) reader. A tree of one op stays as it is.
// The kernel rounds every step to f32 as the unfused node would, so the bits do not change
// (src/backends/cpu/elementwise.cpp). Runs after the targeted fusions, which look for
// some of these ops (the attention softmax's scale, the matmul epilogue's bias and activation).
#include <functional>

#include "ir/elementwise_program.h"
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

constexpr size_t kMaxLeaves = 16;  // fused_elementwise's inputs at most

bool fusable(const ir::Graph& g, const ir::Node& n) {
  if (ir::elementwise_arity(n.op) == 0 || n.type.dtype != DType::f32) return false;
  for (int32_t in : n.inputs)
    if (g.node(in).type.dtype != DType::f32) return false;
  return true;
}

}  // namespace

Result<ir::Graph> fuse_elementwise(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int32_t> order, ir::topological_order(g));
  std::vector<bool> taken(g.size(), false);  // folded into a tree already
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node& root = g.node(*it);
    if (taken[static_cast<size_t>(root.id)] || readers.count[static_cast<size_t>(root.id)] == 0 || !fusable(g, root)) continue;
    // Operands while growing: leaf k as -1 - k, step j as j.
    std::vector<ir::ElementwiseStep> steps;
    std::vector<int32_t> leaves, members;
    // Counted as nodes join (before their inputs are visited), so a tree stops growing at the
    // program's step limit: the recursion is at most that deep, and each root costs at most that
    // many visits however long a chain of elementwise ops is.
    size_t joined = 0;
    std::function<int32_t(int32_t)> emit = [&](int32_t id) -> int32_t {
      const ir::Node& n = g.node(id);
      const bool joins = id == root.id || (fusable(g, n) && n.type == root.type && readers.one(id) &&
                                           !taken[static_cast<size_t>(id)] && joined < ir::kMaxElementwiseSteps);
      if (!joins) {
        for (size_t k = 0; k < leaves.size(); ++k)
          if (leaves[k] == id) return -1 - static_cast<int32_t>(k);
        leaves.push_back(id);
        return -static_cast<int32_t>(leaves.size());
      }
      ++joined;
      ir::ElementwiseStep s{n.op};
      s.a = emit(n.inputs[0]);
      if (n.inputs.size() == 2) s.b = emit(n.inputs[1]);
      members.push_back(id);
      steps.push_back(s);
      return static_cast<int32_t>(steps.size()) - 1;
    };
    emit(root.id);
    if (steps.size() < 2 || leaves.size() > kMaxLeaves) continue;
    ir::ElementwiseProgram p;
    p.inputs = static_cast<int32_t>(leaves.size());
    auto operand = [&](int32_t o) { return o < 0 ? -1 - o : p.inputs + o; };
    for (ir::ElementwiseStep s : steps) {
      s.a = operand(s.a);
      s.b = ir::elementwise_arity(s.op) == 2 ? operand(s.b) : -1;  // -1 while growing is leaf 0
      p.steps.push_back(s);
    }
    ir::Attrs attrs{{"program", ir::print_elementwise_program(p)}};
    std::vector<TensorType> types;
    for (int32_t l : leaves) types.push_back(g.node(l).type);
    auto t = ir::infer_type(ir::Op::FusedElementwise, types, attrs);
    if (!t.is_ok() || *t != root.type) continue;
    for (int32_t m : members) taken[static_cast<size_t>(m)] = true;
    ir::Node& fused = out.node(root.id);
    fused.op = ir::Op::FusedElementwise;
    fused.inputs = leaves;
    fused.attrs = std::move(attrs);  // the other members lose their reader
  }
  return out;
}

}  // namespace volta::passes
