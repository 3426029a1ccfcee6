// Shape and dtype rules of the index ops imported models compute masks and positions with:
// less / less_equal, gather_elements, gather_nd, scatter_nd, cumsum, top_k, arg_max.
#include "ir/infer_rules.h"
#include "volta/op_attrs.h"

namespace volta::ir::rules {

namespace {

template <Op op>
Result<AttrsOf<op>> attrs_of(const Attrs& a) {
  auto r = parse_attrs<op>(a);
  if (!r.is_ok()) return fail(op, r.status().message());
  return r;
}

Status require_numeric(Op op, const TensorType& t, const char* which) {
  if (t.dtype != DType::f32 && !is_integer(t.dtype)) return fail(op, std::string(which) + " must be f32, i32 or i64 but is " + t.to_string());
  return Status::ok();
}

}  // namespace

Result<TensorType> infer_compare(Op op, std::span<const TensorType> in) {
  if (in[0].dtype != in[1].dtype) return fail(op, "a and b differ in dtype: " + in[0].to_string() + " vs " + in[1].to_string());
  auto s = broadcast_shapes(in[0].shape, in[1].shape);
  if (!s.is_ok()) return fail(op, "shapes " + in[0].to_string() + " and " + in[1].to_string() + " do not broadcast");
  return TensorType{DType::f32, *s};
}

Result<TensorType> infer_gather_elements(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::GatherElements;
  VOLTA_RETURN_IF_ERROR(require_int(op, in[1], "indices"));
  VOLTA_ASSIGN_OR_RETURN(const auto at, attrs_of<Op::GatherElements>(attrs));
  const Shape& x = in[0].shape;
  const Shape& idx = in[1].shape;
  if (x.empty()) return fail(op, "cannot gather from a scalar");
  if (idx.size() != x.size()) return fail(op, "indices " + in[1].to_string() + " must have x's rank " + in[0].to_string());
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, at.axis, x.size()));
  for (size_t d = 0; d < x.size(); ++d)
    if (static_cast<int64_t>(d) != axis && idx[d] > x[d])
      return fail(op, "indices " + in[1].to_string() + " exceed x " + in[0].to_string() + " in dim " + std::to_string(d));
  if (x[static_cast<size_t>(axis)] == 0 && numel(idx) > 0) return fail(op, "cannot gather from an empty axis");
  return TensorType{in[0].dtype, idx};
}

Result<TensorType> infer_gather_nd(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::GatherNd;
  VOLTA_RETURN_IF_ERROR(require_int(op, in[1], "indices"));
  VOLTA_ASSIGN_OR_RETURN(const auto at, attrs_of<Op::GatherNd>(attrs));
  const Shape& x = in[0].shape;
  const Shape& idx = in[1].shape;
  const int64_t b = at.batch_dims;
  if (idx.empty()) return fail(op, "indices must have rank >= 1");
  if (b < 0 || b >= static_cast<int64_t>(std::min(x.size(), idx.size())))
    return fail(op, "batch_dims " + std::to_string(b) + " must be below both ranks");
  for (int64_t d = 0; d < b; ++d)
    if (x[static_cast<size_t>(d)] != idx[static_cast<size_t>(d)])
      return fail(op, "batch dim " + std::to_string(d) + " differs: x " + in[0].to_string() + ", indices " + in[1].to_string());
  const int64_t m = idx.back();
  if (m < 1 || b + m > static_cast<int64_t>(x.size()))
    return fail(op, "the index tuples' length " + std::to_string(m) + " must be in [1, rank(x) - batch_dims]");
  Shape out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), x.begin() + b + m, x.end());
  return TensorType{in[0].dtype, out};
}

