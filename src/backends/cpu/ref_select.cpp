// Reference selection kernels: where (three-way broadcast select), equal, causal_mask, trilu.
#include <cstring>
#include <limits>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

bool truthy(const TensorRef& t, int64_t i) {
  switch (t.type.dtype) {
    case DType::f32: return t.as<const float>()[i] != 0.0f;  // NaN counts as true
    case DType::i32: return t.as<const int32_t>()[i] != 0;
    case DType::i64: return t.as<const int64_t>()[i] != 0;
    case DType::f64: return t.as<const double>()[i] != 0.0;
    case DType::bf16: case DType::f16: return (t.as<const uint16_t>()[i] & 0x7fffu) != 0;  // not +-0
  }
  return false;
}

}  // namespace

Status Where(const KernelArgs& a) {
  const Shape& os = a.out.shape();
  const std::array<Strides, 3> st = {broadcast_strides(a.in[0].shape(), os), broadcast_strides(a.in[1].shape(), os),
                                     broadcast_strides(a.in[2].shape(), os)};
  const size_t es = dtype_size(a.out.type.dtype);
  const TensorRef& cond = a.in[0];
  const std::byte* x = a.in[1].data;
  const std::byte* y = a.in[2].data;
  std::byte* out = a.out.data;
  for_each_index(os, st, [&](int64_t n, const std::array<int64_t, 3>& off) {
    const std::byte* src = truthy(cond, off[0]) ? x + static_cast<size_t>(off[1]) * es : y + static_cast<size_t>(off[2]) * es;
    std::memcpy(out + static_cast<size_t>(n) * es, src, es);
  });
  return Status::ok();
}

Status CausalMask(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CausalMask>(a.node));
  const int64_t offset = at->offset;
  const double fill = at->value;
  const Shape& s = a.in[0].shape();
  if (s.size() < 2) return internal_error(op_prefix(a.node) + "input must have rank >= 2 " + ir::node_ref(a.node));
  const int64_t R = s[s.size() - 2];
  const int64_t C = s[s.size() - 1];
  const int64_t mats = dims_product(s, 0, s.size() - 2);
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  const auto masked = static_cast<float>(fill);
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < R; ++i) {
      for (int64_t j = 0; j < C; ++j) {
        const int64_t k = (m * R + i) * C + j;
        out[k] = j > i + offset ? masked : x[k];
      }
    }
  }
  return Status::ok();
}

Status Equal(const KernelArgs& a) {
  const Shape& os = a.out.shape();
  const std::array<Strides, 2> st = {broadcast_strides(a.in[0].shape(), os), broadcast_strides(a.in[1].shape(), os)};
  const TensorRef& x = a.in[0];
  const TensorRef& y = a.in[1];
  float* out = out_f32(a);
  for_each_index(os, st, [&](int64_t n, const std::array<int64_t, 2>& off) {
    bool eq = false;
    switch (x.type.dtype) {
      case DType::f32: eq = x.as<const float>()[off[0]] == y.as<const float>()[off[1]]; break;
      case DType::i32: eq = x.as<const int32_t>()[off[0]] == y.as<const int32_t>()[off[1]]; break;
      case DType::i64: eq = x.as<const int64_t>()[off[0]] == y.as<const int64_t>()[off[1]]; break;
      case DType::f64: eq = x.as<const double>()[off[0]] == y.as<const double>()[off[1]]; break;
      case DType::bf16: case DType::f16: break;  // weights only: verification refuses them here
    }
    out[n] = eq ? 1.0f : 0.0f;
  });
  return Status::ok();
}

// Keeps x[..., i, j] where j - i >= k (upper) or j - i <= k (lower); zeros elsewhere. Any dtype.
Status Trilu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Trilu>(a.node));
  const int64_t upper = at->upper, k = at->k;
  const Shape& s = a.out.shape();
  if (s.size() < 2) return internal_error(op_prefix(a.node) + "input must have rank >= 2 " + ir::node_ref(a.node));
  const int64_t R = s[s.size() - 2], C = s[s.size() - 1];
  const int64_t mats = dims_product(s, 0, s.size() - 2);
  const size_t es = dtype_size(a.out.type.dtype);
  std::memset(a.out.data, 0, a.out.type.bytes());
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        const size_t off = static_cast<size_t>((m * R + i) * C + j) * es;
        if (keep) std::memcpy(a.out.data + off, a.in[0].data + off, es);
      }
  return Status::ok();
}

}  // namespace volta::cpu::ref
