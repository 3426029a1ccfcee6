// One gradient rule per op, written in IR ops. The switch covers every op in ops.def, so a new
// op fails the -Werror build (-Wswitch) until it has a rule here, or says why it has none.
#include <algorithm>
#include <optional>

#include "volta/autograd.h"

namespace volta::autograd {

using ir::Op;

namespace {

Shape shape_of(ModelBuilder& b, Value v) { return b.type(v).shape; }

// The shape a reduction over `axes` keeps with keepdims=1.
Shape keep_shape(const Shape& x, const std::vector<int64_t>& axes) {
  Shape keep = x;
  for (int64_t a : axes) keep[static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(x.size()) : a)] = 1;
  return keep;
}

// dy of a reduction, brought back to the reduced input's shape.
Value unreduce(ModelBuilder& b, Value dy, const Shape& x, const std::vector<int64_t>& axes) {
  Value kept = b.reshape(dy, keep_shape(x, axes));
  return b.op(Op::Broadcast, {kept}, {{"shape", x}});
}

Status no_rule(const ir::Node& n, const char* why) {
  return unimplemented("[" + std::string(ir::op_name(n.op)) + "] has no gradient: " + why + " " + ir::node_ref(n));
}

}  // namespace

Value sum_to(ModelBuilder& b, Value g, const Shape& shape) {
  Shape gs = shape_of(b, g);
  if (gs == shape) return g;
  const size_t lead = gs.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  Value summed = axes.empty() ? g : b.reduce_sum(g, axes, true);
  return b.reshape(summed, shape);
}

// The gradients of a plain matmul (a, b) for its output gradient dy.
std::vector<Value> matmul_grads(ModelBuilder& b, Value a, Value bb, Value dy, bool ta, bool tb, const Shape& as, const Shape& bs) {
  Value da, db;
  if (!ta && as.size() > 2 && bs.size() == 2) {
    // A 2-D weight under a batched input: fold the batch into K, so the weight gradient is
    // one matmul over all rows instead of a batch of matmuls and a reduction.
    const int64_t K = as.back(), N = shape_of(b, dy).back();
    Value a2 = b.reshape(a, {-1, K}), dy2 = b.reshape(dy, {-1, N});
    db = tb ? b.matmul(dy2, a2, "", true, false) : b.matmul(a2, dy2, "", true, false);
    da = tb ? b.matmul(dy, bb) : b.matmul(dy, bb, "", false, true);
    return {da, db};
  }
  if (!ta && !tb) da = b.matmul(dy, bb, "", false, true), db = b.matmul(a, dy, "", true, false);
  if (!ta && tb) da = b.matmul(dy, bb), db = b.matmul(dy, a, "", true, false);
  if (ta && !tb) da = b.matmul(bb, dy, "", false, true), db = b.matmul(a, dy);
  if (ta && tb) da = b.matmul(bb, dy, "", true, true), db = b.matmul(dy, a, "", true, true);
  return {sum_to(b, da, as), sum_to(b, db, bs)};
}

