// The exported forms of ops Volta has, recognised after import so that imported models run
// Volta's own kernels: exporters write GELU and LayerNorm as chains of elementwise ops and
// reductions. The chain's last node becomes the op, reading the chain's input; the rest of the
// chain is left to dead-code elimination (or kept, when something else reads it). This is an
// import decision, like choosing the op for any ONNX node: the op computes the same function,
// rounded once instead of once per step.
//   GELU:      x * 0.5 * (1 + erf(x / sqrt 2)), or the tanh form with sqrt(2/pi) (x + 0.044715 x^3)
//              (any order of the products)
//   LayerNorm: s = x - mean(x); s / sqrt(mean(s^2) + eps) * gamma (+ beta)  over the last axis
//   attention: softmax(q kᵀ * scale (+ mask)) v, with the nan guard after the softmax (below)
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "onnx/importer.h"
#include "passes/rewrite.h"

namespace volta::onnx {
namespace {

using ir::Graph;
using ir::Node;
using ir::Op;

// The value of a one-element f32 constant.
std::optional<double> scalar(const Graph& g, int32_t id) {
  const Node& n = g.node(id);
  if (n.op != Op::Constant || n.value.numel() != 1 || n.value.dtype() != DType::f32) return std::nullopt;
  return static_cast<double>(n.value.data<float>()[0]);
}
bool is_scalar(const Graph& g, int32_t id, double want, double rel = 1e-6) {
  const auto v = scalar(g, id);
  return v && std::fabs(*v - want) <= rel * std::fabs(want);
}

// n is `op` with two inputs.
bool binary(const Node& n, Op op) { return n.op == op && n.inputs.size() == 2; }

// A reduce_mean over the last axis only, keeping it.
bool mean_of_last_axis(const Graph& g, const Node& n) {
  if (n.op != Op::ReduceMean || n.inputs.size() != 1) return false;
  const auto axes = n.attrs.get_ints("axes");
  const auto keep = n.attrs.get_int("keepdims", 1);
  const int64_t rank = static_cast<int64_t>(g.node(n.inputs[0]).type.shape.size());
  return axes.is_ok() && axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == rank - 1) && keep.is_ok() && *keep == 1;
}

// mul(x, c) or mul(c, x) with the scalar constant c: x.
std::optional<int32_t> times(const Graph& g, int32_t id, double c) {
  const Node& n = g.node(id);
  if (binary(n, Op::Mul))
    for (int k = 0; k < 2; ++k)
      if (is_scalar(g, n.inputs[1 - k], c)) return n.inputs[k];
  return std::nullopt;
}

// The GELU forms: 1 + erf(x / sqrt 2) (or x * 1/sqrt 2), or 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))
// (x^3 a pow or two products). Returns x.
std::optional<int32_t> one_plus(const Graph& g, int32_t id, bool tanh_form) {
  const Node& a = g.node(id);
  if (!binary(a, Op::Add)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const Node& f = g.node(a.inputs[k]);
    if (!is_scalar(g, a.inputs[1 - k], 1.0) || f.op != (tanh_form ? Op::Tanh : Op::Erf)) continue;
    const int32_t u = f.inputs[0];
    if (!tanh_form) {
      const Node& d = g.node(u);
      if (binary(d, Op::Div) && is_scalar(g, d.inputs[1], std::sqrt(2.0))) return d.inputs[0];
      if (const auto x = times(g, u, 1.0 / std::sqrt(2.0))) return x;
      continue;
    }
    const auto w = times(g, u, std::sqrt(2.0 / std::numbers::pi));
    if (!w || !binary(g.node(*w), Op::Add)) continue;
    const Node& sum = g.node(*w);
    for (int j = 0; j < 2; ++j) {
      const int32_t x = sum.inputs[j];
      const auto cube = times(g, sum.inputs[1 - j], 0.044715);
      if (!cube) continue;
      const Node& c = g.node(*cube);
      const bool is_cube = (binary(c, Op::Pow) && c.inputs[0] == x && is_scalar(g, c.inputs[1], 3.0)) ||
                           (binary(c, Op::Mul) && ((c.inputs[0] == x && binary(g.node(c.inputs[1]), Op::Mul) &&
                                                    g.node(c.inputs[1]).inputs == std::vector<int32_t>{x, x}) ||
                                                   (c.inputs[1] == x && binary(g.node(c.inputs[0]), Op::Mul) &&
                                                    g.node(c.inputs[0]).inputs == std::vector<int32_t>{x, x})));
      if (is_cube) return x;
    }
  }
  return std::nullopt;
}

struct GeluForm {
  int32_t x;
  bool tanh_form;
};

// GELU ending in node y: x * 0.5 * (1 + ...), the products in any order.
std::optional<GeluForm> gelu_form(const Graph& g, const Node& y) {
  if (!binary(y, Op::Mul) || y.type.dtype != DType::f32) return std::nullopt;
  // y = mul(P, Q) with one of them a product: the three factors must be x, 0.5 and 1 + erf(...).
  for (int k = 0; k < 2; ++k) {
    const Node& p = g.node(y.inputs[k]);
    if (!binary(p, Op::Mul)) continue;
    const int32_t f[3] = {p.inputs[0], p.inputs[1], y.inputs[1 - k]};
    for (int half = 0; half < 3; ++half) {
      if (!is_scalar(g, f[half], 0.5)) continue;
      for (int sum = 0; sum < 3; ++sum) {
        if (sum == half) continue;
        const int32_t x = f[3 - half - sum];
        for (bool tanh_form : {false, true}) {
          const auto inner = one_plus(g, f[sum], tanh_form);
          if (inner && *inner == x && g.node(x).type == y.type) return GeluForm{x, tanh_form};
        }
      }
    }
  }
  return std::nullopt;
}

struct LayerNormForm {
  int32_t x, gamma, beta;  // beta -1: none
  double eps;
};

// LayerNorm ending in node y (gamma applied; beta optional).
std::optional<LayerNormForm> layer_norm_form(const Graph& g, const Node& y) {
  if (y.type.dtype != DType::f32 || y.type.shape.empty()) return std::nullopt;
  const int64_t C = y.type.shape.back();
  auto is_vector = [&](int32_t id) { return g.node(id).type == TensorType{DType::f32, {C}}; };
  LayerNormForm f{-1, -1, -1, 0.0};
  int32_t scaled = y.id;
  if (binary(y, Op::Add))  // + beta
    for (int k = 0; k < 2; ++k)
      if (is_vector(y.inputs[k]) && binary(g.node(y.inputs[1 - k]), Op::Mul)) f.beta = y.inputs[k], scaled = y.inputs[1 - k];
  const Node& m = g.node(scaled);
  if (!binary(m, Op::Mul)) return std::nullopt;
  int32_t normed = -1;
  for (int k = 0; k < 2; ++k)
    if (is_vector(m.inputs[k]) && binary(g.node(m.inputs[1 - k]), Op::Div)) f.gamma = m.inputs[k], normed = m.inputs[1 - k];
  if (normed < 0) return std::nullopt;
  // normed = s / sqrt(mean(s^2) + eps), s = x - mean(x)
  const Node& div = g.node(normed);
  const Node& s = g.node(div.inputs[0]);
  const Node& root = g.node(div.inputs[1]);
  if (!binary(s, Op::Sub) || root.op != Op::Sqrt) return std::nullopt;
  const Node& mu = g.node(s.inputs[1]);
  if (!mean_of_last_axis(g, mu) || mu.inputs[0] != s.inputs[0]) return std::nullopt;
  const Node& var_eps = g.node(root.inputs[0]);
  if (!binary(var_eps, Op::Add)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const auto eps = scalar(g, var_eps.inputs[k]);
    const Node& var = g.node(var_eps.inputs[1 - k]);
    if (!eps || !mean_of_last_axis(g, var)) continue;
    const Node& sq = g.node(var.inputs[0]);
    const bool squares = (binary(sq, Op::Pow) && sq.inputs[0] == s.id && is_scalar(g, sq.inputs[1], 2.0)) ||
                         (binary(sq, Op::Mul) && sq.inputs[0] == s.id && sq.inputs[1] == s.id);
    if (!squares) continue;
    f.x = s.inputs[0], f.eps = *eps;
    return g.node(f.x).type == y.type ? std::optional<LayerNormForm>(f) : std::nullopt;
  }
  return std::nullopt;
}

struct AttentionForm {
  int32_t q, k, v, mask;  // mask -1: none; k -1: kt read through a new transpose
  int32_t kt;             // kᵀ as the graph computes it
  std::vector<int64_t> k_perm;  // k = transpose(kt_source, k_perm) when k is -1
  int32_t kt_source;
  double scale;
  bool zero_nan;
};

bool plain(const Node& n, Op op, size_t inputs) { return n.op == op && n.inputs.size() == inputs && n.attrs.items().empty(); }

// x * c, c * x or x / c with the scalar constant c: x, and the factor.
std::optional<std::pair<int32_t, double>> scaled(const Graph& g, int32_t id) {
  const Node& n = g.node(id);
  if (binary(n, Op::Div))
    if (const auto c = scalar(g, n.inputs[1]); c && *c != 0.0) return std::pair{n.inputs[0], 1.0 / *c};
  if (binary(n, Op::Mul))
    for (int k = 0; k < 2; ++k)
      if (const auto c = scalar(g, n.inputs[1 - k])) return std::pair{n.inputs[k], *c};
  return std::nullopt;
}

// where(isnan(p), 0, p), isnan imported as 1 - equal(p, p): p.
std::optional<int32_t> nan_guarded(const Graph& g, const Node& w) {
  if (w.op != Op::Where || w.inputs.size() != 3 || !is_scalar(g, w.inputs[1], 0.0, 0.0)) return std::nullopt;
  const int32_t p = w.inputs[2];
  const Node& c = g.node(w.inputs[0]);
  if (!binary(c, Op::Sub) || !is_scalar(g, c.inputs[0], 1.0)) return std::nullopt;
  const Node& eq = g.node(c.inputs[1]);
  if (!binary(eq, Op::Equal) || eq.inputs[0] != p || eq.inputs[1] != p) return std::nullopt;
  return p;
}

// The exporters' scaled dot-product attention ending in node y:
//   matmul(P, v), P = softmax(A) over the last axis, or where(isnan(that), 0, that);
//   A = S + mask or S; S = matmul(q', k') or it times / divided by a scalar;
//   q' = q or q * a; k' = kᵀ or kᵀ * b, with kᵀ a transpose swapping the last two axes (possibly
//   with others), or the dynamo form reshape(transpose(reshape(k, [N, S, D]), [0, 2, 1])).
// The scalars multiply into attention's scale: q kᵀ rounded once, then scaled (an import
// decision, like GELU's: the same function, rounded once).
std::optional<AttentionForm> attention_form(const Graph& g, const Node& y) {
  if (!plain(y, Op::Matmul, 2) || y.type.dtype != DType::f32 || y.type.shape.size() < 2) return std::nullopt;
  AttentionForm f{-1, -1, y.inputs[1], -1, -1, {}, -1, 1.0, false};
  int32_t probs = y.inputs[0];
  if (const auto p = nan_guarded(g, g.node(probs))) probs = *p, f.zero_nan = true;
  const Node& sm = g.node(probs);
  if (sm.op != Op::Softmax || sm.inputs.size() != 1 || !passes::last_axis(sm) || sm.attrs.has("scale") ||
      sm.attrs.has("causal_offset"))
    return std::nullopt;
  int32_t scores = sm.inputs[0];
  // The scores' matmul, after at most one scalar factor; the other addend is the mask.
  auto product = [&](int32_t id, double* scale) -> std::optional<int32_t> {
    if (plain(g.node(id), Op::Matmul, 2)) return id;
    const auto s = scaled(g, id);
    if (s && plain(g.node(s->first), Op::Matmul, 2)) return *scale *= s->second, s->first;
    return std::nullopt;
  };
  std::optional<int32_t> mm = product(scores, &f.scale);
  if (!mm && binary(g.node(scores), Op::Add))
    for (int k = 0; k < 2 && !mm; ++k)
      if ((mm = product(g.node(scores).inputs[k], &f.scale))) f.mask = g.node(scores).inputs[1 - k];
  if (!mm) return std::nullopt;
  const Node& qk = g.node(*mm);
  f.q = qk.inputs[0], f.kt = qk.inputs[1];
  if (const auto s = scaled(g, f.q)) f.q = s->first, f.scale *= s->second;
  if (const auto s = scaled(g, f.kt)) f.kt = s->first, f.scale *= s->second;
  const Node& kt = g.node(f.kt);
  const size_t r = kt.type.shape.size();
  if (r < 2 || g.node(f.q).type.shape.size() != r) return std::nullopt;
  if (kt.op == Op::Transpose && kt.inputs.size() == 1) {  // k = transpose(x, perm with its last two swapped)
    const auto perm = kt.attrs.get_ints("perm");
    if (!perm.is_ok() || perm->size() != r) return std::nullopt;
    f.k_perm = *perm;
    std::swap(f.k_perm[r - 1], f.k_perm[r - 2]);
    f.kt_source = kt.inputs[0];
    bool identity = true;
    for (size_t i = 0; i < r; ++i) identity = identity && f.k_perm[i] == static_cast<int64_t>(i);
    if (identity) f.k = f.kt_source;
    return f;
  }
  // The dynamo form: the batch dims merged, the last two swapped, the batch dims split again.
  if (kt.op == Op::Reshape && kt.inputs.size() == 1) {
    const Node& t = g.node(kt.inputs[0]);
    const auto perm = t.attrs.get_ints("perm");
    if (t.op != Op::Transpose || !perm.is_ok() || *perm != std::vector<int64_t>{0, 2, 1}) return std::nullopt;
    const Node& merged = g.node(t.inputs[0]);
    if (merged.op != Op::Reshape || merged.inputs.size() != 1) return std::nullopt;
    Shape want = kt.type.shape;
    std::swap(want[r - 1], want[r - 2]);
    const Shape& m = merged.type.shape;
    if (g.node(merged.inputs[0]).type.shape != want || m.size() != 3 || m[1] != want[r - 2] || m[2] != want[r - 1])
      return std::nullopt;
    f.k = merged.inputs[0];
    return f;
  }
  f.kt_source = f.kt;  // any other kᵀ: read through a transpose of its last two axes
  f.k_perm.resize(r);
  for (size_t i = 0; i < r; ++i) f.k_perm[i] = static_cast<int64_t>(i);
  std::swap(f.k_perm[r - 1], f.k_perm[r - 2]);
  return f;
}

// Rewrites y into attention(q, k, v[, mask]) when its shape rule accepts the operands.
void rewrite_attention(Graph& g, int32_t y, const AttentionForm& f) {
  ir::Attrs attrs{{"scale", f.scale}};
  if (f.zero_nan) attrs.set("zero_nan_probs", int64_t{1});
  Shape k_shape = g.node(f.kt).type.shape;
  std::swap(k_shape[k_shape.size() - 1], k_shape[k_shape.size() - 2]);
  std::vector<TensorType> types = {g.node(f.q).type, {DType::f32, k_shape}, g.node(f.v).type};
  if (f.mask >= 0) types.push_back(g.node(f.mask).type);
  const auto t = ir::infer_type(Op::Attention, types, attrs);
  if (!t.is_ok() || *t != g.node(y).type) return;
  int32_t k = f.k;
  if (k < 0) {
    Node tr;
    tr.op = Op::Transpose;
    tr.inputs = {f.kt_source};
    tr.attrs = ir::Attrs{{"perm", f.k_perm}};
    tr.type = types[1];
    k = passes::append_node(g, std::move(tr), g.node(f.kt).name + "/k");
  }
  Node& n = g.node(y);
  n.op = Op::Attention;
  n.inputs = {f.q, k, f.v};
  if (f.mask >= 0) n.inputs.push_back(f.mask);
  n.attrs = attrs;
}

}  // namespace

// Last nodes first: a chain is matched at its end before any of its inner nodes is rewritten
// (LayerNorm's gamma product is itself a LayerNorm without beta; rewritten second, it is dead).
// Nodes appended on the way (a transposed k) come after the one being rewritten and are not
// visited.
Status recognize_exported_forms(ir::Graph& g) {
  for (size_t i = g.nodes.size(); i-- > 0;) {
    if (const auto at = attention_form(g, g.nodes[i])) {
      rewrite_attention(g, static_cast<int32_t>(i), *at);
      continue;
    }
    Node& n = g.nodes[i];
    if (const auto gelu = gelu_form(g, n)) {
      n.op = Op::Gelu;
      n.inputs = {gelu->x};
      n.attrs = ir::Attrs{{"approximate", std::string(gelu->tanh_form ? "tanh" : "none")}};
    } else if (const auto ln = layer_norm_form(g, n)) {
      n.op = Op::LayerNorm;
      n.inputs = {ln->x, ln->gamma};
      if (ln->beta >= 0) n.inputs.push_back(ln->beta);
      n.attrs = ir::Attrs{{"eps", ln->eps}};
    }
  }
  return Status::ok();
}

}  // namespace volta::onnx
