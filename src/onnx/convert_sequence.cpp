// The ONNX sequence and optional ops, and Identity on such values. A sequence's length is known
// at import (importer.h's OnnxValue), so each op here is list work on its elements' IR values:
// positions and split sizes must be known at import. SequenceConstruct, SequenceEmpty,
// SequenceAt, SequenceLength, SequenceInsert, SequenceErase, ConcatFromSequence,
// SplitToSequence, Optional, OptionalHasElement, OptionalGetElement.
#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

// A position input (SequenceAt, SequenceInsert, SequenceErase) known at import, in [lo, hi]
// once negatives count from the end (n added).
Result<int64_t> position(Importer& im, size_t k, int64_t n, int64_t lo, int64_t hi) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> p, im.ints_input(k));
  if (p.size() != 1) return im.fail("input " + std::to_string(k) + " (position) must be a scalar");
  const int64_t pos = p[0] < 0 ? p[0] + n : p[0];
  if (pos < lo || pos > hi)
    return im.fail("position " + std::to_string(p[0]) + " is out of range for a sequence of " + std::to_string(n) + " elements");
  return pos;
}

OnnxValue sequence_of(std::vector<int32_t> elements, ElemType t) {
  OnnxValue v;
  v.sequence = true;
  v.elements = std::move(elements);
  v.type = t;
  return v;
}

// A tensor input that joins a sequence of type t.
Result<int32_t> element_input(Importer& im, size_t k, ElemType t) {
  VOLTA_ASSIGN_OR_RETURN(ElemType et, im.input_type(k));
  if (et != t) return im.fail("input " + std::to_string(k) + " is " + type_name(et) + " but the sequence holds " + type_name(t));
  return im.input(k);
}

Status sequence_construct(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  if (im.num_inputs() == 0) return im.fail("needs at least one input");
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  std::vector<int32_t> elements;
  for (size_t k = 0; k < im.num_inputs(); ++k) {
    VOLTA_ASSIGN_OR_RETURN(int32_t x, element_input(im, k, t));
    elements.push_back(x);
  }
  return im.set_output_value(0, sequence_of(std::move(elements), t));
}

Status sequence_empty(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"dtype"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t dt, im.attr_int("dtype", static_cast<int64_t>(kFloat)));
  const auto t = static_cast<ElemType>(dt);
  if (auto d = volta_dtype(static_cast<int32_t>(dt)); !d.is_ok()) return im.unsupported("dtype " + type_name(t) + ": " + d.status().message());
  return im.set_output_value(0, sequence_of({}, computed_type(t)));
}

Status sequence_at(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> s, im.sequence_input(0));
  const auto n = static_cast<int64_t>(s.size());
  VOLTA_ASSIGN_OR_RETURN(int64_t pos, position(im, 1, n, 0, n - 1));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  return im.set_output(0, s[static_cast<size_t>(pos)], t);
}

Status sequence_length(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> s, im.sequence_input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t n, im.constant(Tensor::from_i64({}, {static_cast<int64_t>(s.size())})));
  return im.set_output(0, n, kInt64);
}

Status sequence_insert(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> s, im.sequence_input(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, element_input(im, 1, t));
  const auto n = static_cast<int64_t>(s.size());
  int64_t pos = n;  // default: at the back
  if (im.has_input(2)) {
    VOLTA_ASSIGN_OR_RETURN(pos, position(im, 2, n, 0, n));
  }
  s.insert(s.begin() + pos, x);
  return im.set_output_value(0, sequence_of(std::move(s), t));
}

Status sequence_erase(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> s, im.sequence_input(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  const auto n = static_cast<int64_t>(s.size());
  if (n == 0) return im.fail("the sequence is empty: nothing to erase");
  int64_t pos = n - 1;  // default: the last
  if (im.has_input(1)) {
    VOLTA_ASSIGN_OR_RETURN(pos, position(im, 1, n, 0, n - 1));
  }
  s.erase(s.begin() + pos);
  return im.set_output_value(0, sequence_of(std::move(s), t));
}

Status concat_from_sequence(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "new_axis"}));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> s, im.sequence_input(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  if (!im.attr("axis")) return im.fail("attribute 'axis' is required");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t new_axis, im.attr_int("new_axis", 0));
  if (s.empty()) return im.fail("the sequence is empty: nothing to concatenate");
  const size_t rank = im.type(s[0]).shape.size() + (new_axis != 0 ? 1 : 0);
  VOLTA_ASSIGN_OR_RETURN(axis, axis_for(im, axis, rank, "axis"));
  std::vector<int32_t> parts;
  for (int32_t x : s) {
    if (new_axis != 0) {  // stacked: each element gains a dim of 1 at axis
      Shape shape = im.type(x).shape;
      shape.insert(shape.begin() + axis, 1);
      VOLTA_ASSIGN_OR_RETURN(x, im.reshape(x, shape));
    }
    parts.push_back(x);
  }
  if (parts.size() == 1) return im.set_output(0, parts[0], t);
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Concat, parts, {{"axis", axis}}));
  return im.set_output(0, y, t);
}

