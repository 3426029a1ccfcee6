// Folds the head split and merge around attention into the attention nodes (packed_heads):
//   q, k, v = heads(slice(x, last axis, thirds))      heads(t) = transpose(reshape(t, [.., T, H, D]), swap T and H)
//   y = attention(q, k, v)    merged = reshape(transpose(y, swap), [.., T, H D])
//   g = attention_grad(q, k, v, heads(dy))    dx = concat(merge(g[0]), merge(g[1]), merge(g[2]), last axis)
// become
//   merged = attention(x, x, x) {packed_heads = H}    dx = attention_grad(x, x, x, dy) {packed_heads = H}
// so the kernels read the packed projection and write the merged output (and the projection's
// gradient) in place through their strides: no slice, transpose or concat copies, with the bits of
// the nodes replaced (a copy changes no value). The attention nodes left without readers, and the
// copies only they read, go with dead-code elimination. Runs after the attention fusions.
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

// The permutation that swaps the two axes before the last of a rank-r value.
std::vector<int64_t> head_swap(size_t r) {
  std::vector<int64_t> p(r);
  for (size_t i = 0; i < r; ++i) p[i] = static_cast<int64_t>(i);
  std::swap(p[r - 3], p[r - 2]);
  return p;
}

bool is_head_swap(const ir::Node& t) {
  if (t.op != ir::Op::Transpose || t.type.shape.size() < 3) return false;
  auto perm = t.attrs.get_ints("perm");
  return perm.is_ok() && *perm == head_swap(t.type.shape.size());
}

// Whether `merged` [.., T, H D] is `split` [.., T, H, D] with its last two dims joined.
bool joins_heads(const Shape& merged, const Shape& split) {
  return merged.size() + 1 == split.size() && std::equal(merged.begin(), merged.end() - 1, split.begin()) &&
         merged.back() == split[split.size() - 2] * split.back();
}

// If `id` [.., H, T, D] is heads(x) for a merged [.., T, H D] value x, that x.
int32_t merged_of(const ir::Graph& g, int32_t id) {
  const ir::Node& t = g.node(id);
  if (!is_head_swap(t)) return -1;
  const ir::Node& r = g.node(t.inputs[0]);
  if (r.op != ir::Op::Reshape) return -1;
  return joins_heads(g.node(r.inputs[0]).type.shape, r.type.shape) ? r.inputs[0] : -1;
}

// If `id` is heads(slice(x, last axis, third `part`)), x [.., T, 3 H D].
int32_t packed_of(const ir::Graph& g, int32_t id, int64_t part) {
  const int32_t s = merged_of(g, id);
  if (s < 0) return -1;
  const ir::Node& sl = g.node(s);
  if (sl.op != ir::Op::Slice) return -1;
  const Shape& x = g.node(sl.inputs[0]).type.shape;
  const int64_t c = sl.type.shape.back();
  auto axis = sl.attrs.get_int("axis", 0), start = sl.attrs.get_int("start", 0);
  if (!axis.is_ok() || !start.is_ok() || axis_index(*axis, static_cast<int64_t>(x.size())) != static_cast<int64_t>(x.size()) - 1)
    return -1;
  if (x.back() != 3 * c || *start != part * c) return -1;
  return sl.inputs[0];
}

}  // namespace

int32_t packed_projection(const ir::Graph& g, int32_t q, int32_t k, int32_t v) {
  const int32_t x = packed_of(g, q, 0);
  return x >= 0 && packed_of(g, k, 1) == x && packed_of(g, v, 2) == x ? x : -1;
}

namespace {

class Matcher {
 public:
  Matcher(const ir::Graph& g, const Readers& live) : g_(g), live_(live), read_by_(g.size()) {
    for (const ir::Node& n : g.nodes)
      for (int32_t in : n.inputs) read_by_[static_cast<size_t>(in)].push_back(n.id);
  }

  // The one live reader of `id`, or -1.
  int32_t only_reader(int32_t id) const {
    if (!live_.one(id)) return -1;
    int32_t found = -1;
    for (int32_t r : read_by_[static_cast<size_t>(id)]) {
      if (found >= 0 && r != found) return -1;  // a dead reader besides: leave it
      found = r;
    }
    return found;
  }

