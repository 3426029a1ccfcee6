// Elementwise and row kernels on 16-lane vectors (vec.h): GELU and its gradient, softmax and
// log-softmax rows with their gradients, layer/rms norm rows with their gradients, column sums.
// Raw loops only; fast_ops.cpp reads the attributes and splits the work into fixed tasks.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vec.h"

namespace volta::cpu {

using namespace vec;

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

VOLTA_VEC_INLINE Vec gelu_v(Vec v) { return splat(0.5f) * v * (splat(1.0f) + verf(v * splat(kInvSqrt2))); }
// d/dx x Phi(x) = Phi(x) + x phi(x); erf's exp(-a^2), a = x / sqrt(2), is phi's exp(-x^2 / 2).
VOLTA_VEC_INLINE Vec gelu_d(Vec v) {
  const Vec a = v * splat(kInvSqrt2);
  const Vec e = vexp(-a * a);
  return splat(0.5f) * (splat(1.0f) + verf_given(a, e)) + v * splat(kInvSqrt2Pi) * e;
}

// sigmoid(v) = su * sc, with exp(v) taken as exp(v + 64) 2^-64 where it would underflow: the
// far tails of silu and its derivative (below f32's normal range, but not below the double
// reference's) keep their size and sign until the last multiply by sc rounds them, so an
// infinite factor gives the reference's infinity rather than 0 * inf.
struct SigmoidParts {
  Vec su, sc;
};
VOLTA_VEC_INLINE SigmoidParts sigmoid_parts(Vec v) {
  const Vec zero = splat(0.0f), one = splat(1.0f);
  const Vec a = v < zero ? v : -v;  // -|v|: exp never overflows
  const auto tail = a < splat(-80.0f);
  const Vec sc = tail ? splat(0x1p-64f) : one;
  const Vec es = vexp(tail ? a + splat(64.0f) : a);
  return {(v < zero ? es : one) / (one + es * sc), v < zero ? sc : one};
}
// silu'(v) = s (1 + v (1 - s)), as its unscaled part (times the parts' sc).
VOLTA_VEC_INLINE Vec silu_d(Vec v, SigmoidParts p) { return p.su * (splat(1.0f) + v * (splat(1.0f) - p.su * p.sc)); }

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

VOLTA_ISA_CLONES
void gelu_erf(const float* x, float* y, int64_t n) { map(x, y, n, 0.0f, gelu_v); }

VOLTA_ISA_CLONES
void gelu_erf_grad(const float* x, const float* dy, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(out + i, gelu_d(load(x + i)) * load(dy + i));
  if (i < n) store_part(out + i, gelu_d(load_part(x + i, n - i, 0.0f)) * load_part(dy + i, n - i, 0.0f), n - i);
}

// swiglu rows: x [rows, 2F] -> out [rows, F]; with dy, the gradient [rows, 2F] instead.
VOLTA_ISA_CLONES
void swiglu_rows(const float* x, const float* dy, float* out, int64_t rows, int64_t F) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *g = x + r * 2 * F, *u = g + F, *d = dy ? dy + r * F : nullptr;
    float* o = out + r * (dy ? 2 * F : F);
    for (int64_t j = 0; j < F; j += kLanes) {
      const int64_t m = std::min<int64_t>(kLanes, F - j);
      const Vec gv = load_n(g + j, m, 0.0f), uv = load_n(u + j, m, 0.0f);
      const SigmoidParts p = sigmoid_parts(gv);
      const Vec silu = gv * p.su;  // times p.sc
      if (!d) {
        store_n(o + j, silu * uv * p.sc, m);
        continue;
      }
      const Vec dv = load_n(d + j, m, 0.0f);
      store_n(o + j, silu_d(gv, p) * (dv * uv) * p.sc, m);
      store_n(o + F + j, dv * (silu * p.sc), m);
    }
  }
}

VOLTA_ISA_CLONES
void silu_grad(const float* x, const float* dy, float* out, int64_t n) {
  int64_t i = 0;
  auto one = [](Vec v, Vec d) {
    const SigmoidParts p = sigmoid_parts(v);
    return silu_d(v, p) * d * p.sc;
  };
  for (; i + kLanes <= n; i += kLanes) store(out + i, one(load(x + i), load(dy + i)));
  if (i < n) store_part(out + i, one(load_part(x + i, n - i, 0.0f), load_part(dy + i, n - i, 0.0f)), n - i);
}

