// Reference losses with scalar f32 results, accumulated in double in index order, and the
// cross-entropy gradient.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {

Result<int64_t> count_targets(const KernelArgs& a, std::optional<int64_t> ignore_index) {
  const int64_t C = a.in[0].shape().back(), rows = a.in[1].numel();
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = read_index(a.in[1], r);
    if (ignore_index && t == *ignore_index) continue;
    if (t < 0 || t >= C)
      return invalid_argument(op_prefix(a.node) + "target " + std::to_string(t) + " at flat position " +
                              std::to_string(r) + " is outside [0, " + std::to_string(C) + ") " + ir::node_ref(a.node));
    ++counted;
  }
  return counted;
}

Status CrossEntropy(const KernelArgs& a) {
  const TensorRef& logits = a.in[0];
  const TensorRef& targets = a.in[1];
  if (logits.type.dtype != DType::f32 || a.out.type.dtype != DType::f32 || logits.shape().empty() ||
      !is_integer(targets.type.dtype)) {
    return internal_error(op_prefix(a.node) + "expects f32 logits [..., C] and integer targets " +
                          ir::node_ref(a.node));
  }
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CrossEntropy>(a.node));
  VOLTA_ASSIGN_OR_RETURN(const int64_t counted, count_targets(a, at->ignore_index));
  const bool has_ignore = at->ignore_index.has_value();
  const int64_t ignore = at->ignore_index.value_or(0);
  const int64_t C = logits.shape().back();
  const int64_t rows = targets.numel();
  const float* x = logits.as<const float>();
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = read_index(targets, r);
    if (has_ignore && t == ignore) continue;
    const float* xr = x + r * C;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < C; ++c) mx = std::fmax(mx, static_cast<double>(xr[c]));
    double sum = 0.0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(xr[c]) - mx);
    total += std::log(sum) - (static_cast<double>(xr[t]) - mx);  // -log_softmax(x)[t]
  }
  // 0/0 = nan when every position is ignored (or there are none).
  a.out.as<float>()[0] = static_cast<float>(total / static_cast<double>(counted));
  return Status::ok();
}

Status Mse(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  const float* y = in_f32(a, 1);
  const int64_t n = a.in[0].numel();
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - y[i];
    total += d * d;
  }
  out_f32(a)[0] = static_cast<float>(total / static_cast<double>(n));  // nan for empty inputs
  return Status::ok();
}

Status CrossEntropyGrad(const KernelArgs& a) {
  const TensorRef& logits = a.in[0];
  const TensorRef& targets = a.in[1];
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CrossEntropyGrad>(a.node));
  VOLTA_ASSIGN_OR_RETURN(const int64_t counted, count_targets(a, at->ignore_index));
  const bool has_ignore = at->ignore_index.has_value();
  const int64_t ignore = at->ignore_index.value_or(0);
  const int64_t C = logits.shape().back();
  const int64_t rows = targets.numel();
  const float* x = logits.as<const float>();
  const double dloss = a.in[2].as<const float>()[0];
  float* out = out_f32(a);
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
