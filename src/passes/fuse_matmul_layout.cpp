// Folds transposes into the matmuls around them, so no transposed copy is written:
//   matmul(transpose(x, p), b)  ->  matmul(x, b) {a_perm = p}     (and b's, b_perm)
//   transpose(matmul(a, b), p)  ->  matmul(a, b) {out_perm = p}   (p keeps the last axis last)
// A transpose folds into its readers when every live reader is a matmul reading it as an
// operand (a head split: q, k, v and their gradients); a matmul's result when the transpose is
// its one reader and it has no epilogue (the heads merged back). The CPU kernel reads and writes
// those matrices in place through their strides, with the bits of the copies it replaces (the
// GEMM's bits never depend on where its operands lie). Runs after the fusions that match plain
// matmuls (attention, the epilogue).
#include <algorithm>

#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

bool plain_f32_matmul(const ir::Graph& g, const ir::Node& m) {
  if (m.op != ir::Op::Matmul || m.inputs.size() < 2 || m.type.dtype != DType::f32) return false;
  return g.node(m.inputs[0]).type.dtype == DType::f32 && g.node(m.inputs[1]).type.dtype == DType::f32;
}

}  // namespace

Result<ir::Graph> fuse_matmul_layout(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int32_t> order, ir::topological_order(g));
  // Who reads each node (live or not: a dead reader is left alone, so it must not block).
  std::vector<std::vector<int32_t>> read_by(g.size());
  for (const ir::Node& n : g.nodes)
    for (int32_t in : n.inputs) read_by[static_cast<size_t>(in)].push_back(n.id);
  for (int32_t id : order) {
    const ir::Node& t = g.node(id);
    if (t.op != ir::Op::Transpose || t.type.dtype != DType::f32 || t.type.shape.size() < 2) continue;
    auto perm = t.attrs.get_ints("perm");
    if (!perm.is_ok()) continue;
    // Its readers: every one a matmul taking it as a or b (not yet through a perm).
    bool all = !read_by[static_cast<size_t>(id)].empty();
    for (int32_t r : read_by[static_cast<size_t>(id)]) {
      const ir::Node& m = out.node(r);
      // (read as a or b only: not as a bias, gelu_grad's x or a residual, which it also may be)
      bool ok = plain_f32_matmul(out, m) && std::find(m.inputs.begin() + 2, m.inputs.end(), id) == m.inputs.end();
      ok = ok && !(m.inputs[0] == id && m.attrs.has("a_perm")) && !(m.inputs[1] == id && m.attrs.has("b_perm"));
      all = all && ok && !m.attrs.has("out_perm");
    }
    if (all) {
      for (int32_t r : read_by[static_cast<size_t>(id)]) {
        ir::Node& m = out.node(r);
        for (size_t i = 0; i < 2; ++i)
          if (m.inputs[i] == id) {
            m.inputs[i] = t.inputs[0];
            m.attrs.set(i == 0 ? "a_perm" : "b_perm", *perm);
          }
      }
      continue;
    }
    // The transpose of a matmul's result, its one reader.
    const ir::Node& m = out.node(t.inputs[0]);
    const auto act = m.attrs.get_string("activation", "none");
    if (perm->back() != static_cast<int64_t>(perm->size()) - 1 || !plain_f32_matmul(out, m) || m.inputs.size() != 2 ||
        !readers.one(m.id) || m.attrs.has("out_perm") || !act.is_ok() || *act != "none")
      continue;
    const std::vector<int32_t> ab = m.inputs;
    ir::Attrs attrs = m.attrs;
    attrs.set("out_perm", *perm);
    ir::Node& fused = out.node(id);
    fused.op = ir::Op::Matmul;
    fused.inputs = ab;  // the old matmul loses its reader
    fused.attrs = std::move(attrs);
  }
  return out;
}

}  // namespace volta::passes
