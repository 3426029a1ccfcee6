// Row kernels of layer_norm and rms_norm and their gradients (norm.cpp), on 16-lane vectors.
// Compiled per ISA level (vec_kernels.h).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA

namespace volta::cpu::VOLTA_VEC_NS {

using namespace vec;

namespace {

// The mean (0 for rms_norm) and 1 / sqrt(variance + eps) of a row, as the norms and their
// gradients need them.
struct Moments {
  float mean, rstd;
};
// The moments of R rows (D apart) at once, their sums interleaved (sum_rows): a row's chains are
// short (two sums of D / 16 adds, two horizontal trees, a square root), so rows one after the
// other left the cores mostly idle: a 768 x 128 layer_norm took 50 us hot in L2.
template <int R>
VOLTA_VEC_INLINE void row_moments(const float* x, int64_t D, float eps, bool center, Moments* mo) {
  const float inv_d = 1.0f / static_cast<float>(D);
  float mean[R], var[R];
  for (int r = 0; r < R; ++r) mean[r] = 0.0f;
  if (center) {
    sum_rows<R>(D, [&](int r, int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return load_n(x + r * D + d, k, 0.0f); }, mean);
    for (int r = 0; r < R; ++r) mean[r] *= inv_d;
  }
  sum_rows<R>(
      D,
      [&](int r, int64_t d, int64_t k) VOLTA_VEC_LAMBDA {
        const Vec c = load_n(x + r * D + d, k, mean[r]) - splat(mean[r]);
        return c * c;
      },
      var);
  for (int r = 0; r < R; ++r) mo[r] = {mean[r], 1.0f / std::sqrt(var[r] * inv_d + eps)};
}

// Rows [0, rows) in groups of kGroup (then one by one): f(first row, group size, its moments).
// In the training step (operands from L3; 768 x 128, 1 thread, means of six rounds) pairs did
// best: one row a call 51 and 74 us for layer_norm and its gradient, pairs 42 and 63, fours 45
// and 80 (hot in L2, fours won).
constexpr int kGroup = 2;
template <typename F>
VOLTA_VEC_INLINE void row_groups(const float* x, int64_t rows, int64_t D, float eps, bool center, F f) {
  Moments mo[kGroup];
  int64_t r = 0;
  for (; r + kGroup <= rows; r += kGroup) {
    row_moments<kGroup>(x + r * D, D, eps, center, mo);
    f(r, std::integral_constant<int, kGroup>{}, mo);
  }
  for (; r < rows; ++r) {
    row_moments<1>(x + r * D, D, eps, center, mo);
    f(r, std::integral_constant<int, 1>{}, mo);
  }
}

// y = (x - mean) * rstd * gamma (+ beta) on one row; rms_norm: mean = 0, rstd from the mean square.
VOLTA_VEC_INLINE void norm_out(const float* x, const float* gamma, const float* beta, float* y, int64_t D, Moments mo) {
  const float mean = mo.mean, rstd = mo.rstd;
  for (int64_t d = 0; d < D; d += kLanes) {
    const int64_t k = std::min(kLanes, D - d);
    Vec v = (load_n(x + d, k, 0.0f) - splat(mean)) * splat(rstd) * load_n(gamma + d, k, 0.0f);
    if (beta) v += load_n(beta + d, k, 0.0f);
    store_n(y + d, v, k);
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma (no mean(g) for rms_norm), for R
// rows (D apart) at once: each row's two sums are the chains one row alone would take, in two
// passes as before (one pass for both would compute g once for two uses, and the compiler then
// no longer fuses mean(g)'s multiply-adds), the rows interleaved.
template <int R>
VOLTA_VEC_INLINE void norm_grad_out(const float* x, const float* gamma, const float* dy, float* dx, int64_t D, bool center,
                                    const Moments* mo) {
  const float inv_d = 1.0f / static_cast<float>(D);
  auto xhat = [&](int r, int64_t d, int64_t k) VOLTA_VEC_LAMBDA {
    return (load_n(x + r * D + d, k, mo[r].mean) - splat(mo[r].mean)) * splat(mo[r].rstd);
  };
  auto g = [&](int r, int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return load_n(dy + r * D + d, k, 0.0f) * load_n(gamma + d, k, 0.0f); };
  float g_mean[R], gx_mean[R];
  for (int r = 0; r < R; ++r) g_mean[r] = 0.0f;
  if (center) sum_rows<R>(D, g, g_mean);
  sum_rows<R>(D, [&](int r, int64_t d, int64_t k) VOLTA_VEC_LAMBDA { return g(r, d, k) * xhat(r, d, k); }, gx_mean);
  for (int r = 0; r < R; ++r) g_mean[r] *= inv_d, gx_mean[r] *= inv_d;
  for (int r = 0; r < R; ++r)
    for (int64_t d = 0; d < D; d += kLanes) {
      const int64_t k = std::min(kLanes, D - d);
      store_n(dx + r * D + d, splat(mo[r].rstd) * (g(r, d, k) - splat(g_mean[r]) - xhat(r, d, k) * splat(gx_mean[r])), k);
    }
}

}  // namespace

void norm_rows(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t D, float eps, bool center) {
  row_groups(x, rows, D, eps, center, [&](int64_t r0, auto group, const Moments* mo) VOLTA_VEC_LAMBDA {
    for (int i = 0; i < group; ++i) norm_out(x + (r0 + i) * D, gamma, beta, y + (r0 + i) * D, D, mo[i]);
  });
}

void norm_grad_rows(const float* x, const float* gamma, const float* dy, float* dx, int64_t rows, int64_t D, float eps,
                    bool center) {
  row_groups(x, rows, D, eps, center, [&](int64_t r0, auto group, const Moments* mo) VOLTA_VEC_LAMBDA {
    norm_grad_out<decltype(group)::value>(x + r0 * D, gamma, dy + r0 * D, dx + r0 * D, D, center, mo);
  });
}

// mean and rstd of each row into m[2 r], m[2 r + 1], as norm_rows computes them (a vector kernel
// like it: the v4 and v3 builds contract the variance's multiply-adds, the baseline build does not).
// Row by row: grouped, norm_param_grad measured a tenth slower in the training step.
void norm_moments(const float* x, int64_t rows, int64_t D, float eps, bool center, float* m) {
  for (int64_t r = 0; r < rows; ++r) {
    Moments mo;
    row_moments<1>(x + r * D, D, eps, center, &mo);
    m[2 * r] = mo.mean, m[2 * r + 1] = mo.rstd;
  }
}

// p[i * kParamGradCols + j] = dy[j] * xhat[j] of row i < rows (rows D apart, columns j < n,
// moments m[2 i], m[2 i + 1]), xhat = (x - mean) * rstd * 1 as norm_row computes it with a unit
// gain. Out of line so that the caller's sums add the rounded products, as reduce_sum adds the
// stored output of mul: inlined, the compiler may contract the product and the sum into one FMA
// (-ffp-contract=fast), which would change the bits. A block of rows a call, not one.
// Full tasks (n == kParamGradCols) take the loops without per-vector tails: with them the
// products and sums were three quarters of a 768 x 128 norm_param_grad.
__attribute__((noinline)) void unit_norm_products(const float* x, const float* dy, const float* m,
                                                                   int64_t rows, int64_t D, float* p, int64_t n) {
  const auto one = [&](int64_t i, int64_t d, int64_t k) VOLTA_VEC_LAMBDA {
    const Vec xhat = (load_n(x + i * D + d, k, 0.0f) - splat(m[2 * i])) * splat(m[2 * i + 1]) * splat(1.0f);
    store_n(p + i * kParamGradCols + d, load_n(dy + i * D + d, k, 0.0f) * xhat, k);
  };
  if (n == kParamGradCols) {
    for (int64_t i = 0; i < rows; ++i)
#pragma GCC unroll 4
      for (int64_t d = 0; d < kParamGradCols; d += kLanes) one(i, d, kLanes);
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t d = 0; d < n; d += kLanes) one(i, d, std::min(kLanes, n - d));
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
      const auto add = [&](int64_t c, int64_t k) VOLTA_VEC_LAMBDA {
        dg[c / kLanes] += load_n(p + i * kParamGradCols + c, k, 0.0f);
        db[c / kLanes] += load_n(dyr + c, k, 0.0f);
      };
      if (n == kParamGradCols) {
#pragma GCC unroll 4
        for (int64_t c = 0; c < kParamGradCols; c += kLanes) add(c, kLanes);
      } else {
        for (int64_t c = 0; c < n; c += kLanes) add(c, std::min(kLanes, n - c));
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
