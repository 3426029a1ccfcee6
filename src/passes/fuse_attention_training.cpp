// Fuses the attention of a training graph, forward and backward, into `attention` and
// `attention_grad`. After autograd and fuse_attention_softmax a self-attention block reads
//   p  = softmax(matmul(q, k, transpose_b), scale, causal)      y  = matmul(p, v)
//   dp = matmul(dy, v, transpose_b)   ds = softmax_grad(p, dp, scale)
//   dq = matmul(ds, k)   dk = matmul(ds, q, transpose_a)   dv = matmul(p, dy, transpose_a)
// and becomes
//   y = attention(q, k, v)   g = attention_grad(q, k, v, dy)   dq, dk, dv = views of g[0], g[1], g[2]
// The probabilities are recomputed in the backward kernel instead of kept in memory between
// the passes, and the kernels give the bits of the nodes they replace
// (src/backends/cpu/attention.cpp). Only the exact pattern is matched: every folded node must
// have exactly the readers listed (p three, ds two, the others one), so nothing else sees a
// value that disappears. fuse_attention handles the inference form, where p has one reader.
//
// Recomputing the probabilities costs a GEMM and a softmax per block; keeping them costs two
// [T, T] matrices per (batch, head) and layer in memory, read back in the backward. Measured on
// the shakespeare-char recipe (1 thread, Zen 4): fused 2-3% slower at T = 64, 3% faster at 128,
// 12% faster with 20% less peak memory at 256. So blocks of at least kMinKeys keys fuse; from
// kMinPackedKeys on, those whose q, k and v are the head splits of one packed projection when
// fuse_attention_heads runs next and reads it in place (no slices, head transposes or concat around them:
// the step at T = 64 measured 2% faster at 1 thread, 3% at 2, on an Intel Xeon).
#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

constexpr int64_t kMinKeys = 128, kMinPackedKeys = 64;

// A matmul of two operands, no epilogue, with the given transposes.
bool plain_matmul(const ir::Node& n, bool ta, bool tb) {
  if (n.op != ir::Op::Matmul || n.inputs.size() != 2 || n.attrs.has("activation")) return false;
  auto a = n.attrs.get_int("transpose_a", 0), b = n.attrs.get_int("transpose_b", 0);
  return a.is_ok() && b.is_ok() && (*a != 0) == ta && (*b != 0) == tb;
}

// The nodes that read `id`.
std::vector<int32_t> readers_of(const ir::Graph& g, int32_t id) {
  std::vector<int32_t> out;
  for (const ir::Node& n : g.nodes)
    for (int32_t in : n.inputs)
      if (in == id) {
        out.push_back(n.id);
        break;
      }
  return out;
}

// A new node appended to g; returns its id.
int32_t append(ir::Graph& g, const std::string& base, ir::Op op, std::vector<int32_t> inputs, ir::Attrs attrs, TensorType type) {
  ir::Node n;
  n.id = static_cast<int32_t>(g.size());
  n.name = base;
  for (int k = 1; g.find(n.name) >= 0; ++k) n.name = base + "_" + std::to_string(k);
  n.op = op;
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.type = std::move(type);
  g.nodes.push_back(std::move(n));
  return static_cast<int32_t>(g.size()) - 1;
}

// The matched block: node ids of the forward output y, the backward nodes and their operands.
struct Block {
  int32_t q, k, v, dy;  // operands
  int32_t y, dq, dk, dv;  // rewritten
  ir::Attrs attrs;       // scale, causal_offset
};

