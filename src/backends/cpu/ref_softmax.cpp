// Reference softmax / log_softmax over one axis, max-subtracted so large logits stay finite.
// The tensor is viewed as [outer, n, inner] around the axis.
#include <cmath>
#include <limits>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

Status softmax_impl(const KernelArgs& a, bool as_log) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const int64_t axis_attr, a.node.attrs.get_int("axis", -1));
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, s.size()));
  const int64_t outer = dims_product(s, 0, axis);
  const int64_t n = s[axis];
  const int64_t inner = dims_product(s, axis + 1, s.size());
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) mx = std::fmax(mx, static_cast<double>(x[base + k * inner]));
      double sum = 0.0;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<double>(x[base + k * inner]) - mx);
      const double log_sum = std::log(sum);
      for (int64_t k = 0; k < n; ++k) {
        const double z = static_cast<double>(x[base + k * inner]) - mx;
        out[base + k * inner] = static_cast<float>(as_log ? z - log_sum : std::exp(z) / sum);
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status Softmax(const KernelArgs& a) { return softmax_impl(a, false); }
Status LogSoftmax(const KernelArgs& a) { return softmax_impl(a, true); }

}  // namespace volta::cpu::ref
