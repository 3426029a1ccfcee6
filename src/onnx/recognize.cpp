// The exported forms of ops Volta has, recognised after import so that imported models run
// Volta's own kernels: exporters write GELU and LayerNorm as chains of elementwise ops and
// reductions. The chain's last node becomes the op, reading the chain's input; the rest of the
// chain is left to dead-code elimination (or kept, when something else reads it). This is an
// import decision, like choosing the op for any ONNX node: the op computes the same function,
// rounded once instead of once per step.
//   GELU:      x * 0.5 * (1 + erf(x / sqrt 2)), or the tanh form with sqrt(2/pi) (x + 0.044715 x^3)
//              (any order of the products)
//   LayerNorm: s = x - mean(x); s / sqrt(mean(s^2) + eps) * gamma (+ beta)  over the last axis
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "onnx/importer.h"

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

}  // namespace

// Last nodes first: a chain is matched at its end before any of its inner nodes is rewritten
// (LayerNorm's gamma product is itself a LayerNorm without beta; rewritten second, it is dead).
Status recognize_exported_forms(ir::Graph& g) {
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    Node& n = *it;
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
