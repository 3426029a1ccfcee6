// Host-side checks and index helpers of the CUDA backend's op methods (cuda_backend.cpp): error
// text that names the op and node, and the shape arithmetic the launchers take as numbers.
#pragma once

#include <span>
#include <string>

#include "backends/cuda/device.h"
#include "backends/cuda/kernels.h"
#include "volta/backend.h"
#include "volta/op_attrs.h"

namespace volta::cuda {

using ir::Op;

inline std::string prefix(const ir::Node& n) { return "[" + std::string(ir::op_name(n.op)) + "] "; }

inline Status launched(cudaError_t err, const ir::Node& n) {
  return check(err, prefix(n) + "kernel launch " + ir::node_ref(n));
}

inline Status require_f32(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
  bool ok = out.type.dtype == DType::f32;
  for (const TensorRef& t : in) ok = ok && t.type.dtype == DType::f32;
  if (!ok) return internal_error(prefix(n) + "CUDA kernel computes f32 only " + ir::node_ref(n));
  return Status::ok();
}

inline Status check_rank(const ir::Node& n, size_t rank) {
  if (rank > static_cast<size_t>(kMaxRank))
    return unimplemented(prefix(n) + "CUDA kernels take rank <= " + std::to_string(kMaxRank) + ", got rank " +
                         std::to_string(rank) + " " + ir::node_ref(n));
  return Status::ok();
}

// Element strides of `in` seen through numpy broadcasting to `out` (0 on broadcast dims).
inline void broadcast_strides(const Shape& in, const Shape& out, int64_t unit, int64_t* st) {
  const size_t lead = out.size() - in.size();
  int64_t acc = unit;
  for (size_t d = in.size(); d-- > 0;) {
    st[lead + d] = in[d] == 1 ? 0 : acc;
    acc *= in[d];
  }
  for (size_t d = 0; d < lead; ++d) st[d] = 0;
}

inline int64_t product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

inline Result<size_t> axis_of(const ir::Node& n, int64_t axis, size_t rank) {
  const int64_t a = axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
  if (a < 0 || a >= static_cast<int64_t>(rank))
    return internal_error(prefix(n) + "axis " + std::to_string(axis) + " out of range " + ir::node_ref(n));
  return static_cast<size_t>(a);
}

}  // namespace volta::cuda
