// The CPU backend's layer_norm and rms_norm over the last axis and their gradients, one 16-lane
// kernel each over a task's rows (norm_vec.cpp), rows split into fixed tasks.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

// layer_norm / rms_norm and their gradients over the last axis, a task's rows a call.
Status norm(const KernelArgs& a, bool center, bool grad) {
  VOLTA_ASSIGN_OR_RETURN(const double eps,
                         (ir::field_of<ir::Op::LayerNorm, ir::Op::RmsNorm, ir::Op::LayerNormGrad, ir::Op::RmsNormGrad>(
                             a.node, [](const auto& at) { return at.eps; })));
  const int64_t D = a.in[0].shape().back(), rows = ref::last_axis_rows(a);
  const float* x = a.in[0].as<const float>();
  const float* gamma = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  const auto e = static_cast<float>(eps);
  if (grad) {
    const float* dy = a.in[2].as<const float>();
    chunk_row_ranges(rows, D, [&](int64_t r0, int64_t r1) {
      norm_grad_rows(x + r0 * D, gamma, dy + r0 * D, out + r0 * D, r1 - r0, D, e, center);
    });
    return Status::ok();
  }
  const float* beta = a.in.size() > 2 ? a.in[2].as<const float>() : nullptr;
  chunk_row_ranges(rows, D, [&](int64_t r0, int64_t r1) { norm_rows(x + r0 * D, gamma, beta, out + r0 * D, r1 - r0, D, e, center); });
  return Status::ok();
}

}  // namespace

// norm_param_grad: the row moments first (tasks of rows, into the workspace), then per task of
// 64 columns the sums over all rows in order from +0, as reduce_sum sums mul's output.
size_t norm_param_grad_workspace_bytes(const ir::Graph& g, const ir::Node& node) {
  if (node.inputs.empty()) return 0;
  const TensorType& x = g.node(node.inputs[0]).type;
  const int64_t D = x.shape.empty() ? 0 : x.shape.back();
  return D > 0 ? static_cast<size_t>(2 * (x.numel() / D)) * sizeof(float) : 0;
}

Status norm_param_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::NormParamGrad>(a.node));
  const int64_t D = a.in[0].shape().back(), rows = ref::last_axis_rows(a);
  if (a.workspace.size() < static_cast<size_t>(2 * rows) * sizeof(float))
    return internal_error("[norm_param_grad] workspace too small " + ir::node_ref(a.node));
  const float* x = a.in[0].as<const float>();
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  auto* moments = reinterpret_cast<float*>(a.workspace.data());  // mean, rstd per row
  const auto eps = static_cast<float>(at->eps);
  const bool center = at->center != 0;
  chunk_row_ranges(rows, D, [&](int64_t r0, int64_t r1) { norm_moments(x + r0 * D, r1 - r0, D, eps, center, moments + 2 * r0); });
  parallel_for((D + kParamGradCols - 1) / kParamGradCols, [&](int64_t t) {
    const int64_t j0 = t * kParamGradCols;
    norm_param_sums(x + j0, dy + j0, moments, rows, D, std::min(kParamGradCols, D - j0), out + j0);
  });
  return Status::ok();
}

Status layer_norm(const KernelArgs& a) { return norm(a, true, false); }
Status rms_norm(const KernelArgs& a) { return norm(a, false, false); }
Status layer_norm_grad(const KernelArgs& a) { return norm(a, true, true); }
Status rms_norm_grad(const KernelArgs& a) { return norm(a, false, true); }

}  // namespace volta::cpu
