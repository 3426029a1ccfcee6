// Reference kernels of the ops autograd emits: broadcast, pad, equal and the fused backward
// kernels of relu, gelu, layer_norm, rms_norm, embedding and cross_entropy.
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "backends/cpu/ref_util.h"
#include "ir/scalar_math.h"

namespace volta::cpu::ref {

Status Broadcast(const KernelArgs& a) {
  const Shape& os = a.out.shape();
  const std::array<Strides, 1> st = {broadcast_strides(a.in[0].shape(), os)};
  const size_t es = dtype_size(a.out.type.dtype);
  const std::byte* x = a.in[0].data;
  std::byte* out = a.out.data;
  for_each_index(os, st, [&](int64_t n, const std::array<int64_t, 1>& off) {
    std::memcpy(out + static_cast<size_t>(n) * es, x + static_cast<size_t>(off[0]) * es, es);
  });
  return Status::ok();
}

Status Pad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Pad>(a.node));
  const int64_t axis_attr = at->axis, before = at->before;
  const Shape& xs = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, xs.size()));
  // View both as [outer, axis, inner] blocks.
  const int64_t outer = dims_product(xs, 0, axis);
  const int64_t inner = dims_product(xs, axis + 1, xs.size());
  const int64_t in_len = xs[axis];
  const int64_t out_len = a.out.shape()[axis];
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  std::fill_n(out, a.out.numel(), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + (o * out_len + before) * inner, x + o * in_len * inner,
                static_cast<size_t>(in_len * inner) * sizeof(float));
  return Status::ok();
}

Status Equal(const KernelArgs& a) {
  const Shape& os = a.out.shape();
  const std::array<Strides, 2> st = {broadcast_strides(a.in[0].shape(), os), broadcast_strides(a.in[1].shape(), os)};
  const TensorRef& x = a.in[0];
  const TensorRef& y = a.in[1];
  float* out = out_f32(a);
  for_each_index(os, st, [&](int64_t n, const std::array<int64_t, 2>& off) {
    bool eq = false;
    switch (x.type.dtype) {
      case DType::f32: eq = x.as<const float>()[off[0]] == y.as<const float>()[off[1]]; break;
      case DType::i32: eq = x.as<const int32_t>()[off[0]] == y.as<const int32_t>()[off[1]]; break;
      case DType::i64: eq = x.as<const int64_t>()[off[0]] == y.as<const int64_t>()[off[1]]; break;
      case DType::f64: eq = x.as<const double>()[off[0]] == y.as<const double>()[off[1]]; break;
    }
    out[n] = eq ? 1.0f : 0.0f;
  });
  return Status::ok();
}

Status ReluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t i = 0; i < a.out.numel(); ++i) out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
  return Status::ok();
}

// dx = scale * y * (dy - sum over the axis of dy * y), the axis viewed as [outer, n, inner].
Status SoftmaxGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::SoftmaxGrad>(a.node));
  const int64_t axis_attr = at->axis;
  const double scale = at->scale;
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, s.size()));
  const int64_t outer = dims_product(s, 0, axis), n = s[axis], inner = dims_product(s, axis + 1, s.size());
  const float* y = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double dot = 0.0;
      for (int64_t k = 0; k < n; ++k) dot += static_cast<double>(dy[base + k * inner]) * y[base + k * inner];
      for (int64_t k = 0; k < n; ++k) {
        const int64_t e = base + k * inner;
        out[e] = static_cast<float>(scale * y[e] * (dy[e] - dot));
      }
    }
  return Status::ok();
}

Status SiluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t i = 0; i < a.out.numel(); ++i) out[i] = static_cast<float>(ir::silu_derivative(x[i]) * dy[i]);
  return Status::ok();
}

// The unfused backward's roundings (ir::swiglu_grads).
Status SwigluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const int64_t F = a.in[1].shape().empty() ? 1 : a.in[1].shape().back(), rows = F == 0 ? 0 : a.in[1].numel() / F;
  const float *x = in_f32(a, 0), *dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < F; ++j)
      ir::swiglu_grads(x[r * 2 * F + j], x[r * 2 * F + F + j], dy[r * F + j], out + r * 2 * F + j, out + r * 2 * F + F + j);
  return Status::ok();
}

Status GeluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GeluGrad>(a.node));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  const bool tanh_form = at->approximate == "tanh";
  for (int64_t i = 0; i < a.out.numel(); ++i) {
    const double v = x[i];
    const double d = tanh_form ? ir::gelu_tanh_derivative(v) : ir::gelu_erf_derivative(v);
    out[i] = static_cast<float>(d * dy[i]);
  }
  return Status::ok();
}