namespace {

// attention's gradients. Self-attention gets the fused attention_grad; any other form recomputes
// the probabilities and takes the gradients of the unfused ops. With grouped queries (k and v
// with fewer heads than q) the keys and values are used per query head and their gradients
// summed over each key head's group of query heads.
Result<std::vector<Value>> attention_grads(ModelBuilder& b, const ir::Node& n, Value dy) {
  const ir::Attrs& at = n.attrs;
  std::vector<Value> x;
  for (int32_t in : n.inputs) x.push_back(Value{in});
  auto in_shape = [&](size_t i) { return shape_of(b, x[i]); };
  if (x.size() == 4 && b.type(x[3]).dtype == DType::f32)
    return no_rule(n, "its additive mask input (an imported attention) has no gradient rule");
  if (x.size() == 4) return no_rule(n, "its keys' length is a run-time input (a decode step)");
  if (at.has("packed_heads")) return no_rule(n, "its packed_heads layout (written by a pass after autograd) has none");
  if (auto store = at.get_int("store_probs", 0); !store.is_ok() || *store != 0)
    return no_rule(n, "its store_probs result (written by a pass after autograd) has none");
  VOLTA_ASSIGN_OR_RETURN(double s, at.get_float("scale", 1.0));
  const Shape qs = in_shape(0);
  const int64_t seq = static_cast<int64_t>(qs.size()) - 2;  // the keys' axis
  const int64_t cap = in_shape(1)[static_cast<size_t>(seq)];
  VOLTA_ASSIGN_OR_RETURN(const int64_t s1, at.get_int("prefix", cap));
  // Grouped queries: query heads per key head (the axis before seq; rank 2 has one head).
  const int64_t rep = seq >= 1 ? qs[static_cast<size_t>(seq - 1)] / in_shape(1)[static_cast<size_t>(seq - 1)] : 1;
  auto grouped = [&](const Shape& kv) {  // [b..., Hk, S, D] -> [b..., Hk, rep, S, D]
    Shape g = kv;
    g.insert(g.begin() + seq, rep);
    return g;
  };
  auto fold = [&](Value d, const Shape& kv) {  // per query head -> summed per key head
    return rep == 1 ? d : b.reduce_sum(b.reshape(d, grouped(kv)), {seq}, false);
  };
  std::optional<int64_t> offset;
  if (at.has("causal_offset")) {
    VOLTA_ASSIGN_OR_RETURN(offset, at.get_int("causal_offset", 0));
  }
  const Shape ks = in_shape(1), vs = in_shape(2);
  if (x.size() == 3 && s1 == cap && ks[static_cast<size_t>(seq)] == qs[static_cast<size_t>(seq)] && vs == ks &&
      ks.back() == qs.back()) {
    // Self-attention: the fused gradient, [3, ...] stacked, each part a view.
    ir::Attrs ga{{"scale", s}};
    if (offset) ga.set("causal_offset", *offset);
    Value g = b.op(Op::AttentionGrad, {x[0], x[1], x[2], dy}, ga);
    auto part = [&](int64_t i) { return b.reshape(b.slice(g, 0, i, i + 1), qs); };
    return std::vector<Value>{part(0), fold(part(1), ks), fold(part(2), vs)};
  }
  // Otherwise recompute the probabilities, then the gradients of the unfused form.
  auto expand = [&](Value kv) {  // per key head -> per query head
    if (rep == 1) return kv;
    Shape one = shape_of(b, kv), full = shape_of(b, kv);
    one.insert(one.begin() + seq, 1);
    full[static_cast<size_t>(seq - 1)] *= rep;
    return b.reshape(b.op(Op::Broadcast, {b.reshape(kv, one)}, {{"shape", grouped(shape_of(b, kv))}}), full);
  };
  const bool split = x.size() == 5;
  Value k = s1 < cap ? b.slice(x[1], seq, 0, s1) : x[1], v = s1 < cap ? b.slice(x[2], seq, 0, s1) : x[2];
  if (split) k = b.concat({k, x[3]}, seq), v = b.concat({v, x[4]}, seq);
  k = expand(k), v = expand(v);
  ir::Attrs sa{{"axis", int64_t{-1}}, {"scale", s}};
  if (offset) sa.set("causal_offset", *offset);
  Value p = b.op(Op::Softmax, {b.matmul(x[0], k, "", false, true)}, sa);
  Value ds = b.op(Op::SoftmaxGrad, {p, b.matmul(dy, v, "", false, true)}, {{"axis", int64_t{-1}}, {"scale", s}});
  Value dq = b.matmul(ds, k), dk = b.matmul(ds, x[0], "", true, false), dv = b.matmul(p, dy, "", true, false);
  auto kv_grad = [&](Value d, int64_t from, int64_t to, const Shape& kv) {  // keys [from, to) of d, per key head
    Shape part = kv;
    part[static_cast<size_t>(seq)] = to - from;
    return fold(split || to - from < shape_of(b, d)[static_cast<size_t>(seq)] ? b.slice(d, seq, from, to) : d, part);
  };
  auto first = [&](Value d, const Shape& kv) {  // the first block's gradient, zero past its prefix
    d = kv_grad(d, 0, s1, kv);
    return s1 < cap ? b.op(Op::Pad, {d}, {{"axis", seq}, {"before", int64_t{0}}, {"after", cap - s1}}) : d;
  };
  if (!split) return std::vector<Value>{dq, first(dk, ks), first(dv, vs)};
  const int64_t s2 = in_shape(3)[static_cast<size_t>(seq)];
  return std::vector<Value>{dq, first(dk, ks), first(dv, vs), kv_grad(dk, s1, s1 + s2, in_shape(3)),
                            kv_grad(dv, s1, s1 + s2, in_shape(4))};
}

}  // namespace

