// The CPU backend's activations and their gradients: gelu (erf form on 16-lane vectors, tanh
// form scalar), swiglu and the fused backward kernels of gelu, silu and swiglu, in fixed chunks
// (the vector rows are in activation_vec.cpp).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

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

// gelu and gelu' of each element from one exp and erf, the two planes of the output.
Status gelu_and_grad(const KernelArgs& a) {
  const float* x = a.in[0].as<const float>();
  float* y = a.out.as<float>();
  const int64_t n = a.in[0].numel();
  chunks(n, [&](int64_t b, int64_t e) { gelu_erf_and_grad(x + b, y + b, y + n + b, e - b); });
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
