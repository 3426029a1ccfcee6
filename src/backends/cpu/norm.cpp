// The CPU backend's layer_norm and rms_norm over the last axis and their gradients, one 16-lane
// row kernel each (vec.h), rows split into fixed tasks.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "backends/cpu/vec.h"

namespace volta::cpu {

using namespace vec;

namespace {

// The mean (0 for rms_norm) and 1 / sqrt(variance + eps) of a row, as norm_row and
// norm_grad_row both need them.
struct Moments {
  float mean, rstd;
};
VOLTA_VEC_INLINE Moments row_moments(const float* x, int64_t D, float eps, bool center) {
  const float inv_d = 1.0f / static_cast<float>(D);
  const float mean = center ? sum_lanes(D, [&](int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return load_n(x + d, k, 0.0f); }) * inv_d : 0.0f;
  const float var = sum_lanes(D, [&](int64_t d, int64_t k) VOLTA_VEC_LAMBDA {
                      const Vec c = load_n(x + d, k, mean) - splat(mean);
                      return c * c;
                    }) * inv_d;
  return {mean, 1.0f / std::sqrt(var + eps)};
}

}  // namespace

// y = (x - mean) * rstd * gamma (+ beta); rms_norm: mean = 0, rstd from the mean square.
VOLTA_ISA_CLONES
void norm_row(const float* x, const float* gamma, const float* beta, float* y, int64_t D, float eps, bool center) {
  const Moments mo = row_moments(x, D, eps, center);
  const float mean = mo.mean, rstd = mo.rstd;
  for (int64_t d = 0; d < D; d += kLanes) {
    const int64_t k = std::min(kLanes, D - d);
    Vec v = (load_n(x + d, k, 0.0f) - splat(mean)) * splat(rstd) * load_n(gamma + d, k, 0.0f);
    if (beta) v += load_n(beta + d, k, 0.0f);
    store_n(y + d, v, k);
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma (no mean(g) for rms_norm).
VOLTA_ISA_CLONES
void norm_grad_row(const float* x, const float* gamma, const float* dy, float* dx, int64_t D, float eps, bool center) {
  const float inv_d = 1.0f / static_cast<float>(D);
  const Moments mo = row_moments(x, D, eps, center);
  const float mean = mo.mean, rstd = mo.rstd;  // named values: lambdas below capture them
  auto xhat = [&](int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return (load_n(x + d, k, mean) - splat(mean)) * splat(rstd); };
  auto g = [&](int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return load_n(dy + d, k, 0.0f) * load_n(gamma + d, k, 0.0f); };
  const float g_mean = center ? sum_lanes(D, g) * inv_d : 0.0f;
  const float gx_mean = sum_lanes(D, [&](int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return g(d, k) * xhat(d, k); }) * inv_d;
  for (int64_t d = 0; d < D; d += kLanes) {
    const int64_t k = std::min(kLanes, D - d);
    store_n(dx + d, splat(rstd) * (g(d, k) - splat(g_mean) - xhat(d, k) * splat(gx_mean)), k);
  }
}

// mean and rstd of one row into m[0], m[1], as norm_row computes them (an ISA clone like it: the
// clones contract the variance's multiply-adds, the baseline code does not).
VOLTA_ISA_CLONES
void norm_moments(const float* x, int64_t D, float eps, bool center, float* m) {
  const Moments mo = row_moments(x, D, eps, center);
  m[0] = mo.mean, m[1] = mo.rstd;
}

constexpr int64_t kParamGradCols = 64;  // columns per task of norm_param_grad's sums
constexpr int64_t kParamGradRows = 32;  // rows of products per call of unit_norm_products

// p[i * kParamGradCols + j] = dy[j] * xhat[j] of row i < rows (rows D apart, columns j < n,
// moments m[2 i], m[2 i + 1]), xhat = (x - mean) * rstd * 1 as norm_row computes it with a unit
// gain. Out of line so that the caller's sums add the rounded products, as reduce_sum adds the
// stored output of mul: inlined, the compiler may contract the product and the sum into one FMA
// (-ffp-contract=fast), which would change the bits. A block of rows a call, not one.
__attribute__((noinline)) VOLTA_ISA_CLONES void unit_norm_products(const float* x, const float* dy, const float* m,
                                                                   int64_t rows, int64_t D, float* p, int64_t n) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t d = 0; d < n; d += kLanes) {
      const int64_t k = std::min(kLanes, n - d);
      const Vec xhat = (load_n(x + i * D + d, k, 0.0f) - splat(m[2 * i])) * splat(m[2 * i + 1]) * splat(1.0f);
      store_n(p + i * kParamGradCols + d, load_n(dy + i * D + d, k, 0.0f) * xhat, k);
    }
}

// Columns [0, n) (n <= kParamGradCols) of norm_param_grad: out[j] = sum over the rows in order of
// dy * xhat, out[D + j] of dy, each from +0 (x, dy and out start at the task's first column).
VOLTA_ISA_CLONES
void norm_param_sums(const float* x, const float* dy, const float* moments, int64_t rows, int64_t D, int64_t n, float* out) {
  alignas(64) float p[kParamGradRows * kParamGradCols];
  Vec dg[kParamGradCols / kLanes], db[kParamGradCols / kLanes];
  for (int64_t v = 0; v < kParamGradCols / kLanes; ++v) dg[v] = splat(0.0f), db[v] = splat(0.0f);
  for (int64_t r0 = 0; r0 < rows; r0 += kParamGradRows) {
    const int64_t block = std::min(kParamGradRows, rows - r0);
    unit_norm_products(x + r0 * D, dy + r0 * D, moments + 2 * r0, block, D, p, n);
    for (int64_t i = 0; i < block; ++i) {
      const float* dyr = dy + (r0 + i) * D;
      for (int64_t c = 0; c < n; c += kLanes) {
        const int64_t k = std::min(kLanes, n - c);
        dg[c / kLanes] += load_n(p + i * kParamGradCols + c, k, 0.0f);
        db[c / kLanes] += load_n(dyr + c, k, 0.0f);
      }
    }
  }
  for (int64_t c = 0; c < n; c += kLanes) {
    const int64_t k = std::min(kLanes, n - c);
    store_n(out + c, dg[c / kLanes], k);
    store_n(out + D + c, db[c / kLanes], k);
  }
}

namespace {

// layer_norm / rms_norm and their gradients over the last axis, one row at a time.
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
    chunk_rows(rows, D, [&](int64_t r) { norm_grad_row(x + r * D, gamma, dy + r * D, out + r * D, D, e, center); });
    return Status::ok();
  }
  const float* beta = a.in.size() > 2 ? a.in[2].as<const float>() : nullptr;
  chunk_rows(rows, D, [&](int64_t r) { norm_row(x + r * D, gamma, beta, out + r * D, D, e, center); });
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
  chunk_rows(rows, D, [&](int64_t r) { norm_moments(x + r * D, D, eps, center, moments + 2 * r); });
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
