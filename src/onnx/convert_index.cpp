// The ONNX converters of index ops: GatherElements, GatherND, ScatterND, CumSum, TopK,
// ArgMax / ArgMin, Tile and OneHot. Tile and OneHot are compositions (broadcast and reshape;
// equal against a constant range and where), the rest have their own IR ops.
#include <cstring>

#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

// One integer scalar (or one-element) input known at import, e.g. CumSum's axis, TopK's K.
Result<int64_t> scalar_input(Importer& im, size_t k, const char* what) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> v, im.ints_input(k));
  if (v.size() != 1) return im.fail(std::string("input ") + std::to_string(k) + " (" + what + ") must have one element");
  return v[0];
}

Status gather_elements(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::GatherElements, {x, idx}, {{"axis", axis}}));
  return im.set_output(0, y, t);
}

Status gather_nd(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"batch_dims"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t batch_dims, im.attr_int("batch_dims", 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::GatherNd, {x, idx}, {{"batch_dims", batch_dims}}));
  return im.set_output(0, y, t);
}

Status scatter_nd(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"reduction"}));
  const auto* r = im.attr("reduction");
  const std::string reduction = r ? r->s() : "none";
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    return im.fail("attribute 'reduction' = '" + reduction + "' is not one of none, add, mul, max, min");
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType tu, im.input_type(2));
  if (tu != t) return im.fail("updates type " + type_name(tu) + " differs from data type " + type_name(t));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t upd, im.input(2));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::ScatterNd, {x, idx, upd}, {{"reduction", reduction}}));
  return im.set_output(0, y, t);
}

Status cumsum(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"exclusive", "reverse"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t exclusive, im.attr_int("exclusive", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t reverse, im.attr_int("reverse", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, scalar_input(im, 1, "axis"));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Cumsum, {x}, {{"axis", axis}, {"exclusive", exclusive ? int64_t{1} : int64_t{0}},
                                                               {"reverse", reverse ? int64_t{1} : int64_t{0}}}));
  return im.set_output(0, y, t);
}

// TopK: the indices from top_k, the values gathered with them.
Status top_k(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "largest", "sorted", "k"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", -1));
  VOLTA_ASSIGN_OR_RETURN(int64_t largest, im.attr_int("largest", 1));
  VOLTA_ASSIGN_OR_RETURN(int64_t sorted, im.attr_int("sorted", 1));
  int64_t k = 0;
  if (im.opset() < 10) {
    if (!im.attr("k")) return im.fail("attribute 'k' is required");
    VOLTA_ASSIGN_OR_RETURN(k, im.attr_int("k", 0));
  } else {
    VOLTA_ASSIGN_OR_RETURN(k, scalar_input(im, 1, "K"));
  }
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.emit(Op::TopK, {x}, {{"k", k}, {"axis", axis}, {"largest", largest ? int64_t{1} : int64_t{0}},
                                                             {"sorted", sorted ? int64_t{1} : int64_t{0}}}));
  VOLTA_ASSIGN_OR_RETURN(int32_t values, im.emit(Op::GatherElements, {x, idx}, {{"axis", axis}}));
  VOLTA_RETURN_IF_ERROR(im.set_output(0, values, t));
  return im.set_output(1, idx, kInt64);
}

Status arg_extremum(Importer& im, bool largest) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "keepdims", "select_last_index"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
  VOLTA_ASSIGN_OR_RETURN(int64_t last, im.attr_int("select_last_index", 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::ArgMax, {x}, {{"axis", axis}, {"keepdims", keepdims ? int64_t{1} : int64_t{0}},
                                                            {"largest", largest ? int64_t{1} : int64_t{0}},
                                                            {"select_last_index", last ? int64_t{1} : int64_t{0}}}));
  return im.set_output(0, y, kInt64);
}

