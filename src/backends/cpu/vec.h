// 16-lane float vectors for the CPU backend's own kernels (vec_*.cpp only: those files are
// compiled with -O3 and FMA contraction, and their hot functions carry VOLTA_ISA_CLONES).
//
// A Vec is one zmm register on AVX-512, two ymm on AVX2 and four xmm on baseline x86-64; lanes
// are independent, so every clone computes the same lane values. Horizontal sums use one fixed
// tree, so a reduction's bits depend only on the data and its length, never on the thread
// count. The v4 and v3 clones both contract multiply-adds into FMA and agree bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VOLTA_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLTA_ISA_CLONES
#endif

// Every helper is forced inline so it is compiled for the ISA of the clone that calls it.
#define VOLTA_VEC_INLINE inline __attribute__((always_inline))
// The same for a lambda that takes or returns a Vec inside a clone ([&](...) VOLTA_VEC_LAMBDA {...}):
// left out of line (the sanitizer builds' inliner did that), its body is compiled for the baseline
// ISA, which passes a 64-byte vector in memory where the AVX-512 clone passes it in a register,
// and the call reads garbage.
#define VOLTA_VEC_LAMBDA __attribute__((always_inline))

namespace volta::cpu::vec {

typedef float Vec __attribute__((vector_size(64)));
typedef int32_t IVec __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

VOLTA_VEC_INLINE Vec splat(float v) { return Vec{} + v; }

VOLTA_VEC_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
VOLTA_VEC_INLINE void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// The first m (< 16) lanes from p, the others `fill`; only for the tail of a row.
VOLTA_VEC_INLINE Vec load_part(const float* p, int64_t m, float fill) {
  float buf[kLanes];
  std::fill_n(buf, kLanes, fill);
  std::memcpy(buf, p, static_cast<size_t>(m) * sizeof(float));
  return load(buf);
}
VOLTA_VEC_INLINE void store_part(float* p, Vec v, int64_t m) {
  float buf[kLanes];
  store(buf, v);
  std::memcpy(p, buf, static_cast<size_t>(m) * sizeof(float));
}

VOLTA_VEC_INLINE Vec vmax(Vec a, Vec b) { return a > b ? a : b; }

// Fixed pairwise trees over the 16 lanes: lane i meets lane i + 8, then i + 4, i + 2, i + 1.
// Written with half-width shuffles rather than through memory: a row kernel's scalar reads of a
// vector it had just stored stalled on store forwarding.
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec4 __attribute__((vector_size(16)));
typedef float Vec2 __attribute__((vector_size(8)));
VOLTA_VEC_INLINE float hsum(Vec v) {
  const Vec8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const Vec4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const Vec2 c = __builtin_shufflevector(b, b, 0, 1) + __builtin_shufflevector(b, b, 2, 3);
  return c[0] + c[1];
}
VOLTA_VEC_INLINE float hmax(Vec v) {
  auto pick = [](auto x, auto y) { return x > y ? x : y; };  // lane-wise, as the scalar l[i] > l[i + w] ? l[i] : l[i + w]
  const Vec8 a = pick(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
  const Vec4 b = pick(__builtin_shufflevector(a, a, 0, 1, 2, 3), __builtin_shufflevector(a, a, 4, 5, 6, 7));
  const Vec2 c = pick(__builtin_shufflevector(b, b, 0, 1), __builtin_shufflevector(b, b, 2, 3));
  return c[0] > c[1] ? c[0] : c[1];
}

// exp(x): x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2, exp(r) by a degree-7 Taylor
// polynomial (relative error < 2e-7). Below -87 the result is 0 (so exp(-inf) is exactly 0,
// as masked attention scores need); above 88 it saturates at exp(88).
VOLTA_VEC_INLINE Vec vexp(Vec x) {
  const auto underflow = x < splat(-87.0f);
  x = underflow ? splat(-87.0f) : x;
  x = x > splat(88.0f) ? splat(88.0f) : x;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer in round-to-nearest mode.
  const Vec n = (x * splat(1.44269504f) + splat(12582912.0f)) - splat(12582912.0f);
  const Vec r = (x - n * splat(0.693145751953125f)) - n * splat(1.428606765330187e-06f);
  Vec p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  // 2^n through the exponent bits.
  const IVec bits = (__builtin_convertvector(n, IVec) + 127) << 23;
  Vec scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return underflow ? splat(0.0f) : p * scale;
}

// erf(x) by Abramowitz & Stegun 7.1.26: 1 - t (a1 + t (a2 + ...)) exp(-x^2), t = 1 / (1 + p x),
// absolute error < 1.5e-7.
// erf_given(x, e) takes e = exp(-x^2) from the caller (GELU's gradient needs it too).
VOLTA_VEC_INLINE Vec verf_given(Vec x, Vec e) {
  const Vec sign = x < splat(0.0f) ? splat(-1.0f) : splat(1.0f);
  const Vec ax = x * sign;
  const Vec t = splat(1.0f) / (splat(1.0f) + splat(0.3275911f) * ax);
  Vec poly = splat(1.061405429f);
  poly = poly * t + splat(-1.453152027f);
  poly = poly * t + splat(1.421413741f);
  poly = poly * t + splat(-0.284496736f);
  poly = poly * t + splat(0.254829592f);
  return sign * (splat(1.0f) - poly * t * e);
}
VOLTA_VEC_INLINE Vec verf(Vec x) { return verf_given(x, vexp(-x * x)); }

// Applies f(Vec) -> Vec over n elements of x into y; the tail is padded with `fill`.
template <typename F>
VOLTA_VEC_INLINE void map(const float* x, float* y, int64_t n, float fill, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(y + i, f(load(x + i)));
  if (i < n) store_part(y + i, f(load_part(x + i, n - i, fill)), n - i);
}

// Sum of f(i-th vector) over n elements in lanes, then the fixed tree. f gets the element
// offset and the number of valid lanes (16 except at the tail) and returns 0 in invalid lanes.
template <typename F>
VOLTA_VEC_INLINE float sum_lanes(int64_t n, F f) {
  Vec acc = splat(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc += f(i, kLanes);
  if (i < n) acc += f(i, n - i);
  return hsum(acc);
}

// v in its first k lanes, `fill` in the others.
VOLTA_VEC_INLINE Vec keep_first(Vec v, int64_t k, float fill) {
  const IVec lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return lane < static_cast<int32_t>(k) ? v : splat(fill);
}

// Loads 16 lanes at p, or the first m with `fill` elsewhere.
VOLTA_VEC_INLINE Vec load_n(const float* p, int64_t m, float fill) { return m == kLanes ? load(p) : load_part(p, m, fill); }
VOLTA_VEC_INLINE void store_n(float* p, Vec v, int64_t m) {
  if (m == kLanes) store(p, v);
  else store_part(p, v, m);
}

}  // namespace volta::cpu::vec