// Tries to match the block whose forward output is y.
bool match(const ir::Graph& g, const Readers& readers, const ir::Node& y, bool packed_follows, Block* b) {
  if (!plain_matmul(y, false, false)) return false;
  const ir::Node& p = g.node(y.inputs[0]);
  if (p.op != ir::Op::Softmax || !last_axis(p) || readers.count[static_cast<size_t>(p.id)] != 3) return false;
  const ir::Node& sc = g.node(p.inputs[0]);
  if (!plain_matmul(sc, false, true) || !readers.one(sc.id)) return false;
  const int32_t q = sc.inputs[0], k = sc.inputs[1], v = y.inputs[1];
  const TensorType& t = g.node(q).type;
  if (g.node(k).type != t || g.node(v).type != t || y.type != t || t.shape.size() < 2) return false;
  const int64_t keys = t.shape[t.shape.size() - 2];
  if (keys < kMinKeys && (!packed_follows || keys < kMinPackedKeys || packed_projection(g, q, k, v) < 0)) return false;
  // p's other readers: softmax_grad(p, dp) and matmul(p, dy, transpose_a).
  int32_t ds = -1, dv = -1;
  for (int32_t r : readers_of(g, p.id)) {
    const ir::Node& n = g.node(r);
    if (n.id == y.id) continue;
    if (n.op == ir::Op::SoftmaxGrad && n.inputs[0] == p.id && n.inputs[1] != p.id) ds = n.id;
    else if (plain_matmul(n, true, false) && n.inputs[0] == p.id && n.inputs[1] != p.id) dv = n.id;
  }
  if (ds < 0 || dv < 0) return false;
  const ir::Node& sg = g.node(ds);
  const int32_t dy = g.node(dv).inputs[1];
  if (g.node(dy).type != t || !last_axis(sg) || readers.count[static_cast<size_t>(ds)] != 2) return false;
  auto p_scale = p.attrs.get_float("scale", 1.0), sg_scale = sg.attrs.get_float("scale", 1.0);
  if (!p_scale.is_ok() || !sg_scale.is_ok() || *p_scale != *sg_scale) return false;
  const ir::Node& dp = g.node(sg.inputs[1]);
  if (!plain_matmul(dp, false, true) || !readers.one(dp.id) || dp.inputs[0] != dy || dp.inputs[1] != v) return false;
  // ds's readers: matmul(ds, k) and matmul(ds, q, transpose_a).
  int32_t dq = -1, dk = -1;
  for (int32_t r : readers_of(g, ds)) {
    const ir::Node& n = g.node(r);
    if (plain_matmul(n, false, false) && n.inputs[0] == ds && n.inputs[1] == k) dq = n.id;
    else if (plain_matmul(n, true, false) && n.inputs[0] == ds && n.inputs[1] == q) dk = n.id;
  }
  if (dq < 0 || dk < 0) return false;
  b->q = q, b->k = k, b->v = v, b->dy = dy, b->y = y.id, b->dq = dq, b->dk = dk, b->dv = dv;
  b->attrs = {};
  for (const char* key : {"scale", "causal_offset"})
    if (p.attrs.has(key)) b->attrs.set(key, p.attrs.items().at(key));
  return true;
}

}  // namespace

Result<ir::Graph> fuse_attention_training(const ir::Graph& g, bool packed_follows) {
  ir::Graph out = g;
  VOLTA_ASSIGN_OR_RETURN(const Readers readers, live_readers(g));
  std::vector<Block> blocks;
  for (const ir::Node& y : g.nodes) {
    Block b;
    if (match(g, readers, y, packed_follows, &b)) blocks.push_back(std::move(b));
  }
  for (const Block& b : blocks) {
    const TensorType t = out.node(b.q).type;
    const std::vector<int32_t> qkv = {b.q, b.k, b.v};
    auto fused = ir::infer_type(ir::Op::AttentionGrad, std::vector<TensorType>{t, t, t, t}, b.attrs);
    if (!fused.is_ok()) continue;
    const std::string name = out.node(b.y).name;
    const int32_t grad = append(out, name + "/grad", ir::Op::AttentionGrad, {b.q, b.k, b.v, b.dy}, b.attrs, *fused);
    // Each gradient becomes a view of its part of the stacked result: a slice of the leading
    // axis (contiguous), reshaped to drop it.
    const int32_t parts[] = {b.dq, b.dk, b.dv};
    for (int64_t i = 0; i < 3; ++i) {
      Shape part = fused->shape;
      part[0] = 1;
      const int32_t s = append(out, out.node(parts[i]).name + "/part", ir::Op::Slice, {grad},
                               {{"axis", int64_t{0}}, {"start", i}, {"end", i + 1}}, TensorType{DType::f32, part});
      ir::Node& d = out.node(parts[i]);
      d.op = ir::Op::Reshape;
      d.inputs = {s};
      d.attrs = {{"shape", t.shape}};
    }
    ir::Node& y = out.node(b.y);
    y.op = ir::Op::Attention;
    y.inputs = qkv;
    y.attrs = b.attrs;  // the scores, probabilities, dp and ds lose their readers
  }
  return out;
}

}  // namespace volta::passes
