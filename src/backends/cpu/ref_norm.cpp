// Reference layer_norm and rms_norm over the last axis and their gradients; statistics in
// double, two passes.
#include <cmath>
#include <vector>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

// Rows of length D = last dim of input 0; fails only if the type rule was bypassed.
Result<int64_t> row_length(const KernelArgs& a) {
  const Shape& s = a.in[0].shape();
  if (s.empty()) return internal_error(op_prefix(a.node) + "input must have rank >= 1 " + ir::node_ref(a.node));
  return s.back();
}

}  // namespace

int64_t last_axis_rows(const KernelArgs& a) {
  const Shape& s = a.in[0].shape();
  return s.empty() || s.back() == 0 ? 0 : a.in[0].numel() / s.back();
}

Status LayerNorm(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LayerNorm>(a.node));
  return layer_norm_rows(a, at->eps, 0, last_axis_rows(a));
}
Status RmsNorm(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::RmsNorm>(a.node));
  return rms_norm_rows(a, at->eps, 0, last_axis_rows(a));
}

Status layer_norm_rows(const KernelArgs& a, double eps, int64_t r0, int64_t r1) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const int64_t D, row_length(a));
  const float* x = in_f32(a, 0);
  const float* gamma = in_f32(a, 1);
  const float* beta = a.in.size() > 2 ? in_f32(a, 2) : nullptr;
  float* out = out_f32(a);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * D;
    double mean = 0.0;
    for (int64_t d = 0; d < D; ++d) mean += xr[d];
    mean /= static_cast<double>(D);
    double var = 0.0;  // biased: divided by D
    for (int64_t d = 0; d < D; ++d) {
      const double c = xr[d] - mean;
      var += c * c;
    }
    var /= static_cast<double>(D);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t d = 0; d < D; ++d) {
      double y = (xr[d] - mean) * inv * gamma[d];
      if (beta) y += beta[d];
      out[r * D + d] = static_cast<float>(y);
    }
  }
  return Status::ok();
}

// The unfused ops autograd writes, composed: xhat = layer_norm / rms_norm of x with unit gain
// (those kernels' rows), each dy * xhat rounded to f32 as mul stores it, and reduce_sum's double
// sums over the rows in order for both rows of the result.
Status NormParamGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::NormParamGrad>(a.node));
  const TensorType& xt = a.in[0].type;
  if (xt.shape.empty() || a.out.numel() != 2 * xt.shape.back())
    return internal_error(op_prefix(a.node) + "expects x [..., D] and a [2, D] result " + ir::node_ref(a.node));
  const int64_t D = xt.shape.back(), rows = D == 0 ? 0 : xt.numel() / D;
  std::vector<float> ones(static_cast<size_t>(D), 1.0f), xhat(static_cast<size_t>(xt.numel()));
  const TensorRef norm_in[2] = {a.in[0], TensorRef{reinterpret_cast<std::byte*>(ones.data()), {DType::f32, {D}}}};
  const TensorRef norm_out{reinterpret_cast<std::byte*>(xhat.data()), xt};
  const KernelArgs na{a.node, norm_in, norm_out, {}};
  VOLTA_RETURN_IF_ERROR(at->center ? layer_norm_rows(na, at->eps, 0, rows) : rms_norm_rows(na, at->eps, 0, rows));
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t j = 0; j < D; ++j) {
    double dg = 0.0, db = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * D + j];
      dg += static_cast<double>(static_cast<float>(static_cast<double>(g) * xhat[static_cast<size_t>(r * D + j)]));
      db += g;
    }
    out[j] = static_cast<float>(dg);
    out[D + j] = static_cast<float>(db);
  }
  return Status::ok();
}

Status rms_norm_rows(const KernelArgs& a, double eps, int64_t r0, int64_t r1) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const int64_t D, row_length(a));
  const float* x = in_f32(a, 0);
  const float* gamma = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * D;
    double ms = 0.0;
    for (int64_t d = 0; d < D; ++d) ms += static_cast<double>(xr[d]) * xr[d];
    ms /= static_cast<double>(D);
    const double inv = 1.0 / std::sqrt(ms + eps);
    for (int64_t d = 0; d < D; ++d) out[r * D + d] = static_cast<float>(xr[d] * inv * gamma[d]);
  }
  return Status::ok();
}

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

}  // namespace volta::cpu::ref
