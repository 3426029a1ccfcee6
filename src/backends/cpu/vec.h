// 16-lane float vectors for the CPU backend's vector kernels (*_vec.cpp only, which include it
// after their other headers: those files are compiled once per ISA level, see vec_kernels.h and
// vec_target.h, with -O3 and FMA contraction).
//
// A Vec is one zmm register with AVX-512, two ymm with AVX2 and four xmm on baseline x86-64.
// With AVX2 it is spelled as two 8-lane halves (Pair below): GCC 12 lowers the comparisons,
// selects and shuffles of a 64-byte vector type to scalar code where the CPU has no 64-byte
// registers, which held a GELU or softmax row there to a sixth of its speed. Lanes are
// independent and every operation is the same IEEE operation per lane in either spelling, so the
// AVX-512 and AVX2 builds give the same bits; horizontal sums use one fixed tree, so a
// reduction's bits depend only on the data and its length, never on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/vec_target.h"  // after the library headers: they stay baseline code

// Every helper is forced inline so it is compiled for the ISA of the kernel that calls it.
#define VOLTA_VEC_INLINE inline __attribute__((always_inline))
// The same for a lambda that takes or returns a Vec ([&](...) VOLTA_VEC_LAMBDA {...}): the
// sanitizer builds' inliner left such lambdas out of line otherwise.
#define VOLTA_VEC_LAMBDA __attribute__((always_inline))

// From the build's level, not __AVX2__: g++ reads the whole file before it applies a target
// pragma, so the pragma defines no ISA macros. The ASan build keeps the 64-byte spelling
// (VOLTA_VEC_NO_PAIRS): its stack instrumentation keeps the pairs' temporaries in memory, which
// changes which products are fused (its results differed in last bits from every other build;
// with the 64-byte type they are the Release bits, checked kernel by kernel).
#if VOLTA_VEC_LEVEL == 3 && !defined(VOLTA_VEC_NO_PAIRS)
#define VOLTA_VEC_PAIRS 1
#else
#define VOLTA_VEC_PAIRS 0
#endif

namespace volta::cpu::VOLTA_VEC_NS::vec {

constexpr int64_t kLanes = 16;
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec4 __attribute__((vector_size(16)));
typedef float Vec2 __attribute__((vector_size(8)));

#if VOLTA_VEC_PAIRS
// 16 lanes as two GCC vectors of 8 (lanes 0-7, 8-15), with the operators of a GCC vector. One
// difference: GCC may evaluate an operator's right operand first, and in a sum of two products
// the product computed first is the one fused into an FMA (-ffp-contract=fast). Such sums name
// their first product (`const Vec p = a * b; p + c * d`), so both spellings fuse the same one.
template <typename H>
struct Pair {
  H h[2];
  VOLTA_VEC_INLINE auto operator[](int64_t i) const { return h[i >> 3][i & 7]; }
};
typedef int32_t IVec8 __attribute__((vector_size(32)));
using Vec = Pair<Vec8>;
using IVec = Pair<IVec8>;
template <typename S>
constexpr bool kScalar = std::is_arithmetic_v<S>;
#define VOLTA_PAIR_BINARY(op)                                                                       \
  template <typename H>                                                                             \
  VOLTA_VEC_INLINE auto operator op(Pair<H> a, Pair<H> b) {                                         \
    return Pair<decltype(a.h[0] op b.h[0])>{{a.h[0] op b.h[0], a.h[1] op b.h[1]}};                  \
  }                                                                                                 \
  template <typename H, typename S, std::enable_if_t<kScalar<S>, int> = 0>                          \
  VOLTA_VEC_INLINE auto operator op(Pair<H> a, S s) {                                               \
    return Pair<decltype(a.h[0] op s)>{{a.h[0] op s, a.h[1] op s}};                                 \
  }                                                                                                 \
  template <typename H, typename S, std::enable_if_t<kScalar<S>, int> = 0>                          \
  VOLTA_VEC_INLINE auto operator op(S s, Pair<H> a) {                                               \
    return Pair<decltype(s op a.h[0])>{{s op a.h[0], s op a.h[1]}};                                 \
  }
VOLTA_PAIR_BINARY(+)
VOLTA_PAIR_BINARY(-)
VOLTA_PAIR_BINARY(*)
VOLTA_PAIR_BINARY(/)
VOLTA_PAIR_BINARY(&)
VOLTA_PAIR_BINARY(|)
VOLTA_PAIR_BINARY(^)
VOLTA_PAIR_BINARY(<<)
VOLTA_PAIR_BINARY(>>)
VOLTA_PAIR_BINARY(<)
VOLTA_PAIR_BINARY(>)
VOLTA_PAIR_BINARY(<=)
VOLTA_PAIR_BINARY(>=)
VOLTA_PAIR_BINARY(==)
VOLTA_PAIR_BINARY(!=)
#undef VOLTA_PAIR_BINARY
#define VOLTA_PAIR_ASSIGN(op)                                      \
  template <typename H, typename T>                                \
  VOLTA_VEC_INLINE Pair<H>& operator op##=(Pair<H>& a, T b) {      \
    return a = a op b;                                             \
  }