namespace {

// dx of y = xhat * gamma (+ beta) over rows of length D, where xhat = (x - mean) * rstd
// (layer_norm, center = true) or x * rstd (rms_norm):
//   g = dy * gamma;  dx = rstd * (g - [mean(g)] - xhat * mean(g * xhat))
}  // namespace

Status norm_grad_rows(const KernelArgs& a, bool center, double eps, int64_t r0, int64_t r1) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const int64_t D = a.in[0].shape().back();
  const float* x = in_f32(a, 0);
  const float* gamma = in_f32(a, 1);
  const float* dy = in_f32(a, 2);
  float* out = out_f32(a);
  std::vector<double> xhat(static_cast<size_t>(D));
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * D;
    const float* dyr = dy + r * D;
    double mean = 0.0;
    if (center) {
      for (int64_t d = 0; d < D; ++d) mean += xr[d];
      mean /= static_cast<double>(D);
    }
    double var = 0.0;
    for (int64_t d = 0; d < D; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    var /= static_cast<double>(D);
    const double rstd = 1.0 / std::sqrt(var + eps);
    double g_mean = 0.0, gx_mean = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      xhat[static_cast<size_t>(d)] = (xr[d] - mean) * rstd;
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      g_mean += g;
      gx_mean += g * xhat[static_cast<size_t>(d)];
    }
    g_mean /= static_cast<double>(D);
    gx_mean /= static_cast<double>(D);
    for (int64_t d = 0; d < D; ++d) {
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      const double centered = center ? g - g_mean : g;
      out[r * D + d] = static_cast<float>(rstd * (centered - xhat[static_cast<size_t>(d)] * gx_mean));
    }
  }
  return Status::ok();
}

Status LayerNormGrad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LayerNormGrad>(a.node));
  return norm_grad_rows(a, true, at->eps, 0, last_axis_rows(a));
}
Status RmsNormGrad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::RmsNormGrad>(a.node));
  return norm_grad_rows(a, false, at->eps, 0, last_axis_rows(a));
}

Status EmbeddingGrad(const KernelArgs& a) {
  const TensorRef& ids = a.in[0];
  const int64_t rows = a.out.shape()[0];
  const int64_t D = a.out.shape()[1];
  if (a.workspace.size() < static_cast<size_t>(rows * D) * sizeof(double))
    return internal_error(op_prefix(a.node) + "workspace too small " + ir::node_ref(a.node));
  // Sum in double, positions in index order, then round once: deterministic and accurate.
  auto* acc = reinterpret_cast<double*>(a.workspace.data());
  std::fill_n(acc, rows * D, 0.0);
  const float* dy = a.in[1].as<const float>();
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t id = read_index(ids, p);
    if (id < 0 || id >= rows)
      return invalid_argument(op_prefix(a.node) + "id " + std::to_string(id) + " at flat position " + std::to_string(p) +
                              " is outside [0, " + std::to_string(rows) + ") " + ir::node_ref(a.node));
    for (int64_t d = 0; d < D; ++d) acc[id * D + d] += dy[p * D + d];
  }
  float* out = out_f32(a);
  for (int64_t i = 0; i < rows * D; ++i) out[i] = static_cast<float>(acc[i]);
  return Status::ok();
}

Status CrossEntropyGrad(const KernelArgs& a) {
  const TensorRef& logits = a.in[0];
  const TensorRef& targets = a.in[1];
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CrossEntropyGrad>(a.node));
  const bool has_ignore = at->ignore_index.has_value();
  const int64_t ignore = at->ignore_index.value_or(0);
  const int64_t C = logits.shape().back();
  const int64_t rows = targets.numel();
  const float* x = logits.as<const float>();
  const double dloss = a.in[2].as<const float>()[0];
  float* out = out_f32(a);
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = read_index(targets, r);
    if (has_ignore && t == ignore) continue;
    if (t < 0 || t >= C)
      return invalid_argument(op_prefix(a.node) + "target " + std::to_string(t) + " at flat position " +
                              std::to_string(r) + " is outside [0, " + std::to_string(C) + ") " + ir::node_ref(a.node));
    ++counted;
  }
  // The loss is a mean over counted rows: each gets dloss / counted (no rows: all zero).
  const double scale = counted ? dloss / static_cast<double>(counted) : 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = read_index(targets, r);
    const float* xr = x + r * C;
    float* gr = out + r * C;
    if (has_ignore && t == ignore) {
      std::fill_n(gr, C, 0.0f);
      continue;
    }
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < C; ++c) mx = std::fmax(mx, static_cast<double>(xr[c]));
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(xr[c]) - mx);
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(static_cast<double>(xr[c]) - mx) / sum;
      gr[c] = static_cast<float>(scale * (p - (c == t ? 1.0 : 0.0)));
    }
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
