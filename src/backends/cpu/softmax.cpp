// The CPU backend's softmax, log_softmax and softmax gradient over the last axis, one 16-lane
// row kernel each (softmax_vec.cpp), rows split into fixed tasks. The row kernels also serve the fused
// attention (attention.cpp) and the cross-entropy (loss.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

// softmax / log_softmax over the last axis, a task's rows at a time, with the optional scale and
// causal mask of a fused attention softmax.
Status softmax(const KernelArgs& a, bool as_log, int64_t axis, double scale, std::optional<int64_t> causal_offset) {
  const bool causal = causal_offset.has_value();
  const Shape& s = a.in[0].shape();
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return run_alone(as_log ? ref::LogSoftmax : ref::Softmax, a);
  VOLTA_ASSIGN_OR_RETURN(const int64_t offset, read_outside_tasks(a.in.size() >= 2 ? &a.in[1] : nullptr, [&] { return ref::softmax_offset(a, s.back(), causal_offset); }));
  const int64_t C = s.back(), rows = C == 0 ? 0 : a.in[0].numel() / C, R = causal ? s[s.size() - 2] : 1;
  const float* x = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  chunk_row_ranges(rows, C, [&](int64_t first, int64_t end) {
    for (int64_t r = first; r < end;) {  // runs of rows within one matrix (a causal row's valid is its row + 1)
      const int64_t run = causal ? std::min(end, (r / R + 1) * R) - r : end - r;
      softmax_rows(x + r * C, out + r * C, C, run, C, causal ? r % R + offset + 1 : C, causal ? 1 : 0, static_cast<float>(scale),
                   as_log, nullptr, 0);
      r += run;
    }
  });
  return Status::ok();
}

}  // namespace

Status softmax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Softmax>(a.node));
  return softmax(a, false, at->axis, at->scale, at->causal_offset);
}

Status log_softmax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LogSoftmax>(a.node));
  return softmax(a, true, at->axis, 1.0, std::nullopt);
}

Status softmax_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::SoftmaxGrad>(a.node));
  const int64_t axis = at->axis;
  const double scale = at->scale;
  const Shape& s = a.in[0].shape();
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return run_alone(ref::SoftmaxGrad, a);
  const int64_t C = s.back(), rows = C == 0 ? 0 : a.in[0].numel() / C;
  const float* y = a.in[0].as<const float>();
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  chunk_row_ranges(rows, C, [&](int64_t first, int64_t end) {
    softmax_grad_rows(y + first * C, dy + first * C, out + first * C, C, end - first, C, static_cast<float>(scale));
  });
  return Status::ok();
}

}  // namespace volta::cpu