Result<std::vector<Value>> grad_rule(ModelBuilder& b, const ir::Node& n, Value y, Value dy) {
  std::vector<Value> x;
  for (int32_t in : n.inputs) x.push_back(Value{in});
  auto in_shape = [&](size_t i) { return shape_of(b, x[i]); };
  auto scalar = [&](double v) { return b.scalar(static_cast<float>(v)); };
  const ir::Attrs& at = n.attrs;
  // Integer results of differentiable ops (index and mask arithmetic of imported models) carry
  // no gradient; an op without one still says why below.
  if (is_integer(n.type.dtype) && ir::op_category(n.op) != ir::OpCategory::Leaf && ir::op_info(n.op).grad == ir::OpGrad::Diff)
    return std::vector<Value>(x.size());

  switch (n.op) {
    case Op::Input:
    case Op::Param:
    case Op::Constant: return std::vector<Value>{};

    case Op::Matmul: {
      VOLTA_ASSIGN_OR_RETURN(int64_t ta, at.get_int("transpose_a", 0));
      VOLTA_ASSIGN_OR_RETURN(int64_t tb, at.get_int("transpose_b", 0));
      VOLTA_ASSIGN_OR_RETURN(std::string act, at.get_string("activation", "none"));
      if (act == "gelu_grad" || act == "mul")
        return invalid_argument("[matmul] the " + act + " epilogue is a backward op: it has no gradient " + ir::node_ref(n));
      if (at.has("b_packed"))
        return invalid_argument("[matmul] a packed weight (b_packed) is an inference layout written after autograd " + ir::node_ref(n));
      VOLTA_ASSIGN_OR_RETURN(int64_t residual, at.get_int("residual", 0));
      if (residual)
        return invalid_argument("[matmul] a residual epilogue is written by fuse_matmul_residual after autograd: "
                                "differentiate the add and the plain matmul " + ir::node_ref(n));
      if (at.has("a_perm") || at.has("b_perm") || at.has("out_perm"))
        return invalid_argument("[matmul] operands read through a perm are written by fuse_matmul_layout after autograd: "
                                "differentiate the transposes and the plain matmul " + ir::node_ref(n));
      const bool has_bias = x.size() == 3;
      // The epilogue first: dz, the gradient at the matmul (+ bias) before the activation,
      // recomputed when there is one.
      Value dz = dy;
      if (act != "none") {
        ir::Attrs pre{{"transpose_a", ta}, {"transpose_b", tb}};
        Value z = b.op(Op::Matmul, has_bias ? std::vector<Value>{x[0], x[1], x[2]} : std::vector<Value>{x[0], x[1]}, pre);
        dz = act == "relu" ? b.op(Op::ReluGrad, {z, dy}) : b.op(Op::GeluGrad, {z, dy});
      }
      std::vector<Value> grads = matmul_grads(b, x[0], x[1], dz, ta != 0, tb != 0, in_shape(0), in_shape(1));
      if (has_bias) grads.push_back(sum_to(b, dz, in_shape(2)));
      return grads;
    }

    case Op::Add: return std::vector<Value>{sum_to(b, dy, in_shape(0)), sum_to(b, dy, in_shape(1))};
    case Op::Sub: return std::vector<Value>{sum_to(b, dy, in_shape(0)), sum_to(b, b.neg(dy), in_shape(1))};
    case Op::Mul:
      return std::vector<Value>{sum_to(b, b.mul(dy, x[1]), in_shape(0)), sum_to(b, b.mul(dy, x[0]), in_shape(1))};
    case Op::Div:  // d/da = 1/b, d/db = -a/b^2 = -y/b
      return std::vector<Value>{sum_to(b, b.div(dy, x[1]), in_shape(0)),
                                sum_to(b, b.neg(b.div(b.mul(dy, y), x[1])), in_shape(1))};

    case Op::Neg: return std::vector<Value>{b.neg(dy)};
    case Op::Exp: return std::vector<Value>{b.mul(dy, y)};
    case Op::Log: return std::vector<Value>{b.div(dy, x[0])};
    case Op::Sqrt: return std::vector<Value>{b.div(dy, b.mul(y, scalar(2.0)))};
    case Op::Tanh: return std::vector<Value>{b.mul(dy, b.sub(scalar(1.0), b.mul(y, y)))};
    case Op::Relu: return std::vector<Value>{b.op(Op::ReluGrad, {x[0], dy})};
    case Op::Gelu: return std::vector<Value>{b.op(Op::GeluGrad, {x[0], dy}, at)};
    case Op::Silu: return std::vector<Value>{b.op(Op::SiluGrad, {x[0], dy})};
    case Op::Swiglu: return std::vector<Value>{b.op(Op::SwigluGrad, {x[0], dy})};
    case Op::Sigmoid: return std::vector<Value>{b.mul(dy, b.mul(y, b.sub(scalar(1.0), y)))};

    case Op::Softmax: {  // scale * y * (dy - sum(dy * y)); masked entries have y = 0
      if (x.size() == 2) return no_rule(n, "its causal offset is a run-time input (a decode step)");
      VOLTA_ASSIGN_OR_RETURN(int64_t axis, at.get_int("axis", -1));
      VOLTA_ASSIGN_OR_RETURN(double s, at.get_float("scale", 1.0));
      return std::vector<Value>{b.op(Op::SoftmaxGrad, {y, dy}, {{"axis", axis}, {"scale", s}})};
    }
    case Op::Attention: return attention_grads(b, n, dy);
    case Op::Rope: {  // the inverse rotation: the sine table negated
      std::vector<Value> in{dy, x[1], b.neg(x[2])};
      if (x.size() == 4) in.push_back(x[3]);
      return std::vector<Value>{b.op(Op::Rope, in), Value{}, Value{}, Value{}};
    }
    case Op::LogSoftmax: {  // dy - exp(y) * sum(dy)
      VOLTA_ASSIGN_OR_RETURN(int64_t axis, at.get_int("axis", -1));
      Value total = b.reduce_sum(dy, {axis}, true);
      return std::vector<Value>{b.sub(dy, b.mul(b.exp(y), total))};
    }

    case Op::LayerNorm: {
      Shape d = in_shape(1);
      Value ones = b.op(Op::Broadcast, {scalar(1.0)}, {{"shape", d}});
      Value xhat = b.op(Op::LayerNorm, {x[0], ones}, at);
      std::vector<Value> out{b.op(Op::LayerNormGrad, {x[0], x[1], dy}, at), sum_to(b, b.mul(dy, xhat), d)};
      if (x.size() == 3) out.push_back(sum_to(b, dy, d));
      return out;
    }
    case Op::RmsNorm: {
      Shape d = in_shape(1);
      Value ones = b.op(Op::Broadcast, {scalar(1.0)}, {{"shape", d}});
      Value xhat = b.op(Op::RmsNorm, {x[0], ones}, at);
      return std::vector<Value>{b.op(Op::RmsNormGrad, {x[0], x[1], dy}, at), sum_to(b, b.mul(dy, xhat), d)};
    }

    case Op::Embedding:
      return std::vector<Value>{b.op(Op::EmbeddingGrad, {x[1], dy}, {{"rows", in_shape(0)[0]}}), Value{}};
    case Op::Reshape: return std::vector<Value>{b.reshape(dy, in_shape(0))};
    case Op::Transpose: {
      VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, at.get_ints("perm"));
      std::vector<int64_t> inverse(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      return std::vector<Value>{b.transpose(dy, inverse)};
    }
    case Op::Slice: {
      VOLTA_ASSIGN_OR_RETURN(int64_t axis, at.get_int("axis", 0));
      VOLTA_ASSIGN_OR_RETURN(int64_t start, at.get_int("start", 0));
      Shape xs = in_shape(0);
      if (axis < 0) axis += static_cast<int64_t>(xs.size());
      const int64_t dim = xs[static_cast<size_t>(axis)];
      start = std::clamp(start < 0 ? start + dim : start, int64_t{0}, dim);
      const int64_t len = shape_of(b, dy)[static_cast<size_t>(axis)];
      return std::vector<Value>{
          b.op(Op::Pad, {dy}, {{"axis", axis}, {"before", start}, {"after", dim - start - len}})};
    }
    case Op::Concat: {
      VOLTA_ASSIGN_OR_RETURN(int64_t axis, at.get_int("axis", 0));
      if (axis < 0) axis += static_cast<int64_t>(in_shape(0).size());
      std::vector<Value> out;
      int64_t offset = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        int64_t len = in_shape(i)[static_cast<size_t>(axis)];
        out.push_back(b.slice(dy, axis, offset, offset + len));
        offset += len;
      }
      return out;
    }

    case Op::ReduceSum: {
      VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, at.get_ints("axes"));
      return std::vector<Value>{unreduce(b, dy, in_shape(0), axes)};
    }
    case Op::ReduceMean: {
      VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, at.get_ints("axes"));
      Shape xs = in_shape(0);
      int64_t count = numel(xs) / std::max<int64_t>(numel(keep_shape(xs, axes)), 1);
      Value spread = unreduce(b, dy, xs, axes);
      return std::vector<Value>{b.mul(spread, scalar(1.0 / static_cast<double>(std::max<int64_t>(count, 1))))};
    }
    case Op::ReduceMax: {  // split evenly between tied maxima
      VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, at.get_ints("axes"));
      Shape xs = in_shape(0);
      Value ymax = unreduce(b, y, xs, axes);
      Value mask = b.op(Op::Equal, {x[0], ymax});
      Value count = b.reduce_sum(mask, axes, true);
      return std::vector<Value>{b.div(b.mul(mask, unreduce(b, dy, xs, axes)), count)};
    }

    case Op::Where: {
      Value zero = scalar(0.0);
      return std::vector<Value>{Value{}, sum_to(b, b.where(x[0], dy, zero), in_shape(1)),
                                sum_to(b, b.where(x[0], zero, dy), in_shape(2))};
    }
    case Op::CausalMask: {
      VOLTA_ASSIGN_OR_RETURN(int64_t offset, at.get_int("offset", 0));
      return std::vector<Value>{b.op(Op::CausalMask, {dy}, {{"offset", offset}, {"value", 0.0}})};
    }

    case Op::CrossEntropy: return std::vector<Value>{b.op(Op::CrossEntropyGrad, {x[0], x[1], dy}, at), Value{}};
    case Op::Mse: {  // d/da = 2 (a - b) / N
      double n_elems = static_cast<double>(std::max<int64_t>(numel(in_shape(0)), 1));
      Value da = b.mul(b.mul(b.sub(x[0], x[1]), scalar(2.0 / n_elems)), dy);
      return std::vector<Value>{da, b.neg(da)};
    }

    case Op::Broadcast: return std::vector<Value>{sum_to(b, dy, in_shape(0))};
    case Op::Pad: {
      VOLTA_ASSIGN_OR_RETURN(int64_t axis, at.get_int("axis", 0));
      VOLTA_ASSIGN_OR_RETURN(int64_t before, at.get_int("before", 0));
      if (axis < 0) axis += static_cast<int64_t>(in_shape(0).size());
      int64_t len = in_shape(0)[static_cast<size_t>(axis)];
      return std::vector<Value>{b.slice(dy, axis, before, before + len)};
    }
    case Op::Equal:
    case Op::Less:
    case Op::LessEqual: return std::vector<Value>{Value{}, Value{}};  // piecewise constant
    case Op::TopK:
    case Op::ArgMax: return std::vector<Value>{Value{}};  // integer indices
    case Op::Cumsum: {  // each input element reaches the sums on its other side
      ir::Attrs back = at;
      VOLTA_ASSIGN_OR_RETURN(int64_t reverse, at.get_int("reverse", 0));
      back.set("reverse", int64_t{reverse ? 0 : 1});
      return std::vector<Value>{b.op(Op::Cumsum, {dy}, back)};
    }

    case Op::Erf: {  // 2 / sqrt(pi) * exp(-x^2)
      Value d = b.mul(scalar(1.1283791670955126), b.exp(b.neg(b.mul(x[0], x[0]))));
      return std::vector<Value>{b.mul(dy, d)};
    }
    case Op::Abs: return std::vector<Value>{b.mul(dy, b.op(Op::Sign, {x[0]}))};
    case Op::Sign: return std::vector<Value>{Value{}};  // piecewise constant
    case Op::Clip: return std::vector<Value>{b.mul(dy, b.op(Op::Equal, {y, x[0]}))};  // 1 where not clipped
    case Op::LeakyRelu: {  // dy where x > 0, alpha * dy where x < 0
      VOLTA_ASSIGN_OR_RETURN(double alpha, at.get_float("alpha", 0.01));
      Value neg_part = b.op(Op::ReluGrad, {b.neg(x[0]), dy});
      return std::vector<Value>{b.add(b.op(Op::ReluGrad, {x[0], dy}), b.mul(neg_part, scalar(alpha)))};
    }
    case Op::Pow: {  // d/da = b a^(b-1), d/db = y log(a)
      Value da = b.mul(dy, b.mul(x[1], b.op(Op::Pow, {x[0], b.sub(x[1], scalar(1.0))})));
      Value db = b.mul(dy, b.mul(y, b.log(x[0])));
      return std::vector<Value>{sum_to(b, da, in_shape(0)), sum_to(b, db, in_shape(1))};
    }
    case Op::Cast:  // only an f32 -> f32 cast carries a gradient; integers have none
      if (b.type(x[0]).dtype == DType::f32 && b.type(y).dtype == DType::f32) return std::vector<Value>{dy};
      return std::vector<Value>{Value{}};
    case Op::Gather: {
      VOLTA_ASSIGN_OR_RETURN(int64_t axis, at.get_int("axis", 0));
      if (b.type(x[0]).dtype != DType::f32) return std::vector<Value>{Value{}, Value{}};
      return std::vector<Value>{b.op(Op::GatherGrad, {x[1], dy}, {{"axis", axis}, {"shape", in_shape(0)}}), Value{}};
    }
    case Op::Trilu: return std::vector<Value>{b.op(Op::Trilu, {dy}, at)};
    case Op::Conv2d: {
      ir::Attrs gx = at, gw = at;
      gx.set("shape", in_shape(0));
      gw.set("shape", in_shape(1));
      std::vector<Value> out{b.op(Op::Conv2dGradInput, {x[1], dy}, gx), b.op(Op::Conv2dGradWeight, {x[0], dy}, gw)};
      if (x.size() == 3) out.push_back(b.reduce_sum(dy, {0, 2, 3}));
      return out;
    }
    case Op::MaxPool: return std::vector<Value>{b.op(Op::MaxPoolGrad, {x[0], dy}, at)};
    case Op::AvgPool: {
      ir::Attrs ga = at;
      ga.set("shape", in_shape(0));
      return std::vector<Value>{b.op(Op::AvgPoolGrad, {dy}, ga)};
    }

    case Op::GatherGrad:
    case Op::Conv2dGradInput:
    case Op::Conv2dGradWeight:
    case Op::MaxPoolGrad:
    case Op::AvgPoolGrad:
    case Op::ReluGrad:
    case Op::GeluGrad:
    case Op::SiluGrad:
    case Op::SwigluGrad:
    case Op::SoftmaxGrad:
    case Op::AttentionGrad:
    case Op::LayerNormGrad:
    case Op::RmsNormGrad:
    case Op::NormParamGrad:
    case Op::EmbeddingGrad:
    case Op::CrossEntropyGrad: return no_rule(n, "second-order gradients are not supported");
    case Op::FusedElementwise:
      return no_rule(n, "the fuse_elementwise pass writes it after autograd; differentiate the unfused ops");
    case Op::GeluAndGrad: return no_rule(n, "the store_gelu_grad pass writes it after autograd; differentiate gelu");
    case Op::GradNorm:
    case Op::OptimizerUpdate:
    case Op::Increment: return no_rule(n, "the training step's state updates are not differentiable");
    case Op::CacheWrite: return no_rule(n, "a KV-cache write is not differentiable");
    case Op::CacheAttention: return no_rule(n, "it writes the KV cache (a decode step's attention) and is not differentiable");
    case Op::BitwiseAnd: return no_rule(n, "it computes on integers");
    case Op::GatherElements:
    case Op::GatherNd:
    case Op::ScatterNd:
      return no_rule(n, "the index ops of imported models (masks, positions) have no gradient rule yet");
  }
  return internal_error("grad_rule: unknown op");
}

}  // namespace volta::autograd
