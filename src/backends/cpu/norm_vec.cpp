// Row kernels of layer_norm and rms_norm and their gradients (norm.cpp), on 16-lane vectors.
// Compiled per ISA level (vec_kernels.h).
#include <algorithm>
#include <cmath>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA

namespace volta::cpu::VOLTA_VEC_NS {

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

// mean and rstd of one row into m[0], m[1], as norm_row computes them (a vector kernel like it:
// the v4 and v3 builds contract the variance's multiply-adds, the baseline build does not).
void norm_moments(const float* x, int64_t D, float eps, bool center, float* m) {
  const Moments mo = row_moments(x, D, eps, center);
  m[0] = mo.mean, m[1] = mo.rstd;
}

// p[i * kParamGradCols + j] = dy[j] * xhat[j] of row i < rows (rows D apart, columns j < n,
// moments m[2 i], m[2 i + 1]), xhat = (x - mean) * rstd * 1 as norm_row computes it with a unit
// gain. Out of line so that the caller's sums add the rounded products, as reduce_sum adds the
// stored output of mul: inlined, the compiler may contract the product and the sum into one FMA
// (-ffp-contract=fast), which would change the bits. A block of rows a call, not one.
__attribute__((noinline)) void unit_norm_products(const float* x, const float* dy, const float* m,
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

}  // namespace volta::cpu::VOLTA_VEC_NS