VOLTA_PAIR_ASSIGN(+)
VOLTA_PAIR_ASSIGN(-)
VOLTA_PAIR_ASSIGN(*)
VOLTA_PAIR_ASSIGN(/)
#undef VOLTA_PAIR_ASSIGN
template <typename H>
VOLTA_VEC_INLINE Pair<H> operator-(Pair<H> a) {
  return {{-a.h[0], -a.h[1]}};
}
template <typename H>
VOLTA_VEC_INLINE Pair<H> operator~(Pair<H> a) {
  return {{~a.h[0], ~a.h[1]}};
}

VOLTA_VEC_INLINE Vec splat(float v) { return {{Vec8{} + v, Vec8{} + v}}; }
// m ? a : b lane by lane (m: a comparison's result, -1 for true).
VOLTA_VEC_INLINE Vec select(IVec m, Vec a, Vec b) { return {{m.h[0] ? a.h[0] : b.h[0], m.h[1] ? a.h[1] : b.h[1]}}; }
VOLTA_VEC_INLINE IVec to_int(Vec v) {  // truncating
  return {{__builtin_convertvector(v.h[0], IVec8), __builtin_convertvector(v.h[1], IVec8)}};
}
VOLTA_VEC_INLINE Vec to_float(IVec v) { return {{__builtin_convertvector(v.h[0], Vec8), __builtin_convertvector(v.h[1], Vec8)}}; }
VOLTA_VEC_INLINE Vec8 low_half(Vec v) { return v.h[0]; }
VOLTA_VEC_INLINE Vec8 high_half(Vec v) { return v.h[1]; }
VOLTA_VEC_INLINE IVec lane_index() { return {{IVec8{0, 1, 2, 3, 4, 5, 6, 7}, IVec8{8, 9, 10, 11, 12, 13, 14, 15}}}; }
#else
typedef float Vec __attribute__((vector_size(64)));
typedef int32_t IVec __attribute__((vector_size(64)));
VOLTA_VEC_INLINE Vec splat(float v) { return Vec{} + v; }
VOLTA_VEC_INLINE Vec select(IVec m, Vec a, Vec b) { return m ? a : b; }
VOLTA_VEC_INLINE IVec to_int(Vec v) { return __builtin_convertvector(v, IVec); }
VOLTA_VEC_INLINE Vec to_float(IVec v) { return __builtin_convertvector(v, Vec); }
VOLTA_VEC_INLINE Vec8 low_half(Vec v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
VOLTA_VEC_INLINE Vec8 high_half(Vec v) { return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15); }
VOLTA_VEC_INLINE IVec lane_index() { return IVec{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; }
#endif
static_assert(sizeof(Vec) == 64 && sizeof(IVec) == 64);

#if VOLTA_VEC_PAIRS
// Half by half: copied whole, the struct goes through memory in 16-byte pieces, and reading a
// half back stalls on store forwarding.
VOLTA_VEC_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v.h[0], p, sizeof v.h[0]);  // unaligned loads
  std::memcpy(&v.h[1], p + 8, sizeof v.h[1]);
  return v;
}
VOLTA_VEC_INLINE void store(float* p, Vec v) {
  std::memcpy(p, &v.h[0], sizeof v.h[0]);
  std::memcpy(p + 8, &v.h[1], sizeof v.h[1]);
}
// The same bits as the other type.
VOLTA_VEC_INLINE Vec as_float(IVec i) { return {{reinterpret_cast<Vec8>(i.h[0]), reinterpret_cast<Vec8>(i.h[1])}}; }
VOLTA_VEC_INLINE IVec as_int(Vec v) { return {{reinterpret_cast<IVec8>(v.h[0]), reinterpret_cast<IVec8>(v.h[1])}}; }
#else
VOLTA_VEC_INLINE Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}
VOLTA_VEC_INLINE void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
VOLTA_VEC_INLINE Vec as_float(IVec i) { return reinterpret_cast<Vec>(i); }
VOLTA_VEC_INLINE IVec as_int(Vec v) { return reinterpret_cast<IVec>(v); }
#endif

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

