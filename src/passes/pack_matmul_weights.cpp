// Constant matmul weights packed once, when the plan is made, in the layout the backend's GEMM
// reads (ir/packed_weight.h): the CPU GEMM otherwise packs every weight's columns again on every
// run, which for a prefill of a few hundred rows is a tenth of the product's time. The weight's
// constant is replaced by its packed copy and each reader gets `b_packed = [kc, nr]`; the bits
// do not change (packing only moves values). Only a constant f32 [K, N] read by matmuls alone,
// as their plain right operand (not transposed or permuted, not also another input), when the
// backend gives one layout for all of them and N is a multiple of its panel width.
#include "ir/packed_weight.h"
#include "volta/passes.h"
#include "volta/verify.h"

namespace volta::passes {

Result<ir::Graph> pack_matmul_weights(ir::Graph g, const PipelineOptions& opts) {
  if (!opts.weight_packing) return g;
  std::vector<std::vector<size_t>> readers(g.size());  // matmuls reading the node as b
  std::vector<bool> other(g.size(), false);            // read any other way
  for (const ir::Node& n : g.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto in = static_cast<size_t>(n.inputs[i]);
      const auto tb = n.attrs.get_int("transpose_b", 0);
      const bool plain_b = n.op == ir::Op::Matmul && i == 1 && !n.attrs.has("b_perm") && !n.attrs.has("b_packed") &&
                           tb.is_ok() && *tb == 0;
      if (plain_b) readers[in].push_back(static_cast<size_t>(n.id));
      else other[in] = true;
    }
  for (int32_t out : g.outputs) other[static_cast<size_t>(out)] = true;
  for (ir::Node& w : g.nodes) {  // in place: each original is dropped as its copy is made
    const auto id = static_cast<size_t>(w.id);
    if (w.op != ir::Op::Constant || w.type.dtype != DType::f32 || w.type.shape.size() != 2 || readers[id].empty() || other[id])
      continue;
    const int64_t K = w.type.shape[0], N = w.type.shape[1];
    std::optional<std::array<int64_t, 2>> layout;
    size_t agree = 0;
    for (size_t r : readers[id]) {
      const ir::Node& mm = g.node(static_cast<int32_t>(r));
      const int64_t rows = N == 0 ? 0 : mm.type.numel() / N;
      const auto want = opts.weight_packing(rows, N, K);
      if (!want || (layout && *layout != *want)) break;
      layout = want;
      ++agree;
    }
    if (agree != readers[id].size() || (*layout)[1] < 1 || N % (*layout)[1] != 0 || (*layout)[0] < 1) continue;
    Tensor packed = Tensor::empty(DType::f32, {K, N});  // repack_weight writes every element
    ir::repack_weight(w.value.data<float>(), packed.data<float>(), K, N, (*layout)[0], (*layout)[1], true);
    w.value = std::move(packed);
    for (size_t r : readers[id]) g.nodes[r].attrs.set("b_packed", std::vector<int64_t>{(*layout)[0], (*layout)[1]});
  }
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(g));
  return g;
}

}  // namespace volta::passes
