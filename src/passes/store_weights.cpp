// How inference stores its weights; none of it is part of the pipeline, the commands ask for it.
// - store_weights_as: bf16 or f16. A leaf whose every reader takes it as a matmul's right operand
//   is stored at half the bytes; the CPU matmul widens it as it reads (exactly), so results are
//   those of f32 weights rounded once to the storage dtype. Decode reads every weight once per
//   token: half the bytes is up to twice the tokens/s where weights stream from memory.
// - store_weights_packed: f32, bf16 or f16 params in the backend GEMM's packed layout (b_packed).
// - untie_transposed_weights: a transposed copy of a param matmuls read transposed.
#include "passes/rewrite.h"
#include "volta/passes.h"
#include "volta/verify.h"

namespace volta::passes {

Result<ir::Graph> store_weights_as(const ir::Graph& g, DType dtype, std::vector<std::string>* converted) {
  if (!is_half(dtype)) return invalid_argument(std::string("--weights: weights are stored as bf16 or f16, not ") + dtype_name(dtype));
  // A leaf qualifies while every use is a matmul's input 1 (and it is used at all).
  std::vector<int> uses(g.size(), 0);
  std::vector<bool> ok(g.size(), true);
  for (const ir::Node& n : g.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto in = static_cast<size_t>(n.inputs[i]);
      uses[in] += 1;
      ok[in] = ok[in] && n.op == ir::Op::Matmul && i == 1;
    }
  for (int32_t out : g.outputs) ok[static_cast<size_t>(out)] = false;  // a graph output keeps its dtype
  ir::Graph out = g;
  for (ir::Node& n : out.nodes) {
    const auto id = static_cast<size_t>(n.id);
    if ((n.op != ir::Op::Param && n.op != ir::Op::Constant) || n.type.dtype != DType::f32 || n.type.shape.size() < 2 ||
        uses[id] == 0 || !ok[id])
      continue;
    n.type.dtype = dtype;
    if (n.op == ir::Op::Constant) {
      n.value = narrow_to(n.value, dtype);
      continue;
    }
    n.attrs.set("trainable", int64_t{0});
    if (converted) converted->push_back(n.name);
  }
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(out));
  return out;
}

Result<ir::Graph> store_weights_packed(const ir::Graph& g, const std::map<std::string, std::array<int64_t, 2>>& layouts) {
  ir::Graph out = g;
  std::vector<const std::array<int64_t, 2>*> layout(g.size(), nullptr);
  for (ir::Node& n : out.nodes) {
    auto it = n.op == ir::Op::Param ? layouts.find(n.name) : layouts.end();
    if (it == layouts.end()) continue;
    const auto [kc, nr] = it->second;
    if ((n.type.dtype != DType::f32 && !is_half(n.type.dtype)) || n.type.shape.size() != 2 || kc < 1 || nr < 1 ||
        n.type.shape[1] % nr != 0)
      return invalid_argument("param '" + n.name + "' (" + n.type.to_string() + ") cannot be stored in panels of " +
                              std::to_string(nr) + " columns");
    layout[static_cast<size_t>(n.id)] = &it->second;
    n.attrs.set("trainable", int64_t{0});
  }
  for (ir::Node& n : out.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::array<int64_t, 2>* l = layout[static_cast<size_t>(n.inputs[i])];
      if (!l) continue;
      const auto tb = n.attrs.get_int("transpose_b", 0);
      const bool plain_b = n.op == ir::Op::Matmul && i == 1 && !n.attrs.has("b_perm") && !n.attrs.has("b_packed") &&
                           tb.is_ok() && *tb == 0;
      if (!plain_b)
        return invalid_argument("param '" + g.node(n.inputs[i]).name + "' is stored packed but read other than as a matmul's plain weight " +
                                ir::node_ref(n));
      n.attrs.set("b_packed", std::vector<int64_t>{(*l)[0], (*l)[1]});
    }
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(out));
  return out;
}

Result<ir::Graph> untie_transposed_weights(const ir::Graph& g, std::vector<std::pair<std::string, std::string>>* copies) {
  ir::Graph out = g;
  std::vector<int32_t> copy(g.size(), -1);  // by param id: its transposed copy
  for (size_t i = 0; i < g.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const auto tb = n.attrs.get_int("transpose_b", 0);
    if (n.op != ir::Op::Matmul || n.inputs.size() < 2 || !tb.is_ok() || *tb != 1 || n.attrs.has("b_perm") ||
        n.attrs.has("b_packed"))
      continue;
    const int32_t w = n.inputs[1];
    const ir::Node& p = g.node(w);
    if (p.op != ir::Op::Param || p.type.dtype != DType::f32 || p.type.shape.size() != 2) continue;
    if (copy[static_cast<size_t>(w)] < 0) {
      ir::Node t;
      t.op = ir::Op::Param;
      t.type = {DType::f32, {p.type.shape[1], p.type.shape[0]}};
      t.attrs.set("trainable", int64_t{0});
      copy[static_cast<size_t>(w)] = append_node(out, std::move(t), p.name + ".t");
      if (copies) copies->emplace_back(out.nodes.back().name, p.name);
    }
    ir::Node& m = out.nodes[i];
    m.inputs[1] = copy[static_cast<size_t>(w)];
    m.attrs.set("transpose_b", int64_t{0});
  }
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(out));
  return out;
}

}  // namespace volta::passes
