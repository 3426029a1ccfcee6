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
  const float mean = center ? sum_lanes(D, [&](int64_t d, int64_t k) { return load_n(x + d, k, 0.0f); }) * inv_d : 0.0f;
  const float var = sum_lanes(D, [&](int64_t d, int64_t k) {
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
  auto xhat = [&](int64_t d, int64_t k) { return (load_n(x + d, k, mean) - splat(mean)) * splat(rstd); };
  auto g = [&](int64_t d, int64_t k) { return load_n(dy + d, k, 0.0f) * load_n(gamma + d, k, 0.0f); };
  const float g_mean = center ? sum_lanes(D, g) * inv_d : 0.0f;
  const float gx_mean = sum_lanes(D, [&](int64_t d, int64_t k) { return g(d, k) * xhat(d, k); }) * inv_d;
  for (int64_t d = 0; d < D; d += kLanes) {
    const int64_t k = std::min(kLanes, D - d);
    store_n(dx + d, splat(rstd) * (g(d, k) - splat(g_mean) - xhat(d, k) * splat(gx_mean)), k);
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

Status layer_norm(const KernelArgs& a) { return norm(a, true, false); }
Status rms_norm(const KernelArgs& a) { return norm(a, false, false); }
Status layer_norm_grad(const KernelArgs& a) { return norm(a, true, true); }
Status rms_norm_grad(const KernelArgs& a) { return norm(a, false, true); }

}  // namespace volta::cpu
