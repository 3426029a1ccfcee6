// Elementary functions on 16-lane f32 vectors, accurate to the last bit or two: the CPU's math
// for the IR's unary ops exp, log, tanh, sigmoid, silu and erf (cpu::vector_unary), which the unfused
// op and fused_elementwise share, so fusing a chain keeps its bits. Every lane is computed on its
// own, so a value depends only on its input (and on the ISA clone: v4 and v3 contract the same
// multiply-adds). The polynomials were fitted for this file (minimax over their ranges, with f32
// coefficients); tests/test_vec_math.cpp holds the measured error against libm in double and
// every special value (infinities, nan, signed zeros, subnormal inputs and results) to it.
#pragma once

#include "backends/cpu/vec.h"

namespace volta::cpu::VOLTA_VEC_NS::vec::math {

VOLTA_VEC_INLINE Vec bits_as_float(IVec i) { return as_float(i); }
VOLTA_VEC_INLINE IVec float_bits(Vec v) { return as_int(v); }
constexpr int32_t kSignBit = static_cast<int32_t>(0x80000000u);
VOLTA_VEC_INLINE Vec vabs(Vec x) { return bits_as_float(float_bits(x) & ~kSignBit); }
// |m| with the sign of s (nan keeps being nan).
VOLTA_VEC_INLINE Vec with_sign_of(Vec m, Vec s) { return bits_as_float(float_bits(m) | (float_bits(s) & kSignBit)); }

// c[0] + c[1] t + ... + c[N-1] t^(N-1), Horner.
template <size_t N>
VOLTA_VEC_INLINE Vec poly(Vec t, const float (&c)[N]) {
  Vec p = splat(c[N - 1]);
  for (size_t i = N - 1; i-- > 0;) p = p * t + splat(c[i]);
  return p;
}

// exp(x) 2^shift (each lane's shift in [0, 64]), rounded once: exp(x) = 2^n exp(r), n = round(x / ln 2),
// r = x - n ln 2 (ln 2 in two parts, n ln2_hi exact), exp(r) = 1 + r + r^2 q(r) on |r| <= ln2 / 2.
// 2^(n + shift) is applied as two halves, so results in the subnormal range round once and
// overflow gives +inf. Within 1 ulp.
VOLTA_VEC_INLINE Vec exp_shifted(Vec x, IVec shift) {
  static constexpr float q[] = {5.000000000e-01f, 1.666666567e-01f, 4.166629538e-02f,
                                8.333496749e-03f, 1.394464984e-03f, 1.979035733e-04f};
  const auto nan = x != x;
  Vec c = select(nan, splat(0.0f), x);
  c = select(c > splat(89.0f), splat(89.0f), c);      // exp(89) overflows
  c = select(c < splat(-150.0f), splat(-150.0f), c);  // exp(-150) 2^64 rounds to 0
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer in round-to-nearest mode.
  const Vec n = (c * splat(1.44269504f) + splat(12582912.0f)) - splat(12582912.0f);
  const Vec r = (c - n * splat(0.693145751953125f)) - n * splat(1.428606765330187e-06f);
  const Vec p = (r * r * poly(r, q) + r) + splat(1.0f);
  const IVec ni = to_int(n) + shift;  // [-216, 192]
  const IVec n1 = ni >> 1, n2 = ni - n1;                     // each in [-108, 96]: a normal power of 2
  const Vec y = (p * bits_as_float((n1 + 127) << 23)) * bits_as_float((n2 + 127) << 23);
  return select(nan, x, y);
}
VOLTA_VEC_INLINE Vec exp(Vec x) { return exp_shifted(x, IVec{}); }

// log(x) = e ln 2 + log(m), x = m 2^e with m in [sqrt(1/2), sqrt(2)); log(1 + f) = f - f^2 / 2 +
// f^3 P(f). Subnormal inputs are scaled by 2^23 first. Within 1 ulp.
VOLTA_VEC_INLINE Vec log(Vec x) {
  static constexpr float pc[] = {3.333333135e-01f,  -2.500082254e-01f, 2.000122666e-01f,  -1.662335694e-01f,
                                 1.420176178e-01f, -1.316019446e-01f, 1.276154965e-01f, -7.634429634e-02f};
  const auto sub = x < splat(0x1p-126f);
  const IVec bits = float_bits(select(sub, x * splat(0x1p23f), x));
  IVec e = ((bits >> 23) & 0xff) - 127 - (sub & 23);
  Vec m = bits_as_float((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const auto high = m > splat(1.41421356f);
  m = select(high, m * splat(0.5f), m);
  e = e - high;  // a true comparison is -1
  const Vec f = m - splat(1.0f);  // exact
  const Vec ef = to_float(e);
  const Vec f2 = f * f;
  const Vec cubic = f2 * f * poly(f, pc);  // named: the product fused with the sum below (see vec.h)
  Vec y = cubic + ef * splat(1.428606765330187e-06f);
  y = (f + (y - splat(0.5f) * f2)) + ef * splat(0.693145751953125f);
  y = select(x == splat(__builtin_inff()), x, y);
  y = select(x == splat(0.0f), splat(-__builtin_inff()), y);
  y = select(x < splat(0.0f), splat(__builtin_nanf("")), y);
  return select(x != x, x, y);
}

// tanh(x), odd: |x| < 1 by x + x^3 T(x^2), else 1 - 2 / (exp(2|x|) + 1). Within 1 ulp.
VOLTA_VEC_INLINE Vec tanh(Vec x) {
  static constexpr float tc[] = {-3.333329558e-01f, 1.333234459e-01f,  -5.387980118e-02f, 2.148665860e-02f,
                                 -7.946107537e-03f, 2.301364904e-03f, -3.584520891e-04f};
  const Vec a = vabs(x), s = a * a;
  const Vec small = a * s * poly(s, tc) + a;
  const Vec big = splat(1.0f) - splat(2.0f) / (exp(a + a) + splat(1.0f));
  return with_sign_of(select(a < splat(1.0f), small, big), x);
}

// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = exp(-|x|). Within 2 ulp.
VOLTA_VEC_INLINE Vec sigmoid(Vec x) {
  const Vec e = exp(-vabs(x)), d = splat(1.0f) + e;
  return select(x < splat(0.0f), e / d, splat(1.0f) / d);
}

// silu(x) = x sigmoid(x): x / (1 + exp(-x)) for x >= 0 and x e / (1 + e), e = exp(x), below.
// Under -80 e is taken as (exp(x) 2^64) 2^-64, so x e keeps its precision until the last
// multiply rounds it (silu(-90) is a normal number, sigmoid(-90) is not). Within 3 ulp.
VOLTA_VEC_INLINE Vec silu(Vec x) {
  const auto neg = x < splat(0.0f), tail = x < splat(-80.0f);
  const Vec e = exp_shifted(-vabs(x), tail & 64);  // a true comparison is -1
  const Vec y = select(neg, x * e, x) / (splat(1.0f) + select(tail, splat(0.0f), e));
  return select(tail, y * splat(0x1p-64f), y);
}

// erf(x), odd: |x| < 1 by x + x S(x^2), else 1 - exp(-x^2) R(|x| - 2) (R fits erfc(x) exp(x^2)
// on [1, 4]; from 4 on erf rounds to 1). Within 1 ulp.
VOLTA_VEC_INLINE Vec erf(Vec x) {
  static constexpr float sc[] = {1.283791661e-01f, -3.761262596e-01f, 1.128358543e-01f, -2.685381658e-02f,
                                 5.188334268e-03f, -8.010247257e-04f, 7.854025171e-05f};
  static constexpr float rc[] = {2.553956509e-01f,  -1.067964882e-01f, 4.180401564e-02f, -1.545728650e-02f,
                                 5.435745697e-03f,  -1.851273468e-03f, 5.898842355e-04f, -1.570387540e-04f,
                                 6.819483679e-05f, -2.799457252e-05f};
  Vec a = vabs(x);
  a = select(a > splat(4.0f), splat(4.0f), a);  // nan stays nan
  const Vec s = a * a;
  const Vec small = a * poly(s, sc) + a;
  const Vec big = splat(1.0f) - exp(-s) * poly(a - splat(2.0f), rc);
  return with_sign_of(select(a < splat(1.0f), small, big), x);
}

}  // namespace volta::cpu::VOLTA_VEC_NS::vec::math