// Tile: x [d0, d1, ...] viewed as [1, d0, 1, d1, ...], broadcast to [r0, d0, r1, d1, ...], then
// merged to [r0 d0, r1 d1, ...].
Status tile(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> reps, im.ints_input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  if (reps.size() != s.size())
    return im.fail("input 1 (repeats) has " + std::to_string(reps.size()) + " entries for rank " + std::to_string(s.size()));
  Shape split, wide, out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (reps[d] < 0) return im.fail("input 1 (repeats) " + shape_to_string(reps) + " has a negative entry");
    split.insert(split.end(), {1, s[d]});
    wide.insert(wide.end(), {reps[d], s[d]});
    out.push_back(reps[d] * s[d]);
  }
  int32_t y = x;
  if (out != s) {
    VOLTA_ASSIGN_OR_RETURN(y, im.reshape(x, split));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Broadcast, {y}, {{"shape", wide}}));
    VOLTA_ASSIGN_OR_RETURN(y, im.reshape(y, out));
  }
  return im.set_output(0, y, t);
}

// OneHot: position j along `axis` is `on` where j equals the index or the index plus depth (a
// negative index counts from the end), else `off`.
Status one_hot(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, im.attr_int("axis", -1));
  VOLTA_ASSIGN_OR_RETURN(Tensor depth_t, im.constant_input(1));
  if (depth_t.numel() != 1) return im.fail("input 1 (depth) must have one element");
  const double depth_v = depth_t.dtype() == DType::f32 ? depth_t.data<float>()[0]
                         : depth_t.dtype() == DType::i32 ? depth_t.data<int32_t>()[0] : static_cast<double>(depth_t.data<int64_t>()[0]);
  if (!(depth_v >= 1 && depth_v <= (1 << 24))) return im.fail("input 1 (depth) must be in [1, 2^24]");
  const auto depth = static_cast<int64_t>(depth_v);
  VOLTA_ASSIGN_OR_RETURN(ElemType vt, im.input_type(2));
  VOLTA_ASSIGN_OR_RETURN(Tensor values, im.constant_input(2));
  if (values.numel() != 2) return im.fail("input 2 (values) must be [off, on]");
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.input(0));
  if (im.type(idx).dtype != DType::i64) {
    VOLTA_ASSIGN_OR_RETURN(idx, im.emit(Op::Cast, {idx}, {{"to", std::string("i64")}}));
  }
  const Shape is = im.type(idx).shape;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, axis_for(im, axis_attr, is.size() + 1, "attribute 'axis'"));
  Shape unsq = is, col(is.size() + 1, 1);
  unsq.insert(unsq.begin() + axis, 1);
  col[static_cast<size_t>(axis)] = depth;
  Tensor range = Tensor::zeros(DType::i64, col), shifted = Tensor::zeros(DType::i64, col);
  for (int64_t j = 0; j < depth; ++j) range.data<int64_t>()[j] = j, shifted.data<int64_t>()[j] = j - depth;
  VOLTA_ASSIGN_OR_RETURN(int32_t u, im.reshape(idx, unsq));
  VOLTA_ASSIGN_OR_RETURN(int32_t r, im.constant(range));
  VOLTA_ASSIGN_OR_RETURN(int32_t rs, im.constant(shifted));
  VOLTA_ASSIGN_OR_RETURN(int32_t hit, im.emit(Op::Equal, {u, r}));
  VOLTA_ASSIGN_OR_RETURN(int32_t hit_neg, im.emit(Op::Equal, {u, rs}));
  VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
  VOLTA_ASSIGN_OR_RETURN(int32_t mask, im.emit(Op::Where, {hit, one, hit_neg}));
  const size_t es = dtype_size(values.dtype());
  Tensor off = Tensor::zeros(values.dtype(), {}), on = Tensor::zeros(values.dtype(), {});
  std::memcpy(off.raw(), values.raw(), es);
  std::memcpy(on.raw(), values.raw() + es, es);
  VOLTA_ASSIGN_OR_RETURN(int32_t on_id, im.constant(on));
  VOLTA_ASSIGN_OR_RETURN(int32_t off_id, im.constant(off));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Where, {mask, on_id, off_id}));
  return im.set_output(0, y, vt);
}

}  // namespace

void add_index(ConverterMap& t) {
  t.insert({
      {"ArgMax", [](Importer& im) { return arg_extremum(im, true); }},
      {"ArgMin", [](Importer& im) { return arg_extremum(im, false); }},
      {"CumSum", cumsum},
      {"GatherElements", gather_elements},
      {"GatherND", gather_nd},
      {"OneHot", one_hot},
      {"ScatterND", scatter_nd},
      {"Tile", tile},
      {"TopK", top_k},
  });
}

}  // namespace volta::onnx::conv
