// Reference elementwise kernels: binary ops with numpy broadcasting and unary maps.
// Each element is computed in double and rounded once to f32 (for + - * / this equals the
// correctly rounded f32 result).
#include <cmath>
#include <limits>
#include <numbers>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

template <typename F>
Status binary(const KernelArgs& a, F f) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const Shape& out_shape = a.out.shape();
  const std::array<Strides, 2> st = {broadcast_strides(a.in[0].shape(), out_shape),
                                     broadcast_strides(a.in[1].shape(), out_shape)};
  const float* x = in_f32(a, 0);
  const float* y = in_f32(a, 1);
  float* out = out_f32(a);
  for_each_index(out_shape, st, [&](int64_t n, const std::array<int64_t, 2>& off) {
    out[n] = static_cast<float>(f(static_cast<double>(x[off[0]]), static_cast<double>(y[off[1]])));
  });
  return Status::ok();
}

template <typename F>
Status unary(const KernelArgs& a, F f) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  const int64_t n = a.out.numel();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(f(static_cast<double>(x[i])));
  return Status::ok();
}

// Stable in both tails: never evaluates exp of a large positive number.
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

}  // namespace

Status Add(const KernelArgs& a) { return binary(a, [](double x, double y) { return x + y; }); }
Status Sub(const KernelArgs& a) { return binary(a, [](double x, double y) { return x - y; }); }
Status Mul(const KernelArgs& a) { return binary(a, [](double x, double y) { return x * y; }); }
Status Div(const KernelArgs& a) { return binary(a, [](double x, double y) { return x / y; }); }

Status Neg(const KernelArgs& a) { return unary(a, [](double x) { return -x; }); }
Status Exp(const KernelArgs& a) { return unary(a, [](double x) { return std::exp(x); }); }
Status Log(const KernelArgs& a) { return unary(a, [](double x) { return std::log(x); }); }
Status Sqrt(const KernelArgs& a) { return unary(a, [](double x) { return std::sqrt(x); }); }
Status Tanh(const KernelArgs& a) { return unary(a, [](double x) { return std::tanh(x); }); }
// NaN propagates (x > 0 is false for NaN, so test it explicitly); relu(-0) = +0.
Status Relu(const KernelArgs& a) {
  return unary(a, [](double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); });
}
Status Sigmoid(const KernelArgs& a) { return unary(a, [](double x) { return sigmoid(x); }); }
Status Silu(const KernelArgs& a) { return unary(a, [](double x) { return x * sigmoid(x); }); }

Status Gelu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const std::string mode, a.node.attrs.get_string("approximate", "none"));
  if (mode == "none") {
    return unary(a, [](double x) { return 0.5 * x * (1.0 + std::erf(x * std::numbers::sqrt2 / 2.0)); });
  }
  if (mode == "tanh") {
    constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
    return unary(a, [](double x) { return 0.5 * x * (1.0 + std::tanh(kC * (x + 0.044715 * x * x * x))); });
  }
  return invalid_argument(op_prefix(a.node) + "attribute 'approximate' must be 'none' or 'tanh', got '" + mode +
                          "' " + ir::node_ref(a.node));
}

Status Erf(const KernelArgs& a) { return unary(a, [](double x) { return std::erf(x); }); }
Status Abs(const KernelArgs& a) { return unary(a, [](double x) { return std::fabs(x); }); }
// sign(nan) = nan, sign(+-0) = 0.
Status Sign(const KernelArgs& a) {
  return unary(a, [](double x) { return std::isnan(x) ? x : (x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0); });
}
Status LeakyRelu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const double alpha, a.node.attrs.get_float("alpha", 0.01));
  return unary(a, [alpha](double x) { return x < 0 ? alpha * x : x; });
}
// Bounds are rounded to f32 first so that clip(x) is always one of x, min or max; nan stays nan.
Status Clip(const KernelArgs& a) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  VOLTA_ASSIGN_OR_RETURN(const double lo_attr, a.node.attrs.get_float("min", -kInf));
  VOLTA_ASSIGN_OR_RETURN(const double hi_attr, a.node.attrs.get_float("max", kInf));
  const double lo = static_cast<float>(lo_attr), hi = static_cast<float>(hi_attr);
  return unary(a, [lo, hi](double x) {
    const double y = x < lo ? lo : x;  // numpy's order: min after max, so min > max gives max
    return y > hi ? hi : y;
  });
}
Status Pow(const KernelArgs& a) { return binary(a, [](double x, double y) { return std::pow(x, y); }); }

}  // namespace volta::cpu::ref
