// GELU, its gradient and softmax's exponentials with a vectorised exp and erf (16 lanes at a
// time, no libm calls).
//   exp: x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-7 Taylor polynomial (rel. error < 2e-7)
//   erf: Abramowitz & Stegun 7.1.26, erf(x) = 1 - t (a1 + t (a2 + ...)) exp(-x^2),
//        t = 1 / (1 + p x), abs. error < 1.5e-7
// Built like matmul.cpp (ISA clones, -O3, FMA contraction), so every build computes the same
// bits on a given CPU; the tail of a tensor goes through the same 16-lane code.
#include <cmath>
#include <cstring>
#include <numbers>

#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VOLTA_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLTA_ISA_CLONES
#endif

namespace volta::cpu {

namespace {

typedef float Vec __attribute__((vector_size(64)));
typedef int32_t IVec __attribute__((vector_size(64)));
constexpr int64_t kLanes = 16;

inline Vec splat(float v) { return Vec{} + v; }

inline Vec vexp(Vec x) {
  // Below -87 the result would be subnormal: it is 0 (so exp(-inf) = 0 exactly, as masked
  // attention scores need). Above 88 it saturates at exp(88).
  const auto underflow = x < splat(-87.0f);
  x = underflow ? splat(-87.0f) : x;
  x = x > splat(88.0f) ? splat(88.0f) : x;
  // n = floor(x / ln2 + 0.5): truncate, then step down where truncation rounded up.
  const Vec t = x * splat(1.44269504f) + splat(0.5f);
  Vec n = __builtin_convertvector(__builtin_convertvector(t, IVec), Vec);
  n = n > t ? n - splat(1.0f) : n;
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

inline Vec verf(Vec x) {
  const Vec sign = x < splat(0.0f) ? splat(-1.0f) : splat(1.0f);
  const Vec ax = x * sign;
  const Vec t = splat(1.0f) / (splat(1.0f) + splat(0.3275911f) * ax);
  Vec poly = splat(1.061405429f);
  poly = poly * t + splat(-1.453152027f);
  poly = poly * t + splat(1.421413741f);
  poly = poly * t + splat(-0.284496736f);
  poly = poly * t + splat(0.254829592f);
  return sign * (splat(1.0f) - poly * t * vexp(-ax * ax));
}

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

VOLTA_ISA_CLONES
void gelu_block(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    float in[kLanes] = {}, out[kLanes];
    const int64_t m = std::min(kLanes, n - i);
    std::memcpy(in, x + i, static_cast<size_t>(m) * sizeof(float));
    Vec v;
    std::memcpy(&v, in, sizeof v);
    const Vec r = splat(0.5f) * v * (splat(1.0f) + verf(v * splat(kInvSqrt2)));
    std::memcpy(out, &r, sizeof r);
    std::memcpy(y + i, out, static_cast<size_t>(m) * sizeof(float));
  }
}

VOLTA_ISA_CLONES
void gelu_grad_block(const float* x, const float* dy, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    float in[kLanes] = {}, g[kLanes] = {}, res[kLanes];
    const int64_t m = std::min(kLanes, n - i);
    std::memcpy(in, x + i, static_cast<size_t>(m) * sizeof(float));
    std::memcpy(g, dy + i, static_cast<size_t>(m) * sizeof(float));
    Vec v, d;
    std::memcpy(&v, in, sizeof v);
    std::memcpy(&d, g, sizeof d);
    // d/dx x Phi(x) = Phi(x) + x phi(x)
    const Vec r = (splat(0.5f) * (splat(1.0f) + verf(v * splat(kInvSqrt2))) + v * splat(kInvSqrt2Pi) * vexp(splat(-0.5f) * v * v)) * d;
    std::memcpy(res, &r, sizeof r);
    std::memcpy(out + i, res, static_cast<size_t>(m) * sizeof(float));
  }
}

constexpr int64_t kChunk = 16384;  // elements per task; a multiple of the lane count

VOLTA_ISA_CLONES
void exp_shifted_block(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    float in[kLanes], out[kLanes];
    const int64_t m = std::min(kLanes, n - i);
    std::fill_n(in, kLanes, shift);
    std::memcpy(in, x + i, static_cast<size_t>(m) * sizeof(float));
    Vec v;
    std::memcpy(&v, in, sizeof v);
    const Vec r = vexp(v - splat(shift));
    std::memcpy(out, &r, sizeof r);
    std::memcpy(y + i, out, static_cast<size_t>(m) * sizeof(float));
  }
}

}  // namespace

void exp_shifted(const float* x, float shift, float* y, int64_t n) { exp_shifted_block(x, shift, y, n); }

// gelu with approximate="none"; other forms go to the caller's scalar path.
void gelu_erf(const float* x, float* y, int64_t n) {
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    const int64_t b = c * kChunk;
    gelu_block(x + b, y + b, std::min(kChunk, n - b));
  });
}

void gelu_erf_grad(const float* x, const float* dy, float* out, int64_t n) {
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    const int64_t b = c * kChunk;
    gelu_grad_block(x + b, dy + b, out + b, std::min(kChunk, n - b));
  });
}

}  // namespace volta::cpu