Result<TensorType> infer_scatter_nd(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::ScatterNd;
  VOLTA_RETURN_IF_ERROR(require_int(op, in[1], "indices"));
  VOLTA_ASSIGN_OR_RETURN(const auto at, attrs_of<Op::ScatterNd>(attrs));
  if (at.reduction != "none" && at.reduction != "add" && at.reduction != "mul" && at.reduction != "max" && at.reduction != "min")
    return fail(op, "attribute 'reduction' must be none, add, mul, max or min, got \"" + at.reduction + "\"");
  if (at.reduction != "none") VOLTA_RETURN_IF_ERROR(require_numeric(op, in[0], "x (with a reduction)"));
  const Shape& x = in[0].shape;
  const Shape& idx = in[1].shape;
  if (in[2].dtype != in[0].dtype) return fail(op, "updates " + in[2].to_string() + " must have x's dtype " + in[0].to_string());
  if (idx.empty()) return fail(op, "indices must have rank >= 1");
  const int64_t m = idx.back();
  if (m < 1 || m > static_cast<int64_t>(x.size()))
    return fail(op, "the index tuples' length " + std::to_string(m) + " must be in [1, rank(x)]");
  Shape want(idx.begin(), idx.end() - 1);
  want.insert(want.end(), x.begin() + m, x.end());
  if (in[2].shape != want) return fail(op, "updates must be " + shape_to_string(want) + ", got " + in[2].to_string());
  return in[0];
}

Result<TensorType> infer_cumsum(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Cumsum;
  VOLTA_RETURN_IF_ERROR(require_numeric(op, in[0], "x"));
  VOLTA_ASSIGN_OR_RETURN(const auto at, attrs_of<Op::Cumsum>(attrs));
  if (in[0].shape.empty()) return fail(op, "x must have rank >= 1");
  VOLTA_RETURN_IF_ERROR(normalize_axis(op, at.axis, in[0].shape.size()).status());
  if ((at.exclusive != 0 && at.exclusive != 1) || (at.reverse != 0 && at.reverse != 1))
    return fail(op, "attributes 'exclusive' and 'reverse' must be 0 or 1");
  return in[0];
}

Result<TensorType> infer_top_k(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::TopK;
  VOLTA_RETURN_IF_ERROR(require_numeric(op, in[0], "x"));
  VOLTA_ASSIGN_OR_RETURN(const auto at, attrs_of<Op::TopK>(attrs));
  if (in[0].shape.empty()) return fail(op, "x must have rank >= 1");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, at.axis, in[0].shape.size()));
  Shape out = in[0].shape;
  if (at.k < 0 || at.k > out[static_cast<size_t>(axis)])
    return fail(op, "k " + std::to_string(at.k) + " must be in [0, " + std::to_string(out[static_cast<size_t>(axis)]) + "]");
  if ((at.largest != 0 && at.largest != 1) || (at.sorted != 0 && at.sorted != 1))
    return fail(op, "attributes 'largest' and 'sorted' must be 0 or 1");
  out[static_cast<size_t>(axis)] = at.k;
  return TensorType{DType::i64, out};
}

Result<TensorType> infer_arg_max(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::ArgMax;
  VOLTA_RETURN_IF_ERROR(require_numeric(op, in[0], "x"));
  VOLTA_ASSIGN_OR_RETURN(const auto at, attrs_of<Op::ArgMax>(attrs));
  if (in[0].shape.empty()) return fail(op, "x must have rank >= 1");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, at.axis, in[0].shape.size()));
  if ((at.keepdims != 0 && at.keepdims != 1) || (at.largest != 0 && at.largest != 1) ||
      (at.select_last_index != 0 && at.select_last_index != 1))
    return fail(op, "attributes 'keepdims', 'largest' and 'select_last_index' must be 0 or 1");
  Shape out = in[0].shape;
  if (out[static_cast<size_t>(axis)] == 0) return fail(op, "cannot search an empty axis");
  if (at.keepdims) out[static_cast<size_t>(axis)] = 1;
  else out.erase(out.begin() + axis);
  return TensorType{DType::i64, out};
}

}  // namespace volta::ir::rules