Status split_to_sequence(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "keepdims"}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape shape = im.type(x).shape;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(axis, axis_for(im, axis, shape.size(), "axis"));
  VOLTA_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
  const int64_t dim = shape[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!im.has_input(1)) {  // pieces of 1, without the axis unless keepdims
    sizes.assign(static_cast<size_t>(dim), 1);
    squeeze = keepdims == 0;
  } else {
    VOLTA_ASSIGN_OR_RETURN(Tensor split, im.constant_input(1));
    VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> v, im.ints_input(1));
    if (split.shape().empty()) {  // one size; the last piece may be smaller
      if (v[0] <= 0) return im.fail("input 1 (split) must be positive, got " + std::to_string(v[0]));
      for (int64_t at = 0; at < dim; at += v[0]) sizes.push_back(std::min(v[0], dim - at));
    } else {
      int64_t sum = 0;
      for (int64_t n : v) {
        if (n < 0) return im.fail("input 1 (split) has a negative size");
        sum += n;
      }
      if (sum != dim) return im.fail("input 1 (split) sums to " + std::to_string(sum) + " but axis " + std::to_string(axis) + " has " + std::to_string(dim));
      sizes = v;
    }
  }
  std::vector<int32_t> pieces;
  int64_t at = 0;
  for (int64_t n : sizes) {
    VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Slice, {x}, {{"axis", axis}, {"start", at}, {"end", at + n}}));
    if (squeeze) {
      Shape s = im.type(y).shape;
      s.erase(s.begin() + axis);
      VOLTA_ASSIGN_OR_RETURN(y, im.reshape(y, s));
    }
    pieces.push_back(y);
    at += n;
  }
  return im.set_output_value(0, sequence_of(std::move(pieces), t));
}

Status optional(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"type"}));
  if (im.has_input(0)) {
    VOLTA_ASSIGN_OR_RETURN(OnnxValue v, im.input_value(0));
    v.optional = true;
    return im.set_output_value(0, std::move(v));
  }
  const ::onnx::AttributeProto* a = im.attr("type");
  if (!a || !a->has_tp()) return im.fail("an Optional without an input needs attribute 'type'");
  bool sequence = false, optional = false;
  const auto* tt = inner_tensor_type(a->tp(), &sequence, &optional);
  if (!tt || optional) return im.unsupported("attribute 'type' must be a tensor or a sequence of tensors");
  OnnxValue v;
  v.optional = v.absent = true;
  v.sequence = sequence;
  v.type = computed_type(static_cast<ElemType>(tt->elem_type()));
  return im.set_output_value(0, std::move(v));
}

Status optional_has_element(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  bool has = false;
  if (im.has_input(0)) {
    VOLTA_ASSIGN_OR_RETURN(OnnxValue v, im.input_value(0));
    has = !v.absent;
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(Tensor::from_f32({}, {has ? 1.0f : 0.0f})));
  return im.set_output(0, y, kBool);
}

Status optional_get_element(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(OnnxValue v, im.input_value(0));
  if (v.absent) return im.fail("input 0 is an optional that holds nothing");
  v.optional = false;
  return im.set_output_value(0, std::move(v));
}

}  // namespace

void add_sequence(ConverterMap& t) {
  t.insert({
      {"SequenceConstruct", sequence_construct},
      {"SequenceEmpty", sequence_empty},
      {"SequenceAt", sequence_at},
      {"SequenceLength", sequence_length},
      {"SequenceInsert", sequence_insert},
      {"SequenceErase", sequence_erase},
      {"ConcatFromSequence", concat_from_sequence},
      {"SplitToSequence", split_to_sequence},
      {"Optional", optional},
      {"OptionalHasElement", optional_has_element},
      {"OptionalGetElement", optional_get_element},
  });
}

}  // namespace volta::onnx::conv
