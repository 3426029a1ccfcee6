// Folds a decode step's KV-cache writes into the attention that reads them:
//   kc = cache_write(ck, k, p)   vc = cache_write(cv, v, p)   y = attention(q, kc, vc, p)
// becomes
//   y = cache_attention(q, ck, cv, k, v, p)
// when the attention is each write's one reader. The fused kernel writes the new rows itself, in
// its tasks, and reads them where they are after the cached rows: two steps a layer fewer, and in
// a team walk (parallel.h) no write that one thread makes alone while the others wait for it. The
// keys and values are the same numbers in the same order, so the bits do not change.
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {
int64_t int_attr(const ir::Node& n, const char* key) {  // -1 when not an integer
  auto v = n.attrs.get_int(key, 0);
  return v.is_ok() ? *v : -1;
}
}  // namespace

Result<ir::Graph> fuse_cache_attention(const ir::Graph& g) {
  VOLTA_ASSIGN_OR_RETURN(const Readers live, live_readers(g));
  ir::Graph out = g;
  std::vector<int32_t> replace(g.size());
  for (size_t i = 0; i < replace.size(); ++i) replace[i] = static_cast<int32_t>(i);
  bool any = false;
  for (ir::Node& y : out.nodes) {
    if (y.op != ir::Op::Attention || y.inputs.size() != 4 || g.node(y.inputs[3]).type.dtype != DType::i32) continue;
    const ir::Node& kw = g.node(y.inputs[1]);
    const ir::Node& vw = g.node(y.inputs[2]);
    const int32_t position = y.inputs[3];
    // Two caches: writes of both rows into one would leave the keys read as values, which the
    // fused kernel (reading the new rows where they are) would not.
    if (kw.op != ir::Op::CacheWrite || vw.op != ir::Op::CacheWrite || kw.inputs[2] != position ||
        vw.inputs[2] != position || kw.inputs[0] == vw.inputs[0] || !live.one(kw.id) || !live.one(vw.id))
      continue;
    ir::Attrs attrs;
    bool plain = true;  // only the attributes cache_attention has (zero_nan_probs and the like stay unfused)
    for (const auto& [key, value] : y.attrs.items()) {
      if (key == "scale" || key == "causal_offset" || key == "keys_transposed") attrs.set(key, value);
      else plain = false;
    }
    // A key cache stored transposed is read so (keys_transposed) and written so; the values' is not.
    if (int_attr(kw, "transposed") != int_attr(y, "keys_transposed") || int_attr(vw, "transposed") != 0) continue;
    const std::vector<int32_t> ins = {y.inputs[0], kw.inputs[0], vw.inputs[0], kw.inputs[1], vw.inputs[1], position};
    std::vector<TensorType> types;
    for (int32_t i : ins) types.push_back(g.node(i).type);
    auto t = ir::infer_type(ir::Op::CacheAttention, types, attrs);
    if (!plain || !t.is_ok() || *t != y.type) continue;
    y.op = ir::Op::CacheAttention;
    y.inputs = ins;
    y.attrs = std::move(attrs);
    // A write's value is its cache's bytes: the readers fuse_attention left dead (the scores
    // product) read the cache itself until dead-code elimination drops them.
    replace[static_cast<size_t>(kw.id)] = kw.inputs[0];
    replace[static_cast<size_t>(vw.id)] = vw.inputs[0];
    any = true;
  }
  if (!any) return out;
  return rebuild(out, replace);
}

}  // namespace volta::passes