// softmax(scale * x) over the first `valid` entries of a row; the others are left out
// (0 for softmax, -inf for log_softmax). No valid entry gives nan, like the reference's 0/0.
// Loads cover whole 16-lane groups of the row where it has them; masked lanes hold -inf, whose
// exp is exactly 0.
VOLTA_ISA_CLONES
void softmax_row(const float* x, float* y, int64_t C, int64_t valid, float scale, bool as_log) {
  const float ninf = -std::numeric_limits<float>::infinity();
  valid = std::min(valid, C);
  if (valid <= 0) {
    std::fill_n(y, C, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  auto z = [&](int64_t c) {  // the 16 lanes at c, masked past `valid`
    return keep_first(load_n(x + c, std::min(kLanes, C - c), 0.0f) * splat(scale), valid - c, ninf);
  };
  Vec m = splat(ninf);
  for (int64_t c = 0; c < valid; c += kLanes) m = vmax(m, z(c));
  const float mx = hmax(m);
  if (!std::isfinite(mx)) {  // inf or nan in the row: the scalar formula says what it gives
    double sum = 0.0;
    for (int64_t c = 0; c < valid; ++c) sum += std::exp(static_cast<double>(scale * x[c]) - mx);
    for (int64_t c = 0; c < valid; ++c) {
      const double e = static_cast<double>(scale * x[c]) - mx;
      y[c] = static_cast<float>(as_log ? e - std::log(sum) : std::exp(e) / sum);
    }
    std::fill(y + valid, y + C, as_log ? ninf : 0.0f);
    return;
  }
  Vec acc = splat(0.0f);
  for (int64_t c = 0; c < C; c += kLanes) {
    const Vec e = c < valid ? vexp(z(c) - splat(mx)) : splat(0.0f);
    acc += e;
    if (!as_log) store_n(y + c, e, std::min(kLanes, C - c));
  }
  const float sum = hsum(acc);
  if (as_log) {
    const float shift = mx + std::log(sum);
    for (int64_t c = 0; c < valid; c += kLanes) store_n(y + c, z(c) - splat(shift), std::min(kLanes, valid - c));
  } else {
    const float inv = 1.0f / sum;
    map(y, y, valid, 0.0f, [&](Vec v) { return v * splat(inv); });
  }
  std::fill(y + valid, y + C, as_log ? ninf : 0.0f);  // masked entries stay exact whatever the row holds
}

// dx = scale * y * (dy - sum(dy * y)) for one softmax row y.
VOLTA_ISA_CLONES
void softmax_grad_row(const float* y, const float* dy, float* dx, int64_t C, float scale) {
  const float dot = sum_lanes(C, [&](int64_t c, int64_t k) { return load_n(dy + c, k, 0.0f) * load_n(y + c, k, 0.0f); });
  for (int64_t c = 0; c < C; c += kLanes) {
    const int64_t k = std::min(kLanes, C - c);
    store_n(dx + c, splat(scale) * load_n(y + c, k, 0.0f) * (load_n(dy + c, k, 0.0f) - splat(dot)), k);
  }
}

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

// out[j] = sum over r of x[r * ld + j], j < n (n <= a few hundred), r in order.
VOLTA_ISA_CLONES
void column_sums(const float* x, int64_t ld, int64_t rows, float* out, int64_t n) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const int64_t k = std::min(kLanes, n - j);
    Vec acc = splat(0.0f);
    for (int64_t r = 0; r < rows; ++r) acc += load_n(x + r * ld + j, k, 0.0f);
    store_n(out + j, acc, k);
  }
}

VOLTA_ISA_CLONES
float row_sum(const float* x, int64_t n) {
  return sum_lanes(n, [&](int64_t i, int64_t k) { return load_n(x + i, k, 0.0f); });
}

// Integer tests of the bits, so they vectorise (no float compares, no early exit).
VOLTA_ISA_CLONES
bool all_finite(const float* x, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    bad |= (u & 0x7f800000u) == 0x7f800000u ? 1u : 0u;  // exponent all ones: inf or nan
  }
  return bad == 0;
}

VOLTA_ISA_CLONES
bool all_zero(const float* x, int64_t n) {
  uint32_t bits = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    bits |= u & 0x7fffffffu;  // +0 and -0 alike
  }
  return bits == 0;
}

}  // namespace volta::cpu
