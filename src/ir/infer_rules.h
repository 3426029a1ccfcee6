// Shared by the shape/dtype rules of ops.cpp and of the op families kept in their own files
// (infer_matmul.cpp, infer_attention.cpp, infer_activation.cpp, infer_window.cpp,
// infer_index.cpp): error tagging and the checks every rule makes.
#pragma once

#include <cmath>
#include <span>
#include <string>

#include "volta/ir.h"

namespace volta::ir::rules {

inline Status fail(Op op, const std::string& msg) { return invalid_argument("[" + std::string(op_name(op)) + "] " + msg); }

inline Result<int64_t> normalize_axis(Op op, int64_t axis, size_t rank, const char* what = "axis") {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return fail(op, std::string(what) + " " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

inline Status require_f32(Op op, const TensorType& t, const char* which) {
  if (t.dtype != DType::f32)
    return fail(op, std::string(which) + " must be f32 but is " + t.to_string());
  return Status::ok();
}

inline Status require_int(Op op, const TensorType& t, const char* which) {
  if (!is_integer(t.dtype)) return fail(op, std::string(which) + " must be i32 or i64 but is " + t.to_string());
  return Status::ok();
}

// Attribute getters tag their own errors with the op.
template <typename T>
Result<T> tagged(Op op, Result<T> r) {
  if (!r.is_ok()) return fail(op, r.status().message());
  return r;
}

// The `scale` attribute (default 1): finite (a nan scale made every probability nan, exit 0).
inline Status finite_scale(Op op, const Attrs& attrs) {
  VOLTA_ASSIGN_OR_RETURN(const double scale, tagged(op, attrs.get_float("scale", 1.0)));
  if (!std::isfinite(scale)) return fail(op, "attribute 'scale' must be finite, got " + std::to_string(scale));
  return Status::ok();
}

// A causal offset (or a mask offset) far past any sequence length means "mask nothing" or "mask
// everything"; the bound keeps `row + offset` in the kernels far from overflow.
constexpr int64_t kMaxCausalOffset = int64_t{1} << 40;
inline Status check_offset(Op op, const Attrs& attrs, const char* key) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t v, tagged(op, attrs.get_int(key, 0)));
  if (v < -kMaxCausalOffset || v > kMaxCausalOffset)
    return fail(op, std::string("attribute '") + key + "' must be in [-2^40, 2^40], got " + std::to_string(v));
  return Status::ok();
}

// The matmul's rule (infer_matmul.cpp).
Result<TensorType> infer_matmul(std::span<const TensorType> in, const Attrs& attrs);

// The attention family's rules (infer_attention.cpp).
Result<TensorType> infer_attention(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_attention_grad(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_rope(std::span<const TensorType> in);
Result<TensorType> infer_cache_write(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_cache_attention(std::span<const TensorType> in, const Attrs& attrs);

// The gated MLP activations' rules (infer_activation.cpp).
Result<TensorType> infer_swiglu(Op op, std::span<const TensorType> in);

// The window family's rules: conv2d, the pools and their gradients (infer_window.cpp).
Result<TensorType> infer_conv2d(Op op, std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_pool(Op op, std::span<const TensorType> in, const Attrs& attrs);

// The index family's rules: comparisons, gathers, scatter, cumsum, top_k, arg_max (infer_index.cpp).
Result<TensorType> infer_compare(Op op, std::span<const TensorType> in);
Result<TensorType> infer_gather_elements(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_gather_nd(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_scatter_nd(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_cumsum(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_top_k(std::span<const TensorType> in, const Attrs& attrs);
Result<TensorType> infer_arg_max(std::span<const TensorType> in, const Attrs& attrs);

}  // namespace volta::ir::rules
