// Reference indexing and layout kernels. They move bytes, so they serve every dtype by
// copying dtype_size(dtype) bytes per element.
#include <algorithm>
#include <cstring>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

size_t elem_size(const TensorRef& t) { return dtype_size(t.type.dtype); }

// Python slice bound: negative counts from the end, then clamped to [0, dim].
int64_t clamp_bound(int64_t v, int64_t dim) {
  if (v < 0) v += dim;
  return std::clamp<int64_t>(v, 0, dim);
}

}  // namespace

Status Embedding(const KernelArgs& a) {
  const TensorRef& table = a.in[0];
  const TensorRef& ids = a.in[1];
  if (table.shape().size() != 2 || !is_integer(ids.type.dtype)) {
    return internal_error(op_prefix(a.node) + "expects table [V, D] and integer ids " + ir::node_ref(a.node));
  }
  const int64_t V = table.shape()[0];
  const size_t row_bytes = static_cast<size_t>(table.shape()[1]) * elem_size(table);
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = read_index(ids, i);
    if (id < 0 || id >= V) {
      return invalid_argument(op_prefix(a.node) + "id " + std::to_string(id) + " at flat position " +
                              std::to_string(i) + " is outside [0, " + std::to_string(V) + ") " +
                              ir::node_ref(a.node));
    }
    if (row_bytes) std::memcpy(a.out.data + static_cast<size_t>(i) * row_bytes, table.data + static_cast<size_t>(id) * row_bytes,
                                row_bytes);
  }
  return Status::ok();
}

Status Reshape(const KernelArgs& a) {
  const size_t bytes = std::min(a.out.type.bytes(), a.in[0].type.bytes());  // equal when the rule held
  if (bytes) std::memcpy(a.out.data, a.in[0].data, bytes);
  return Status::ok();
}

Status Transpose(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, a.node.attrs.get_ints("perm"));
  const Shape& in_shape = a.in[0].shape();
  const Shape& out_shape = a.out.shape();
  if (perm.size() != in_shape.size() || out_shape.size() != in_shape.size()) {
    return internal_error(op_prefix(a.node) + "perm does not match the input rank " + ir::node_ref(a.node));
  }
  const Strides in_st = contiguous_strides(in_shape);
  Strides src(perm.size());  // output dim i walks input dim perm[i]
  for (size_t i = 0; i < perm.size(); ++i) {
    VOLTA_ASSIGN_OR_RETURN(const size_t p, normalize_axis(a.node, perm[i], in_shape.size()));
    src[i] = in_st[p];
  }
  const size_t es = elem_size(a.out);
  const std::byte* x = a.in[0].data;
  std::byte* out = a.out.data;
  for_each_index(out_shape, std::array<Strides, 1>{src}, [&](int64_t n, const std::array<int64_t, 1>& off) {
    std::memcpy(out + static_cast<size_t>(n) * es, x + static_cast<size_t>(off[0]) * es, es);
  });
  return Status::ok();
}

Status Slice(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t axis_attr, a.node.attrs.get_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(const int64_t start_attr, a.node.attrs.get_int("start", 0));
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, s.size()));
  const int64_t dim = s[axis];
  const int64_t start = clamp_bound(start_attr, dim);
  // The output's extent is the rule's [start, end) length; trusting it keeps copies in bounds.
  const int64_t len = std::min(a.out.shape()[axis], dim - start);
  const int64_t outer = dims_product(s, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(dims_product(s, axis + 1, s.size())) * elem_size(a.out);
  const size_t chunk = static_cast<size_t>(len) * inner_bytes;
  if (chunk == 0) return Status::ok();
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(a.out.data + static_cast<size_t>(o) * chunk,
                a.in[0].data + (static_cast<size_t>(o * dim + start)) * inner_bytes, chunk);
  }
  return Status::ok();
}

Status Concat(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t axis_attr, a.node.attrs.get_int("axis", 0));
  const Shape& os = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, os.size()));
  const int64_t outer = dims_product(os, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(dims_product(os, axis + 1, os.size())) * elem_size(a.out);
  std::byte* out = a.out.data;
  for (int64_t o = 0; o < outer; ++o) {
    for (const TensorRef& x : a.in) {
      const size_t chunk = static_cast<size_t>(x.shape()[axis]) * inner_bytes;
      if (chunk) std::memcpy(out, x.data + static_cast<size_t>(o) * chunk, chunk);
      out += chunk;
    }
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