VOLTA_VEC_INLINE Vec vmax(Vec a, Vec b) { return select(a > b, a, b); }

// Fixed pairwise trees over the 16 lanes: lane i meets lane i + 8, then i + 4, i + 2, i + 1.
// Written with half-width shuffles rather than through memory: a row kernel's scalar reads of a
// vector it had just stored stalled on store forwarding.
VOLTA_VEC_INLINE float hsum(Vec v) {
  const Vec8 a = low_half(v) + high_half(v);
  const Vec4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
  const Vec2 c = __builtin_shufflevector(b, b, 0, 1) + __builtin_shufflevector(b, b, 2, 3);
  return c[0] + c[1];
}
VOLTA_VEC_INLINE float hmax(Vec v) {
  auto pick = [](auto x, auto y) { return x > y ? x : y; };  // lane-wise, as the scalar l[i] > l[i + w] ? l[i] : l[i + w]
  const Vec8 a = pick(low_half(v), high_half(v));
  const Vec4 b = pick(__builtin_shufflevector(a, a, 0, 1, 2, 3), __builtin_shufflevector(a, a, 4, 5, 6, 7));
  const Vec2 c = pick(__builtin_shufflevector(b, b, 0, 1), __builtin_shufflevector(b, b, 2, 3));
  return c[0] > c[1] ? c[0] : c[1];
}

// exp(x) for x <= 0 (or nan): every caller's argument is one (GELU's and erf's -x^2, the
// sigmoid's -|x|, softmax's score - max), so there is no test for overflow (it was two of the
// twenty-odd operations and decided nothing). x = n ln2 + r with n = round(x / ln2),
// |r| <= ln2/2, exp(r) by a degree-7 Taylor polynomial (relative error < 2e-7). Below -87 the
// result is 0 (so exp(-inf) is exactly 0, as masked attention scores need).
VOLTA_VEC_INLINE Vec vexp(Vec x) {
  const auto underflow = x < splat(-87.0f);
  x = select(underflow, splat(-87.0f), x);
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
  const Vec scale = as_float((to_int(n) + 127) << 23);
  return select(underflow, splat(0.0f), p * scale);
}

// erf(x) by Abramowitz & Stegun 7.1.26: 1 - t (a1 + t (a2 + ...)) exp(-x^2), t = 1 / (1 + p x),
// absolute error < 1.5e-7.
// erf_given(x, e) takes e = exp(-x^2) from the caller (GELU's gradient needs it too).
VOLTA_VEC_INLINE Vec verf_given(Vec x, Vec e) {
  const Vec sign = select(x < splat(0.0f), splat(-1.0f), splat(1.0f));
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
// sum_rows: the same for R rows at once, out[r] the sum of f(r, i, lanes), the rows' chains
// interleaved (each the one its row alone would take): short rows, whose chains each wait on
// the last step, then keep the core busy.
template <int R, typename F>
VOLTA_VEC_INLINE void sum_rows(int64_t n, F f, float* out) {
  Vec acc[R];
  for (int r = 0; r < R; ++r) acc[r] = splat(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int r = 0; r < R; ++r) acc[r] += f(r, i, kLanes);
  if (i < n)
    for (int r = 0; r < R; ++r) acc[r] += f(r, i, n - i);
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}
template <typename F>
VOLTA_VEC_INLINE float sum_lanes(int64_t n, F f) {
  float s;
  sum_rows<1>(n, [&](int, int64_t i, int64_t k) VOLTA_VEC_LAMBDA { return f(i, k); }, &s);
  return s;
}

// v in its first k lanes, `fill` in the others (v itself for k >= 16).
VOLTA_VEC_INLINE Vec keep_first(Vec v, int64_t k, float fill) {
  return k >= kLanes ? v : select(lane_index() < static_cast<int32_t>(k), v, splat(fill));
}

// Loads 16 lanes at p, or the first m with `fill` elsewhere.
VOLTA_VEC_INLINE Vec load_n(const float* p, int64_t m, float fill) { return m == kLanes ? load(p) : load_part(p, m, fill); }
VOLTA_VEC_INLINE void store_n(float* p, Vec v, int64_t m) {
  if (m == kLanes) store(p, v);
  else store_part(p, v, m);
}

}  // namespace volta::cpu::VOLTA_VEC_NS::vec
