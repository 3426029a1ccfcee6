// Keeps a training step's attention probabilities from the forward for the backward:
//   y = attention(q, k, v)   ...   g = attention_grad(q, k, v, dy)
//   ->  a = attention(q, k, v) {store_probs = 1}   y = a's first elements, p = the rest
//       g = attention_grad(q, k, v, dy, p)
// (y and p are slices and reshapes of a: views). The backward kernel then reads each group's
// probabilities instead of recomputing q kᵀ, its softmax rows and the kᵀ pack: measured on the
// CPU at the shakespeare-char shapes (T = 64), about 30% of attention_grad's time. The price is
// G T T floats per attention held from the forward to the backward (that step's planned memory:
// 38.7 -> 41.8 MB). Same bits: the forward writes the rows the backward's recomputation
// gives (src/backends/cpu/attention.cpp). Only self-attention whose gradient reads exactly the
// forward's q, k, v and attributes, and up to kMaxKeys keys, beyond which the stored matrices
// grow as T² while the recomputation they save is a product over D.
#include <vector>

#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {
constexpr int64_t kMaxKeys = 256;
}  // namespace

Result<ir::Graph> store_attention_probs(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  const auto live = [&](int32_t id) { return readers.count[static_cast<size_t>(id)] > 0; };
  std::vector<bool> taken(g.size(), false);  // attention nodes already storing
  for (const ir::Node& gr : g.nodes) {
    if (gr.op != ir::Op::AttentionGrad || gr.inputs.size() != 4 || !live(gr.id)) continue;
    const std::vector<int32_t> qkv(gr.inputs.begin(), gr.inputs.begin() + 3);
    int32_t y = -1;
    for (const ir::Node& n : g.nodes)
      if (n.op == ir::Op::Attention && n.inputs == qkv && n.attrs == gr.attrs && live(n.id) && !taken[static_cast<size_t>(n.id)])
        y = n.id;
    if (y < 0) continue;
    const Shape& q = g.node(qkv[0]).type.shape;
    if (q.size() < 2 || q[q.size() - 2] > kMaxKeys) continue;
    const auto heads = gr.attrs.get_int("packed_heads", 0);
    const Shape ps = ir::attention_probs_shape(q, heads.is_ok() ? *heads : 0, q[q.size() - 2]);
    ir::Attrs attrs = gr.attrs;
    attrs.set("store_probs", int64_t{1});
    std::vector<TensorType> in;
    for (int32_t id : gr.inputs) in.push_back(g.node(id).type);
    auto flat = ir::infer_type(ir::Op::Attention, std::span(in).first(3), attrs);
    in.push_back(TensorType{DType::f32, ps});
    if (!flat.is_ok() || !ir::infer_type(ir::Op::AttentionGrad, in, gr.attrs).is_ok()) continue;
    taken[static_cast<size_t>(y)] = true;
    const int64_t n = g.node(y).type.numel();
    ir::Node both;
    both.op = ir::Op::Attention;
    both.inputs = qkv;
    both.attrs = std::move(attrs);
    both.type = *flat;
    const std::string name = g.node(y).name;
    const int32_t a = append_node(out, std::move(both), name + "/with_probs");
    take_rows(out, y, a, 0, n);
    ir::Node p;
    p.op = ir::Op::Reshape;
    p.type = TensorType{DType::f32, ps};
    const int32_t pid = append_node(out, std::move(p), name + "/probs");
    take_rows(out, pid, a, n, flat->numel());
    out.node(gr.id).inputs.push_back(pid);
  }
  return out;
}

}  // namespace volta::passes
