// Fuses an attention block into one `attention` node:
//   matmul(softmax(matmul(q, k, transpose_b)), v)  ->  attention(q, k, v)
// carrying the softmax's scale and causal offset, and, when k and v are concats of two blocks
// along the keys' axis (a decode step's cache and its new position), attention(q, k0, v0, k1, v1)
// reads both blocks in place; and when k0 and v0 are leading slices of longer buffers (the cache
// at its full capacity), it reads those through its `prefix` attribute. A softmax whose causal
// offset has a run-time position input (a decode step over its whole cache) gives
// attention(q, k, v, position); fuse_attention_keys_transposed fuses that form when its scores
// product reads its keys as they lie (a key cache stored [.., D, S]) into attention with
// keys_transposed, for the backends whose attention reads keys as columns. Only when each folded node has the next one as its one reader:
// a training graph reads the probabilities again in its backward pass and keeps the unfused form.
// The kernel computes the same bits as the nodes it replaces (src/backends/cpu/attention.cpp).
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

bool flag(const ir::Node& n, const char* key) {
  auto v = n.attrs.get_int(key, 0);
  return !v.is_ok() || *v != 0;
}

// The node's `axis` attribute is `axis` of its value.
bool along(const ir::Node& n, int64_t axis) {
  auto ax = n.attrs.get_int("axis", 0);
  return ax.is_ok() && axis_index(*ax, static_cast<int64_t>(n.type.shape.size())) == axis;
}

// slice(x, axis, 0, e) along `axis`: fills x and returns true.
bool leading_slice(const ir::Node& n, int64_t axis, int32_t* x) {
  auto start = n.attrs.get_int("start", 0);
  if (n.op != ir::Op::Slice || !along(n, axis) || !start.is_ok() || *start != 0) return false;
  *x = n.inputs[0];
  return true;
}

// concat(a, b) along `axis` with `a` and `b` as its only inputs: fills them and returns true.
bool two_block_concat(const ir::Node& n, int64_t axis, int32_t* a, int32_t* b) {
  if (n.op != ir::Op::Concat || n.inputs.size() != 2 || !along(n, axis)) return false;
  *a = n.inputs[0];
  *b = n.inputs[1];
  return true;
}

}  // namespace

namespace {

Result<ir::Graph> fuse(const ir::Graph& g, bool keys_as_columns) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  for (ir::Node& y : out.nodes) {
    if (y.op != ir::Op::Matmul || flag(y, "transpose_a") || flag(y, "transpose_b")) continue;
    const ir::Node& p = out.node(y.inputs[0]);
    if (p.op != ir::Op::Softmax || !readers.one(p.id) || !last_axis(p)) continue;
    const auto rank = static_cast<int64_t>(p.type.shape.size());
    const ir::Node& sc = out.node(p.inputs[0]);
    const bool position = p.inputs.size() == 2;
    if (sc.op != ir::Op::Matmul || flag(sc, "transpose_a") || flag(sc, "transpose_b") == keys_as_columns ||
        (keys_as_columns && !position) || !readers.one(sc.id))
      continue;
    std::vector<int32_t> ins = {sc.inputs[0], sc.inputs[1], y.inputs[1]};
    if (position) ins.push_back(p.inputs[1]);
    int32_t k0, k1, v0, v1;
    if (!position && readers.one(ins[1]) && readers.one(ins[2]) && two_block_concat(out.node(ins[1]), rank - 2, &k0, &k1) &&
        two_block_concat(out.node(ins[2]), rank - 2, &v0, &v1) &&
        out.node(k0).type.shape.size() == static_cast<size_t>(rank) &&
        out.node(k0).type.shape[static_cast<size_t>(rank - 2)] == out.node(v0).type.shape[static_cast<size_t>(rank - 2)])
      ins = {ins[0], k0, v0, k1, v1};
    ir::Attrs attrs;
    for (const char* key : {"scale", "causal_offset"})
      if (p.attrs.has(key)) attrs.set(key, p.attrs.items().at(key));
    if (keys_as_columns) attrs.set("keys_transposed", int64_t{1});
    // Keys and values that are the leading part of a longer buffer (a decode step's cache) are
    // read in place through `prefix`.
    int32_t kx, vx;
    if (!position && readers.one(ins[1]) && readers.one(ins[2]) && leading_slice(out.node(ins[1]), rank - 2, &kx) &&
        leading_slice(out.node(ins[2]), rank - 2, &vx) &&
        out.node(kx).type.shape[static_cast<size_t>(rank - 2)] == out.node(vx).type.shape[static_cast<size_t>(rank - 2)] &&
        out.node(ins[1]).type.shape[static_cast<size_t>(rank - 2)] == out.node(ins[2]).type.shape[static_cast<size_t>(rank - 2)]) {
      attrs.set("prefix", out.node(ins[1]).type.shape[static_cast<size_t>(rank - 2)]);
      ins[1] = kx;
      ins[2] = vx;
    }
    std::vector<TensorType> types;
    for (int32_t i : ins) types.push_back(out.node(i).type);
    auto t = ir::infer_type(ir::Op::Attention, types, attrs);
    if (!t.is_ok() || *t != y.type) continue;  // broadcast batch dims and the like stay unfused
    y.op = ir::Op::Attention;
    y.inputs = std::move(ins);
    y.attrs = std::move(attrs);  // the softmax, the scores and the concats lose their reader
  }
  return out;
}

}  // namespace

Result<ir::Graph> fuse_attention(const ir::Graph& g) { return fuse(g, false); }
Result<ir::Graph> fuse_attention_keys_transposed(const ir::Graph& g) { return fuse(g, true); }

}  // namespace volta::passes
