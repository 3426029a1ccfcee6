// Reference kernels of the index ops imported models compute masks and positions with: less,
// less_equal, gather_elements, gather_nd, scatter_nd, cumsum, top_k, arg_max. Any index outside
// its dim is an error naming the node, never an out-of-bounds access.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

// Element i of a numeric tensor as a double (exact for f32 and for integers below 2^53) and as
// an int64 (exact for integers): comparisons of i64 values use the latter.
double as_double(const TensorRef& t, int64_t i) {
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

// a < b (strict) or a <= b, nan false; i64 compared as integers.
bool compare(const TensorRef& x, int64_t i, const TensorRef& y, int64_t j, bool or_equal) {
  if (x.type.dtype == DType::i64) {
    const int64_t a = x.as<const int64_t>()[i], b = y.as<const int64_t>()[j];
    return or_equal ? a <= b : a < b;
  }
  const double a = as_double(x, i), b = as_double(y, j);
  return or_equal ? a <= b : a < b;
}

Status compare_kernel(const KernelArgs& a, bool or_equal) {
  const Shape& os = a.out.shape();
  const std::array<Strides, 2> st = {broadcast_strides(a.in[0].shape(), os), broadcast_strides(a.in[1].shape(), os)};
  float* out = out_f32(a);
  for_each_index(os, st, [&](int64_t n, const std::array<int64_t, 2>& off) {
    out[n] = compare(a.in[0], off[0], a.in[1], off[1], or_equal) ? 1.0f : 0.0f;
  });
  return Status::ok();
}

// Index `id` of a dim of size `dim`, negatives counting from the end; outside is an error.
Result<int64_t> checked_index(const KernelArgs& a, int64_t id, int64_t dim, int64_t at) {
  if (id < -dim || id >= dim)
    return invalid_argument(op_prefix(a.node) + "index " + std::to_string(id) + " at flat position " + std::to_string(at) +
                            " is outside [-" + std::to_string(dim) + ", " + std::to_string(dim) + ") " + ir::node_ref(a.node));
  return id < 0 ? id + dim : id;
}

// The flat element offset in x (shape s, from dim `first`) of the index tuple at row `r` of
// the [rows, m] index matrix, and the contiguous strides of s.
Result<int64_t> tuple_offset(const KernelArgs& a, const TensorRef& idx, int64_t r, int64_t m, const Shape& s, size_t first,
                             const Strides& st) {
  int64_t off = 0;
  for (int64_t k = 0; k < m; ++k) {
    const size_t d = first + static_cast<size_t>(k);
    VOLTA_ASSIGN_OR_RETURN(int64_t id, checked_index(a, read_index(idx, r * m + k), s[d], r * m + k));
    off += id * st[d];
  }
  return off;
}

// Is x[i] strictly better than x[j] for top_k / arg_max: larger (or smaller), nan above every
// number, two nans equal.
bool better(const TensorRef& x, int64_t i, int64_t j, bool largest) {
  if (x.type.dtype == DType::i64) {
    const int64_t a = x.as<const int64_t>()[i], b = x.as<const int64_t>()[j];
    return largest ? a > b : a < b;
  }
  const double a = as_double(x, i), b = as_double(x, j);
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na != nb && (largest ? na : nb);
  return largest ? a > b : a < b;
}

}  // namespace

Status Less(const KernelArgs& a) { return compare_kernel(a, false); }
Status LessEqual(const KernelArgs& a) { return compare_kernel(a, true); }

Status GatherElements(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GatherElements>(a.node));
  const Shape& xs = a.in[0].shape();
  const Shape& os = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, at->axis, xs.size()));
  Strides st = contiguous_strides(xs);
  const int64_t axis_stride = st[axis];
  st[axis] = 0;  // the index supplies this dim
  const size_t es = dtype_size(a.out.type.dtype);
  Status status = Status::ok();
  for_each_index(os, std::array<Strides, 1>{st}, [&](int64_t n, const std::array<int64_t, 1>& off) {
    if (!status.is_ok()) return;
    auto id = checked_index(a, read_index(a.in[1], n), xs[axis], n);
    if (!id.is_ok()) {
      status = id.status();
      return;
    }
    std::memcpy(a.out.data + static_cast<size_t>(n) * es, a.in[0].data + static_cast<size_t>(off[0] + *id * axis_stride) * es, es);
  });
  return status;
}

Status GatherNd(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GatherNd>(a.node));
  const Shape& xs = a.in[0].shape();
  const Shape& is = a.in[1].shape();
  const auto b = static_cast<size_t>(at->batch_dims);
  const int64_t m = is.back();
  const int64_t batches = dims_product(xs, 0, b);
  const int64_t per_batch = dims_product(is, b, is.size() - 1);  // index tuples per batch
  const int64_t slice = dims_product(xs, b + static_cast<size_t>(m), xs.size());
  const int64_t x_batch = dims_product(xs, b, xs.size());
  const Strides st = contiguous_strides(xs);
  const size_t es = dtype_size(a.out.type.dtype);
  std::byte* out = a.out.data;
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t t = 0; t < per_batch; ++t) {
      VOLTA_ASSIGN_OR_RETURN(int64_t off, tuple_offset(a, a.in[1], bi * per_batch + t, m, xs, b, st));
      const size_t bytes = static_cast<size_t>(slice) * es;
      if (bytes) std::memcpy(out, a.in[0].data + static_cast<size_t>(bi * x_batch + off) * es, bytes);
      out += bytes;
    }
  }
  return Status::ok();
}

