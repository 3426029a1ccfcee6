// Reference indexing and layout kernels, with the backward ones autograd writes (broadcast, pad,
// embedding_grad, gather_grad). Most move bytes, so they serve every dtype by copying
// dtype_size(dtype) bytes per element.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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

Status check_ids(const KernelArgs& a, const TensorRef& ids, int64_t rows) {
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t id = read_index(ids, p);
    if (id < 0 || id >= rows)
      return invalid_argument(op_prefix(a.node) + "id " + std::to_string(id) + " at flat position " + std::to_string(p) +
                              " is outside [0, " + std::to_string(rows) + ") " + ir::node_ref(a.node));
  }
  return Status::ok();
}

Status Embedding(const KernelArgs& a) {
  const TensorRef& table = a.in[0];
  const TensorRef& ids = a.in[1];
  if (table.shape().size() != 2 || !is_integer(ids.type.dtype)) {
    return internal_error(op_prefix(a.node) + "expects table [V, D] and integer ids " + ir::node_ref(a.node));
  }
  VOLTA_RETURN_IF_ERROR(check_ids(a, ids, table.shape()[0]));
  const size_t row_bytes = static_cast<size_t>(table.shape()[1]) * elem_size(table);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (row_bytes)
      std::memcpy(a.out.data + static_cast<size_t>(i) * row_bytes,
                  table.data + static_cast<size_t>(read_index(ids, i)) * row_bytes, row_bytes);
  }
  return Status::ok();
}

Status Reshape(const KernelArgs& a) {
  const size_t bytes = std::min(a.out.type.bytes(), a.in[0].type.bytes());  // equal when the rule held
  if (bytes) std::memcpy(a.out.data, a.in[0].data, bytes);
  return Status::ok();
}

Status Transpose(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Transpose>(a.node));
  const std::vector<int64_t>& perm = at->perm;
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
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Slice>(a.node));
  const int64_t axis_attr = at->axis, start_attr = at->start;
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
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Concat>(a.node));
  const int64_t axis_attr = at->axis;
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

namespace {

double read_as_double(const TensorRef& t, int64_t i) {
  switch (t.type.dtype) {
    case DType::f32: return t.as<const float>()[i];
    case DType::i32: return t.as<const int32_t>()[i];
    case DType::i64: return static_cast<double>(t.as<const int64_t>()[i]);
    case DType::f64: return t.as<const double>()[i];
    case DType::bf16: return bf16_to_f32(t.as<const uint16_t>()[i]);
    case DType::f16: return f16_to_f32(t.as<const uint16_t>()[i]);
  }
  return 0.0;
}

// Float to integer: truncation toward zero, saturating at the type's range; nan becomes 0
// (C++ leaves those cases undefined).
template <typename I>
I saturate(double v) {
  if (std::isnan(v)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (v <= lo) return std::numeric_limits<I>::min();
  if (v >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

}  // namespace

Status Cast(const KernelArgs& a) {
  const TensorRef& x = a.in[0];
  const int64_t n = a.out.numel();
  const DType from = x.type.dtype, to = a.out.type.dtype;
  for (int64_t i = 0; i < n; ++i) {
    if (from == DType::i64 && to == DType::i64) {
      a.out.as<int64_t>()[i] = x.as<const int64_t>()[i];
    } else if (from == DType::i64 && to == DType::i32) {  // wraps like numpy's astype
      a.out.as<int32_t>()[i] = static_cast<int32_t>(static_cast<uint32_t>(x.as<const int64_t>()[i]));
    } else {
      const double v = read_as_double(x, i);
      switch (to) {
        case DType::f32: a.out.as<float>()[i] = static_cast<float>(v); break;
        case DType::i32: a.out.as<int32_t>()[i] = saturate<int32_t>(v); break;
        case DType::i64: a.out.as<int64_t>()[i] = saturate<int64_t>(v); break;
        case DType::f64: a.out.as<double>()[i] = v; break;
        case DType::bf16: a.out.as<uint16_t>()[i] = f32_to_bf16(static_cast<float>(v)); break;
        case DType::f16: a.out.as<uint16_t>()[i] = f32_to_f16(static_cast<float>(v)); break;
      }
    }
  }
  return Status::ok();
}

// out[outer, i..., inner] = x[outer, indices[i...], inner]; negative indices count from the end.
Status Gather(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Gather>(a.node));
  const int64_t axis_attr = at->axis;
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, s.size()));
  const TensorRef& idx = a.in[1];
  const int64_t dim = s[axis];
  const int64_t outer = dims_product(s, 0, axis);
  const size_t row = static_cast<size_t>(dims_product(s, axis + 1, s.size())) * elem_size(a.out);
  const int64_t n = idx.numel();
  std::byte* out = a.out.data;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = read_index(idx, i);
      if (id < -dim || id >= dim) {
        return invalid_argument(op_prefix(a.node) + "index " + std::to_string(id) + " at flat position " +
                                std::to_string(i) + " is outside [-" + std::to_string(dim) + ", " + std::to_string(dim) +
                                ") " + ir::node_ref(a.node));
      }
      if (id < 0) id += dim;
      if (row) std::memcpy(out, a.in[0].data + static_cast<size_t>(o * dim + id) * row, row);
      out += row;
    }
  }
  return Status::ok();
}