  // If y [.., H, T, D]'s one reader chain is reshape(transpose(y, swap), [.., T, H D]), the reshape.
  int32_t merge_of(int32_t y) const {
    const int32_t t = only_reader(y);
    if (t < 0 || !is_head_swap(g_.node(t)) || g_.node(t).inputs[0] != y) return -1;
    const int32_t r = only_reader(t);
    if (r < 0 || g_.node(r).op != ir::Op::Reshape) return -1;
    return joins_heads(g_.node(r).type.shape, g_.node(t).type.shape) ? r : -1;
  }

  // If attention_grad g's three parts are merged and concatenated, in order, along the last axis
  // of one value [.., T, 3 H D], that concat.
  int32_t concat_of(const ir::Node& grad) const {
    int32_t concat = -1;
    for (int64_t part = 0; part < 3; ++part) {
      int32_t slice = -1;
      for (int32_t r : read_by_[static_cast<size_t>(grad.id)]) {
        const ir::Node& s = g_.node(r);
        auto axis = s.attrs.get_int("axis", -1), start = s.attrs.get_int("start", -1);
        if (s.op == ir::Op::Slice && axis.is_ok() && *axis == 0 && start.is_ok() && *start == part && s.type.shape[0] == 1)
          slice = r;
      }
      if (slice < 0) return -1;
      const int32_t view = only_reader(slice);  // [1, ..] -> q's shape
      if (view < 0 || g_.node(view).op != ir::Op::Reshape || g_.node(view).type != g_.node(grad.inputs[0]).type) return -1;
      const int32_t merged = merge_of(view);
      const int32_t c = merged < 0 ? -1 : only_reader(merged);
      if (c < 0 || (concat >= 0 && c != concat)) return -1;
      const ir::Node& cn = g_.node(c);
      if (cn.op != ir::Op::Concat || !last_axis_of(cn) || cn.inputs.size() != 3 || cn.inputs[static_cast<size_t>(part)] != merged)
        return -1;
      concat = c;
    }
    return live_.count[static_cast<size_t>(grad.id)] == 3 ? concat : -1;
  }

 private:
  static bool last_axis_of(const ir::Node& c) {
    auto axis = c.attrs.get_int("axis", 0);
    const auto r = static_cast<int64_t>(c.type.shape.size());
    return axis.is_ok() && axis_index(*axis, r) == r - 1;
  }

  const ir::Graph& g_;
  const Readers& live_;
  std::vector<std::vector<int32_t>> read_by_;
};

// Node `at` of out becomes op(inputs) with attrs plus packed_heads, when its type checks.
void rewrite(ir::Graph& out, int32_t at, ir::Op op, std::vector<int32_t> inputs, ir::Attrs attrs, int64_t heads) {
  attrs.set("packed_heads", heads);
  std::vector<TensorType> types;
  for (int32_t in : inputs) types.push_back(out.node(in).type);
  auto t = ir::infer_type(op, types, attrs);
  ir::Node& n = out.node(at);
  if (!t.is_ok() || *t != n.type) return;
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
}

}  // namespace

Result<ir::Graph> fuse_attention_heads(const ir::Graph& g) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  const Matcher m(g, readers);
  for (const ir::Node& n : g.nodes) {
    const bool fwd = n.op == ir::Op::Attention && n.inputs.size() == 3 && !n.attrs.has("prefix");
    const bool bwd = n.op == ir::Op::AttentionGrad;
    if ((!fwd && !bwd) || n.attrs.has("packed_heads") || n.type.dtype != DType::f32) continue;
    const int32_t x = packed_projection(g, n.inputs[0], n.inputs[1], n.inputs[2]);
    if (x < 0) continue;
    const Shape& q = g.node(n.inputs[0]).type.shape;
    const int64_t heads = q[q.size() - 3];
    if (fwd) {
      const int32_t merged = m.merge_of(n.id);
      if (merged >= 0) rewrite(out, merged, ir::Op::Attention, {x, x, x}, n.attrs, heads);
      continue;
    }
    const int32_t dy = merged_of(g, n.inputs[3]);
    const int32_t concat = dy < 0 ? -1 : m.concat_of(n);
    if (concat >= 0) rewrite(out, concat, ir::Op::AttentionGrad, {x, x, x, dy}, n.attrs, heads);
  }
  return out;
}

}  // namespace volta::passes
