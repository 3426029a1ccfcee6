// The CPU backend's cross-entropy and its gradient over rows of logits [..., C], one softmax
// row (softmax.cpp) per target, rows split into fixed tasks.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

// Cross-entropy over rows of logits [..., C]: the per-row losses are kept and summed in row
// order, so the mean does not depend on the split; rows of out-of-range targets are an error.
Status cross_entropy(const KernelArgs& a, bool grad) {
  VOLTA_ASSIGN_OR_RETURN(const std::optional<int64_t> ignore_index,
                         (ir::field_of<ir::Op::CrossEntropy, ir::Op::CrossEntropyGrad>(
                             a.node, [](const auto& at) { return at.ignore_index; })));
  if (a.in[0].type.dtype != DType::f32 || a.in[0].shape().empty() || !is_integer(a.in[1].type.dtype))
    return grad ? ref::CrossEntropyGrad(a) : ref::CrossEntropy(a);
  VOLTA_ASSIGN_OR_RETURN(const int64_t counted, ref::count_targets(a, ignore_index));
  const bool has_ignore = ignore_index.has_value();
  const int64_t ignore = ignore_index.value_or(0);
  const int64_t C = a.in[0].shape().back(), rows = a.in[1].numel();
  const float* x = a.in[0].as<const float>();
  auto target = [&](int64_t r) { return ref::read_index(a.in[1], r); };
  if (!grad) {
    std::vector<float> loss(static_cast<size_t>(rows), 0.0f);
    chunk_rows(rows, C, [&](int64_t r) {
      const int64_t t = target(r);
      if (has_ignore && t == ignore) return;
      thread_local std::vector<float> row;  // -log_softmax(x)[t] via one log-softmax row
      row.resize(static_cast<size_t>(C));
      softmax_rows(x + r * C, row.data(), C, 1, C, C, 0, 1.0f, true, nullptr, 0);
      loss[static_cast<size_t>(r)] = -row[static_cast<size_t>(t)];
    });
    double total = 0.0;
    for (float l : loss) total += l;
    a.out.as<float>()[0] = static_cast<float>(total / static_cast<double>(counted));  // 0/0 = nan: nothing counted
    return Status::ok();
  }
  const double dloss = a.in[2].as<const float>()[0];
  const auto scale = static_cast<float>(counted ? dloss / static_cast<double>(counted) : 0.0);
  float* out = a.out.as<float>();
  chunk_rows(rows, C, [&](int64_t r) {
    float* gr = out + r * C;
    const int64_t t = target(r);
    if (has_ignore && t == ignore) {
      std::fill_n(gr, C, 0.0f);
      return;
    }
    softmax_rows(x + r * C, gr, C, 1, C, C, 0, 1.0f, false, nullptr, 0);
    gr[t] -= 1.0f;
    for (int64_t c = 0; c < C; ++c) gr[c] *= scale;
  });
  return Status::ok();
}

}  // namespace

Status cross_entropy(const KernelArgs& a) { return cross_entropy(a, false); }
Status cross_entropy_grad(const KernelArgs& a) { return cross_entropy(a, true); }

}  // namespace volta::cpu
