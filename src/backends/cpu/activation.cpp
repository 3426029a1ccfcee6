// The CPU backend's activations and their gradients: gelu (erf form on 16-lane vectors, tanh
// form scalar), swiglu and the fused backward kernels of gelu, silu and swiglu, in fixed chunks.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "backends/cpu/vec.h"
#include "backends/cpu/vec_math.h"

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

// sigmoid(v) = su * sc, with exp(v) taken as (exp(v) 2^64) 2^-64 where it would underflow: the
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
  Vec es = vexp(a);
  bool any_tail = false;
  for (int64_t i = 0; i < kLanes; ++i) any_tail |= tail[i] != 0;
  if (any_tail) es = tail ? math::exp_shifted(a, tail & 64) : es;  // a true comparison is -1
  return {(v < zero ? es : one) / (one + es * sc), v < zero ? sc : one};
}
// silu'(v) = s (1 + v (1 - s)), as its unscaled part (times the parts' sc).
VOLTA_VEC_INLINE Vec silu_d(Vec v, SigmoidParts p) { return p.su * (splat(1.0f) + v * (splat(1.0f) - p.su * p.sc)); }

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
void silu_grad_elems(const float* x, const float* dy, float* out, int64_t n) {
  int64_t i = 0;
  auto one = [](Vec v, Vec d) VOLTA_VEC_LAMBDA {
    const SigmoidParts p = sigmoid_parts(v);
    return silu_d(v, p) * d * p.sc;
  };
  for (; i + kLanes <= n; i += kLanes) store(out + i, one(load(x + i), load(dy + i)));
  if (i < n) store_part(out + i, one(load_part(x + i, n - i, 0.0f), load_part(dy + i, n - i, 0.0f)), n - i);
}

constexpr float kSqrt2OverPi = 0.7978845608f;

Status gelu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Gelu>(a.node));
  const bool tanh_form = at->approximate == "tanh";
  const float* x = a.in[0].as<const float>();
  float* y = a.out.as<float>();
  if (!tanh_form) {
    chunks(a.out.numel(), [&](int64_t b, int64_t e) { gelu_erf(x + b, y + b, e - b); });
    return Status::ok();
  }
  chunks(a.out.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = x[i];
      y[i] = tanh_form ? 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)))
                       : 0.5f * v * (1.0f + std::erf(v * static_cast<float>(std::numbers::sqrt2 / 2)));
    }
  });
  return Status::ok();
}

Status gelu_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GeluGrad>(a.node));
  const bool tanh_form = at->approximate == "tanh";
  const float* x = a.in[0].as<const float>();
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  if (!tanh_form) {
    chunks(a.out.numel(), [&](int64_t b, int64_t e) { gelu_erf_grad(x + b, dy + b, out + b, e - b); });
    return Status::ok();
  }
  const auto inv_sqrt_2pi = static_cast<float>(1.0 / std::sqrt(2.0 * std::numbers::pi));
  chunks(a.out.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = x[i];
      float d;
      if (tanh_form) {
        const float t = std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v));
        d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * v * v);
      } else {
        d = 0.5f * (1.0f + std::erf(v * static_cast<float>(std::numbers::sqrt2 / 2))) + v * inv_sqrt_2pi * std::exp(-0.5f * v * v);
      }
      out[i] = d * dy[i];
    }
  });
  return Status::ok();
}

// swiglu (or its gradient, `grad`) on rows of 2F, in tasks of whole rows.
Status swiglu(const KernelArgs& a, bool grad) {
  const Shape& x = a.in[0].shape();
  const int64_t F = x.empty() ? 0 : x.back() / 2, rows = F == 0 ? 0 : a.in[0].numel() / (2 * F);
  const float* in = a.in[0].as<const float>();
  const float* dy = grad ? a.in[1].as<const float>() : nullptr;
  float* out = a.out.as<float>();
  const int64_t per = std::max<int64_t>(1, kTaskElements / std::max<int64_t>(1, 2 * F));
  parallel_for((rows + per - 1) / per, [&](int64_t t) {
    const int64_t r0 = t * per, r1 = std::min(rows, r0 + per);
    swiglu_rows(in + r0 * 2 * F, dy ? dy + r0 * F : nullptr, out + r0 * (grad ? 2 * F : F), r1 - r0, F);
  });
  return Status::ok();
}

Status swiglu(const KernelArgs& a) { return swiglu(a, false); }
Status swiglu_grad(const KernelArgs& a) { return swiglu(a, true); }

Status silu_grad(const KernelArgs& a) {
  const float *x = a.in[0].as<const float>(), *dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  chunks(a.out.numel(), [&](int64_t b, int64_t e) { silu_grad_elems(x + b, dy + b, out + b, e - b); });
  return Status::ok();
}

}  // namespace volta::cpu
