// Reference activation kernels and their gradients: gelu, leaky_relu, swiglu, and the fused
// backward kernels of relu, silu, gelu and swiglu. Each element is the double math of
// ir/scalar_math.h, rounded once to f32 as the unfused ops would store it.
#include <string>

#include "backends/cpu/ref_util.h"
#include "ir/scalar_math.h"

namespace volta::cpu::ref {

// Each pair rounded as the unfused silu and mul store it (ir::swiglu_value).
Status Swiglu(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const int64_t F = a.out.shape().empty() ? 1 : a.out.shape().back(), rows = F == 0 ? 0 : a.out.numel() / F;
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < F; ++j) out[r * F + j] = ir::swiglu_value(x[r * 2 * F + j], x[r * 2 * F + F + j]);
  return Status::ok();
}

Status Gelu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Gelu>(a.node));
  const std::string& mode = at->approximate;
  if (mode == "none") return map_unary(a, ir::gelu_erf);
  if (mode == "tanh") return map_unary(a, ir::gelu_tanh);
  return invalid_argument(op_prefix(a.node) + "attribute 'approximate' must be 'none' or 'tanh', got '" + mode +
                          "' " + ir::node_ref(a.node));
}

Status LeakyRelu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LeakyRelu>(a.node));
  const double alpha = at->alpha;
  return map_unary(a, [alpha](double x) { return x < 0 ? alpha * x : x; });
}

Status ReluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t i = 0; i < a.out.numel(); ++i) out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
  return Status::ok();
}

Status SiluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t i = 0; i < a.out.numel(); ++i) out[i] = static_cast<float>(ir::silu_derivative(x[i]) * dy[i]);
  return Status::ok();
}

// The unfused backward's roundings (ir::swiglu_grads).
Status SwigluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const int64_t F = a.in[1].shape().empty() ? 1 : a.in[1].shape().back(), rows = F == 0 ? 0 : a.in[1].numel() / F;
  const float *x = in_f32(a, 0), *dy = in_f32(a, 1);
  float* out = out_f32(a);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < F; ++j)
      ir::swiglu_grads(x[r * 2 * F + j], x[r * 2 * F + F + j], dy[r * F + j], out + r * 2 * F + j, out + r * 2 * F + F + j);
  return Status::ok();
}

// The two planes as gelu and gelu_grad(x, 1) store them.
Status GeluAndGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  const int64_t n = a.in[0].numel();
  for (int64_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(ir::gelu_erf(x[i]));
    out[n + i] = static_cast<float>(ir::gelu_erf_derivative(x[i]));
  }
  return Status::ok();
}

Status GeluGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GeluGrad>(a.node));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* out = out_f32(a);
  const bool tanh_form = at->approximate == "tanh";
  for (int64_t i = 0; i < a.out.numel(); ++i) {
    const double v = x[i];
    const double d = tanh_form ? ir::gelu_tanh_derivative(v) : ir::gelu_erf_derivative(v);
    out[i] = static_cast<float>(d * dy[i]);
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