// Element k of updates combined into element e of out by `reduction` (not none), in the
// element's dtype: f32 rounded once per update, integers wrapping.
template <typename T>
void combine(T* out, int64_t e, const T* upd, int64_t k, const std::string& r) {
  const T a = out[e], b = upd[k];
  if (r == "add") out[e] = static_cast<T>(a + b);
  else if (r == "mul") out[e] = static_cast<T>(a * b);
  else if (r == "max") out[e] = b > a || (b != b) ? b : a;  // nan wins, as numpy's maximum
  else out[e] = b < a || (b != b) ? b : a;
}

Status ScatterNd(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ScatterNd>(a.node));
  const Shape& xs = a.in[0].shape();
  const Shape& is = a.in[1].shape();
  const int64_t m = is.back();
  const int64_t tuples = dims_product(is, 0, is.size() - 1);
  const int64_t slice = dims_product(xs, static_cast<size_t>(m), xs.size());
  const size_t es = dtype_size(a.out.type.dtype);
  const size_t bytes = static_cast<size_t>(slice) * es;
  const Strides st = contiguous_strides(xs);
  if (a.out.data != a.in[0].data) std::memcpy(a.out.data, a.in[0].data, a.out.type.bytes());
  for (int64_t t = 0; t < tuples; ++t) {  // index order: the result never depends on a schedule
    VOLTA_ASSIGN_OR_RETURN(int64_t off, tuple_offset(a, a.in[1], t, m, xs, 0, st));
    if (at->reduction == "none") {
      if (bytes) std::memcpy(a.out.data + static_cast<size_t>(off) * es, a.in[2].data + static_cast<size_t>(t) * bytes, bytes);
      continue;
    }
    for (int64_t j = 0; j < slice; ++j) {
      switch (a.out.type.dtype) {
        case DType::f32: combine(a.out.as<float>(), off + j, a.in[2].as<const float>(), t * slice + j, at->reduction); break;
        case DType::i32: combine(a.out.as<int32_t>(), off + j, a.in[2].as<const int32_t>(), t * slice + j, at->reduction); break;
        case DType::i64: combine(a.out.as<int64_t>(), off + j, a.in[2].as<const int64_t>(), t * slice + j, at->reduction); break;
        case DType::f64: combine(a.out.as<double>(), off + j, a.in[2].as<const double>(), t * slice + j, at->reduction); break;
        case DType::bf16: case DType::f16: break;  // weights only: verification refuses them here
      }
    }
  }
  return Status::ok();
}

Status Cumsum(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Cumsum>(a.node));
  const Shape& s = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, at->axis, s.size()));
  const int64_t outer = dims_product(s, 0, axis), dim = s[axis], inner = dims_product(s, axis + 1, s.size());
  const DType dt = a.out.type.dtype;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      double fsum = 0.0;
      uint64_t isum = 0;  // integers wrap like the input's own arithmetic
      for (int64_t step = 0; step < dim; ++step) {
        const int64_t k = at->reverse ? dim - 1 - step : step;
        const int64_t e = (o * dim + k) * inner + i;
        if (at->exclusive) {
          if (dt == DType::f32) a.out.as<float>()[e] = static_cast<float>(fsum);
          else if (dt == DType::i32) a.out.as<int32_t>()[e] = static_cast<int32_t>(isum);
          else a.out.as<int64_t>()[e] = static_cast<int64_t>(isum);
        }
        if (dt == DType::f32) fsum += a.in[0].as<const float>()[e];
        else isum += static_cast<uint64_t>(read_index(a.in[0], e));
        if (!at->exclusive) {
          if (dt == DType::f32) a.out.as<float>()[e] = static_cast<float>(fsum);
          else if (dt == DType::i32) a.out.as<int32_t>()[e] = static_cast<int32_t>(isum);
          else a.out.as<int64_t>()[e] = static_cast<int64_t>(isum);
        }
      }
    }
  }
  return Status::ok();
}

Status TopK(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::TopK>(a.node));
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, at->axis, s.size()));
  const int64_t outer = dims_product(s, 0, axis), dim = s[axis], inner = dims_product(s, axis + 1, s.size());
  const int64_t k = at->k;
  std::vector<int64_t> order(static_cast<size_t>(dim));
  int64_t* out = a.out.as<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * dim * inner + i;
      std::iota(order.begin(), order.end(), int64_t{0});
      // A strict total order (ties broken by index), so the result is unique.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t p, int64_t q) {
        const int64_t ep = base + p * inner, eq = base + q * inner;
        const bool largest = at->largest != 0;
        return better(a.in[0], ep, eq, largest) || (!better(a.in[0], eq, ep, largest) && p < q);
      });
      if (!at->sorted) std::sort(order.begin(), order.begin() + k);
      for (int64_t j = 0; j < k; ++j) out[(o * k + j) * inner + i] = order[static_cast<size_t>(j)];
    }
  }
  return Status::ok();
}

Status ArgMax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ArgMax>(a.node));
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, normalize_axis(a.node, at->axis, s.size()));
  const int64_t outer = dims_product(s, 0, axis), dim = s[axis], inner = dims_product(s, axis + 1, s.size());
  int64_t* out = a.out.as<int64_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * dim * inner + i;
      int64_t best = 0;
      for (int64_t j = 1; j < dim; ++j) {
        const int64_t e = base + j * inner, b = base + best * inner;
        const bool take = at->select_last_index ? !better(a.in[0], b, e, at->largest != 0) : better(a.in[0], e, b, at->largest != 0);
        if (take) best = j;
      }
      out[o * inner + i] = best;
    }
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
