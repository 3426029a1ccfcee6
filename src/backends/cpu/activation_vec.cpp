// Row kernels of the activations (activation.cpp): GELU (erf form) and its gradient, swiglu and
// the silu gradient, on 16-lane vectors. Compiled per ISA level (vec_kernels.h).
#include <algorithm>
#include <cmath>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA
#include "backends/cpu/vec_math.h"

namespace volta::cpu::VOLTA_VEC_NS {

using namespace vec;

namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

// gelu(x) = x Phi(x), Phi(x) = (1 + erf(a)) / 2 with a = x / sqrt(2). d/dx x Phi(x) = Phi(x) + x phi(x);
// erf's exp(-a^2) is phi's exp(-x^2 / 2). Both through GeluParts, so gelu_erf_and_grad, which
// shares them, gives each the bits of its own kernel.
struct GeluParts {
  Vec h, e;  // 1 + erf(a), exp(-a^2)
};
VOLTA_VEC_INLINE GeluParts gelu_parts(Vec v) {
  const Vec a = v * splat(kInvSqrt2);
  const Vec e = vexp(-a * a);
  return {splat(1.0f) + verf_given(a, e), e};
}
VOLTA_VEC_INLINE Vec gelu_of(Vec v, GeluParts p) { return splat(0.5f) * v * p.h; }
VOLTA_VEC_INLINE Vec gelu_d_of(Vec v, GeluParts p) {
  // Of the two products the first is fused with the sum (-ffp-contract=fast): named, so it comes
  // first in either vector spelling (vec.h's AVX2 operators may evaluate their right operand first).
  const Vec phi = splat(0.5f) * p.h;
  return phi + v * splat(kInvSqrt2Pi) * p.e;
}
VOLTA_VEC_INLINE Vec gelu_v(Vec v) { return gelu_of(v, gelu_parts(v)); }
VOLTA_VEC_INLINE Vec gelu_d(Vec v) { return gelu_d_of(v, gelu_parts(v)); }

// sigmoid(v) = su * sc, with exp(v) taken as (exp(v) 2^64) 2^-64 where it would underflow: the
// far tails of silu and its derivative (below f32's normal range, but not below the double
// reference's) keep their size and sign until the last multiply by sc rounds them, so an
// infinite factor gives the reference's infinity rather than 0 * inf.
struct SigmoidParts {
  Vec su, sc;
};
VOLTA_VEC_INLINE SigmoidParts sigmoid_parts(Vec v) {
  const Vec zero = splat(0.0f), one = splat(1.0f);
  const auto neg = v < zero;
  const Vec a = select(neg, v, -v);  // -|v|: exp never overflows
  const auto tail = a < splat(-80.0f);
  const Vec sc = select(tail, splat(0x1p-64f), one);
  Vec es = vexp(a);
  bool any_tail = false;
  for (int64_t i = 0; i < kLanes; ++i) any_tail |= tail[i] != 0;
  if (any_tail) es = select(tail, math::exp_shifted(a, tail & 64), es);  // a true comparison is -1
  return {select(neg, es, one) / (one + es * sc), select(neg, sc, one)};
}
// silu'(v) = s (1 + v (1 - s)), as its unscaled part (times the parts' sc).
VOLTA_VEC_INLINE Vec silu_d(Vec v, SigmoidParts p) { return p.su * (splat(1.0f) + v * (splat(1.0f) - p.su * p.sc)); }

}  // namespace

void gelu_erf(const float* x, float* y, int64_t n) { map(x, y, n, 0.0f, gelu_v); }

void gelu_erf_and_grad(const float* x, float* y, float* d, int64_t n) {
  const auto both = [&](int64_t i, Vec v, int64_t count) {
    const GeluParts p = gelu_parts(v);
    if (count == kLanes) store(y + i, gelu_of(v, p)), store(d + i, gelu_d_of(v, p));
    else store_part(y + i, gelu_of(v, p), count), store_part(d + i, gelu_d_of(v, p), count);
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) both(i, load(x + i), kLanes);
  if (i < n) both(i, load_part(x + i, n - i, 0.0f), n - i);
}

void gelu_erf_grad(const float* x, const float* dy, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(out + i, gelu_d(load(x + i)) * load(dy + i));
  if (i < n) store_part(out + i, gelu_d(load_part(x + i, n - i, 0.0f)) * load_part(dy + i, n - i, 0.0f), n - i);
}

// swiglu rows: x [rows, 2F] -> out [rows, F]; with dy, the gradient [rows, 2F] instead.
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

void silu_grad_elems(const float* x, const float* dy, float* out, int64_t n) {
  int64_t i = 0;
  auto one = [](Vec v, Vec d) VOLTA_VEC_LAMBDA {
    const SigmoidParts p = sigmoid_parts(v);
    return silu_d(v, p) * d * p.sc;
  };
  for (; i + kLanes <= n; i += kLanes) store(out + i, one(load(x + i), load(dy + i)));
  if (i < n) store_part(out + i, one(load_part(x + i, n - i, 0.0f), load_part(dy + i, n - i, 0.0f)), n - i);
}

}  // namespace volta::cpu::VOLTA_VEC_NS
