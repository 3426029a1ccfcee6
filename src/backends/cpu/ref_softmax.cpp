// Reference softmax / log_softmax over one axis, max-subtracted so large logits stay finite, and
// the softmax gradient. The tensor is viewed as [outer, n, inner] around the axis.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

Status softmax_impl(const KernelArgs& a, bool as_log, int64_t axis_attr, double scale, std::optional<int64_t> causal_offset) {
  if (a.in[0].type.dtype != DType::f32 || a.out.type.dtype != DType::f32)
    return internal_error(op_prefix(a.node) + "reference kernel computes f32 only " + ir::node_ref(a.node));
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, s.size()));
  const int64_t outer = dims_product(s, 0, axis);
  const int64_t n = s[axis];
  const int64_t inner = dims_product(s, axis + 1, s.size());
  // With a causal mask (last axis only) row r of each [R, n] matrix keeps k <= r % R + offset.
  const bool causal = causal_offset.has_value();
  VOLTA_ASSIGN_OR_RETURN(const int64_t offset, softmax_offset(a, n, causal_offset));
  const int64_t R = causal ? s[s.size() - 2] : 1;
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  const double ninf = -std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t o = 0; o < outer; ++o) {
    // Masked entries are never read: they are exactly 0 (-inf for log_softmax) whatever x holds
    // there; a row that keeps nothing is nan.
    const int64_t kept = causal ? std::clamp<int64_t>(o % R + offset + 1, 0, n) : n;
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      auto z = [&](int64_t k) { return scale * static_cast<double>(static_cast<float>(x[base + k * inner])); };
      double mx = ninf;
      for (int64_t k = 0; k < kept; ++k) mx = std::fmax(mx, z(k));
      double sum = 0.0;
      for (int64_t k = 0; k < kept; ++k) sum += std::exp(z(k) - mx);
      const double log_sum = std::log(sum);
      for (int64_t k = 0; k < n; ++k) {
        const double y = kept == 0 ? nan : k >= kept ? (as_log ? ninf : 0.0)
                                         : as_log ? z(k) - mx - log_sum : std::exp(z(k) - mx) / sum;
        out[base + k * inner] = static_cast<float>(y);
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status Softmax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Softmax>(a.node));
  return softmax_impl(a, false, at->axis, at->scale, at->causal_offset);
}
Status LogSoftmax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LogSoftmax>(a.node));
  return softmax_impl(a, true, at->axis, 1.0, std::nullopt);
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

}  // namespace volta::cpu::ref