// dx of gather: dy rows added into the rows the indices name, in index order, in double.
Status GatherGrad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GatherGrad>(a.node));
  const int64_t axis_attr = at->axis;
  const Shape& s = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, s.size()));
  const TensorRef& idx = a.in[0];
  const float* dy = a.in[1].as<const float>();
  const int64_t dim = s[axis];
  const int64_t outer = dims_product(s, 0, axis);
  const int64_t inner = dims_product(s, axis + 1, s.size());
  const int64_t n = idx.numel();
  std::vector<double> acc(static_cast<size_t>(count(s)), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = read_index(idx, i);
      if (id < -dim || id >= dim) {
        return invalid_argument(op_prefix(a.node) + "index " + std::to_string(id) + " is outside [-" +
                                std::to_string(dim) + ", " + std::to_string(dim) + ") " + ir::node_ref(a.node));
      }
      if (id < 0) id += dim;
      const float* src = dy + (o * n + i) * inner;
      double* dst = acc.data() + (o * dim + id) * inner;
      for (int64_t k = 0; k < inner; ++k) dst[k] += src[k];
    }
  }
  float* out = a.out.as<float>();
  for (size_t k = 0; k < acc.size(); ++k) out[k] = static_cast<float>(acc[k]);
  return Status::ok();
}


// cache_write: rows [..., T, D] into cache [..., S, D] at rows position.., in place (the cache is
// the model's state, ir::writes_input); the value is the cache, copied out only when the output
// is a buffer of its own (a kernel test's).
// transposed: the cache is [..., D, S] and row t is written as column position + t.
Status CacheWrite(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto attrs, ir::typed_attrs<ir::Op::CacheWrite>(a.node));
  const bool transposed = attrs->transposed != 0;
  const Shape& c = a.in[0].shape();
  const size_t r = c.size();
  const int64_t S = c[transposed ? r - 1 : r - 2], D = c[transposed ? r - 2 : r - 1], T = a.in[1].shape()[r - 2];
  VOLTA_ASSIGN_OR_RETURN(const int64_t position, position_input(a, 2, S - T));
  const size_t es = dtype_size(a.in[0].type.dtype), row = static_cast<size_t>(D) * es;
  const int64_t outer = dims_product(c, 0, r - 2);
  std::byte* cache = a.in[0].data;
  const std::byte* rows = a.in[1].data;
  // Element by element as a word of the dtype's size (a call to memcpy each took a prompt's
  // write longer than its layer).
  const auto columns = [&]<typename W>(W) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t d = 0; d < D; ++d)  // each cache row written left to right
        for (int64_t t = 0; t < T; ++t)
          std::memcpy(cache + static_cast<size_t>((o * D + d) * S + position + t) * sizeof(W),
                      rows + static_cast<size_t>((o * T + t) * D + d) * sizeof(W), sizeof(W));
  };
  if (!transposed)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(cache + static_cast<size_t>(o * S + position) * row, rows + static_cast<size_t>(o * T) * row,
                  static_cast<size_t>(T) * row);
  else if (es == 8) columns(uint64_t{});
  else if (es == 4) columns(uint32_t{});
  else if (es == 2) columns(uint16_t{});
  else columns(uint8_t{});
  if (a.out.data != cache) std::memcpy(a.out.data, cache, static_cast<size_t>(outer * S) * row);
  return Status::ok();
}

Status Broadcast(const KernelArgs& a) {
  const Shape& os = a.out.shape();
  const std::array<Strides, 1> st = {broadcast_strides(a.in[0].shape(), os)};
  const size_t es = dtype_size(a.out.type.dtype);
  const std::byte* x = a.in[0].data;
  std::byte* out = a.out.data;
  for_each_index(os, st, [&](int64_t n, const std::array<int64_t, 1>& off) {
    std::memcpy(out + static_cast<size_t>(n) * es, x + static_cast<size_t>(off[0]) * es, es);
  });
  return Status::ok();
}

Status Pad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Pad>(a.node));
  const int64_t axis_attr = at->axis, before = at->before;
  const Shape& xs = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, axis_attr, xs.size()));
  // View both as [outer, axis, inner] blocks.
  const int64_t outer = dims_product(xs, 0, axis);
  const int64_t inner = dims_product(xs, axis + 1, xs.size());
  const int64_t in_len = xs[axis];
  const int64_t out_len = a.out.shape()[axis];
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  std::fill_n(out, a.out.numel(), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + (o * out_len + before) * inner, x + o * in_len * inner,
                static_cast<size_t>(in_len * inner) * sizeof(float));
  return Status::ok();
}

Status EmbeddingGrad(const KernelArgs& a) {
  const TensorRef& ids = a.in[0];
  const int64_t rows = a.out.shape()[0];
  const int64_t D = a.out.shape()[1];
  if (a.workspace.size() < static_cast<size_t>(rows * D) * sizeof(double))
    return internal_error(op_prefix(a.node) + "workspace too small " + ir::node_ref(a.node));
  VOLTA_RETURN_IF_ERROR(check_ids(a, ids, rows));
  // Sum in double, positions in index order, then round once: deterministic and accurate.
  auto* acc = reinterpret_cast<double*>(a.workspace.data());
  std::fill_n(acc, rows * D, 0.0);
  const float* dy = a.in[1].as<const float>();
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t id = read_index(ids, p);
    for (int64_t d = 0; d < D; ++d) acc[id * D + d] += dy[p * D + d];
  }
  float* out = out_f32(a);
  for (int64_t i = 0; i < rows * D; ++i) out[i] = static_cast<float>(acc[i]);
  return Status::ok();
}

}  // namespace volta::cpu::ref
