// The ONNX converters of layout ops: reshapes (Reshape, Flatten, Squeeze, Unsqueeze), Transpose,
// Concat, Slice, Split, Gather, Pad and Expand.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

Status reshape(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"allowzero"}));
  if (im.opset() < 5) return im.unsupported("the opset < 5 form (shape attribute) is not supported");
  VOLTA_ASSIGN_OR_RETURN(int64_t allowzero, im.attr_int("allowzero", 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, im.ints_input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape xs = im.type(x).shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= xs.size()) return im.fail("input 1 (shape) " + shape_to_string(shape) + " copies dim " + std::to_string(i) + " that " + im.type(x).to_string() + " lacks");
      shape[i] = xs[i];
    }
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Reshape, {x}, {{"shape", shape}}));
  return im.set_output(0, y, t);
}

Status transpose(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"perm"}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, im.attr_ints("perm"));
  if (!im.attr("perm"))
    for (size_t i = im.type(x).shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Transpose, {x}, {{"perm", perm}}));
  return im.set_output(0, y, t);
}

Status concat(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis"}));
  if (!im.attr("axis")) return im.fail("attribute 'axis' is required");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  std::vector<int32_t> xs;
  for (size_t k = 0; k < im.num_inputs(); ++k) {
    VOLTA_ASSIGN_OR_RETURN(ElemType tk, im.input_type(k));
    if (tk != t) return im.fail("input " + std::to_string(k) + " has type " + type_name(tk) + " but input 0 has " + type_name(t));
    VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(k));
    xs.push_back(x);
  }
  if (xs.empty() || xs.size() > 64) return im.unsupported("needs 1 to 64 inputs");
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Concat, xs, {{"axis", axis}}));
  return im.set_output(0, y, t);
}

// One axis of an ONNX Slice: step 1 is the IR slice; other steps gather the indices.
Result<int32_t> slice_axis(Importer& im, int32_t x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const int64_t dim = im.type(x).shape[static_cast<size_t>(axis)];
  if (step == 0) return im.fail("a step of 0 is not allowed");
  if (step > 0) {
    start = std::clamp<int64_t>(start < 0 ? std::max<int64_t>(start, -dim) + dim : start, 0, dim);
    end = std::clamp<int64_t>(end < 0 ? std::max<int64_t>(end, -dim) + dim : end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start < 0 ? std::max<int64_t>(start, -dim) + dim : start, 0, dim - 1);
    end = end < -dim ? -1 : std::clamp<int64_t>(end < 0 ? end + dim : end, -1, dim - 1);
  }
  if (step == 1) return im.emit(Op::Slice, {x}, {{"axis", axis}, {"start", start}, {"end", std::max(start, end)}});
  std::vector<int64_t> idx;
  for (int64_t i = start; step > 0 ? i < end : i > end; i += step) idx.push_back(i);
  Tensor t = Tensor::zeros(DType::i64, {static_cast<int64_t>(idx.size())});
  std::copy(idx.begin(), idx.end(), t.data<int64_t>());
  VOLTA_ASSIGN_OR_RETURN(int32_t ids, im.constant(t));
  return im.emit(Op::Gather, {x, ids}, {{"axis", axis}});
}

Status slice(Importer& im) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (im.opset() < 10) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"starts", "ends", "axes"}));
    VOLTA_ASSIGN_OR_RETURN(starts, im.attr_ints("starts"));
    VOLTA_ASSIGN_OR_RETURN(ends, im.attr_ints("ends"));
    VOLTA_ASSIGN_OR_RETURN(axes, im.attr_ints("axes"));
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
    VOLTA_ASSIGN_OR_RETURN(starts, im.ints_input(1));
    VOLTA_ASSIGN_OR_RETURN(ends, im.ints_input(2));
    if (im.has_input(3)) {
    VOLTA_ASSIGN_OR_RETURN(axes, im.ints_input(3));
  }
    if (im.has_input(4)) {
    VOLTA_ASSIGN_OR_RETURN(steps, im.ints_input(4));
  }
  }
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const size_t rank = im.type(x).shape.size();
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return im.fail("starts, ends, axes and steps differ in length");
  std::vector<bool> seen(rank, false);
  int32_t y = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    VOLTA_ASSIGN_OR_RETURN(int64_t axis, axis_for(im, axes[i], rank, "axes entry"));
    if (seen[static_cast<size_t>(axis)]) return im.fail("axis " + std::to_string(axes[i]) + " is listed twice");
    seen[static_cast<size_t>(axis)] = true;
    VOLTA_ASSIGN_OR_RETURN(y, slice_axis(im, y, axis, starts[i], ends[i], steps[i]));
  }
  if (y == x) {
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Reshape, {x}, {{"shape", im.type(x).shape}}));
  }
  return im.set_output(0, y, t);
}

Status split(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "split", "num_outputs"}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, im.attr_int("axis", 0));
  if (s.empty()) return im.fail("cannot split a scalar");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, axis_for(im, axis_attr, s.size(), "attribute 'axis'"));
  std::vector<int64_t> sizes;
  if (im.opset() < 13) {
    VOLTA_ASSIGN_OR_RETURN(sizes, im.attr_ints("split"));
  } else {
    if (im.attr("split")) return im.unsupported("attribute 'split' is an input from opset 13");
    if (im.has_input(1)) {
    VOLTA_ASSIGN_OR_RETURN(sizes, im.ints_input(1));
  }
  }
  const auto n = static_cast<int64_t>(im.node().output_size());
  const int64_t dim = s[static_cast<size_t>(axis)];
  if (n < 1) return im.fail("has no outputs");
  if (im.attr("num_outputs")) {  // opset 18: equal chunks of ceil(dim / n), the last one smaller
    if (im.opset() < 18) return im.unsupported("attribute 'num_outputs' is new in opset 18");
    if (!sizes.empty()) return im.fail("both input 'split' and attribute 'num_outputs' are given");
    VOLTA_ASSIGN_OR_RETURN(int64_t parts, im.attr_int("num_outputs", 0));
    if (parts != n) return im.fail("num_outputs " + std::to_string(parts) + " differs from the " + std::to_string(n) + " outputs");
    const int64_t chunk = (dim + n - 1) / n;
    if (chunk * (n - 1) > dim) return im.fail("dim " + std::to_string(dim) + " does not split into " + std::to_string(n) + " chunks");
    sizes.assign(static_cast<size_t>(n), chunk);
    sizes.back() = dim - chunk * (n - 1);
  }
  if (sizes.empty()) {
    if (dim % n != 0) return im.fail("dim " + std::to_string(dim) + " does not split into " + std::to_string(n) + " equal parts");
    sizes.assign(static_cast<size_t>(n), dim / n);
  }
  if (static_cast<int64_t>(sizes.size()) != n) return im.fail("'split' has " + std::to_string(sizes.size()) + " entries for " + std::to_string(n) + " outputs");
  int64_t total = 0;
  for (int64_t v : sizes) {
    if (v < 0 || v > dim) return im.fail("split sizes " + shape_to_string(sizes) + " must be non-negative");
    total += v;
  }
  if (total != dim) return im.fail("split sizes " + shape_to_string(sizes) + " do not add up to dim " + std::to_string(dim));
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Slice, {x}, {{"axis", axis}, {"start", offset}, {"end", offset + sizes[k]}}));
    VOLTA_RETURN_IF_ERROR(im.set_output(k, y, t));
    offset += sizes[k];
  }
  return Status::ok();
}

Status gather(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType ti, im.input_type(1));
  if (ti != ElemType::kInt32 && ti != kInt64) return im.fail("indices must be INT32 or INT64, got " + type_name(ti));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t idx, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Gather, {x, idx}, {{"axis", axis}}));
  return im.set_output(0, y, t);
}

// Unsqueeze / Squeeze / Flatten are reshapes with a computed shape.
// The `axes` of Squeeze / Unsqueeze: an attribute before opset 13, input 1 from 13 on (which
// Unsqueeze requires and Squeeze may leave out).
Result<std::vector<int64_t>> axes_operand(Importer& im, bool input_required) {
  if (im.opset() < 13) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axes"}));
    return im.attr_ints("axes");
  }
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  if (!input_required && !im.has_input(1)) return std::vector<int64_t>{};
  return im.ints_input(1);
}

Status unsqueeze(Importer& im) {
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, axes_operand(im, true));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  const size_t rank = s.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t a : axes) {
    VOLTA_ASSIGN_OR_RETURN(int64_t ax, axis_for(im, a, rank, "axes entry"));
    if (inserted[static_cast<size_t>(ax)]) return im.fail("axis " + std::to_string(a) + " is listed twice");
    inserted[static_cast<size_t>(ax)] = true;
  }
  Shape out;
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) out.push_back(inserted[d] ? 1 : s[next++]);
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Reshape, {x}, {{"shape", out}}));
  return im.set_output(0, y, t);
}

Status squeeze(Importer& im) {
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, axes_operand(im, false));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  std::vector<bool> drop(s.size(), axes.empty());
  if (axes.empty())
    for (size_t d = 0; d < s.size(); ++d) drop[d] = s[d] == 1;
  for (int64_t a : axes) {
    VOLTA_ASSIGN_OR_RETURN(int64_t ax, axis_for(im, a, s.size(), "axes entry"));
    if (s[static_cast<size_t>(ax)] != 1) return im.fail("cannot squeeze axis " + std::to_string(a) + " of " + im.type(x).to_string());
    drop[static_cast<size_t>(ax)] = true;
  }
  Shape out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!drop[d]) out.push_back(s[d]);
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Reshape, {x}, {{"shape", out}}));
  return im.set_output(0, y, t);
}

Status flatten(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis"}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, im.attr_int("axis", 1));
  const auto r = static_cast<int64_t>(s.size());
  if (axis < -r || axis > r) return im.fail("attribute 'axis' " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  const Shape out = {numel(Shape(s.begin(), s.begin() + axis)), numel(Shape(s.begin() + axis, s.end()))};
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Reshape, {x}, {{"shape", out}}));
  return im.set_output(0, y, t);
}

// Pad. Constant mode: one IR pad (zeros) per padded axis; a non-zero value fills the border
// through a Where on a constant mask, so the inside stays bit-exact. Edge and reflect modes:
// one gather per padded axis with the source index of every output position.
Status pad(Importer& im) {
  std::vector<int64_t> pads;
  double value = 0;
  if (im.opset() < 11) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"mode", "pads", "value"}));
    VOLTA_ASSIGN_OR_RETURN(pads, im.attr_ints("pads"));
    VOLTA_ASSIGN_OR_RETURN(value, im.attr_float("value", 0.0));
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"mode"}));
    VOLTA_ASSIGN_OR_RETURN(pads, im.ints_input(1));
    if (im.has_input(2)) {
      VOLTA_ASSIGN_OR_RETURN(Tensor v, im.constant_input(2));
      if (v.dtype() != DType::f32 || v.numel() != 1)
        return im.unsupported("input 2 (constant_value) must be a FLOAT scalar, got " + v.type().to_string());
      value = v.data<float>()[0];
    }
    if (im.has_input(3)) {  // opset 18: pads name only these axes
      VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, im.ints_input(3));
      VOLTA_ASSIGN_OR_RETURN(int32_t x0, im.input(0));
      const size_t rank = im.type(x0).shape.size();
      if (pads.size() != 2 * axes.size())
        return im.fail("pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes");
      std::vector<int64_t> full(2 * rank, 0);
      std::vector<bool> seen(rank, false);
      for (size_t i = 0; i < axes.size(); ++i) {
        VOLTA_ASSIGN_OR_RETURN(int64_t a, axis_for(im, axes[i], rank, "axes entry"));
        if (seen[static_cast<size_t>(a)]) return im.fail("axis " + std::to_string(axes[i]) + " is listed twice");
        seen[static_cast<size_t>(a)] = true;
        full[static_cast<size_t>(a)] = pads[i];
        full[static_cast<size_t>(a) + rank] = pads[i + axes.size()];
      }
      pads = std::move(full);
    }
  }
  VOLTA_ASSIGN_OR_RETURN(std::string mode, im.attr_string("mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect") return im.unsupported("mode '" + mode + "' is not supported");
  if (mode == "constant") VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType type, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.input(0));
  const Shape in_shape = im.type(y).shape;
  const size_t rank = in_shape.size();
  if (pads.size() != 2 * rank)
    return im.fail("pads has " + std::to_string(pads.size()) + " values; an input of rank " + std::to_string(rank) + " needs " +
                   std::to_string(2 * rank));
  for (size_t d = 0; d < rank; ++d) {
    const int64_t before = pads[d], after = pads[d + rank];
    if (before < 0 || after < 0) return im.unsupported("negative pads (cropping) are not supported");
    if (before == 0 && after == 0) continue;
    const auto axis = static_cast<int64_t>(d);
    if (mode == "constant") {
      VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Pad, {y}, {{"axis", axis}, {"before", before}, {"after", after}}));
      continue;
    }
    const int64_t n = in_shape[d];
    if (n == 0 || (mode == "reflect" && (before >= n || after >= n)))
      return im.unsupported(mode + " pads of " + std::to_string(before) + " and " + std::to_string(after) + " do not fit axis " +
                            std::to_string(d) + " of extent " + std::to_string(n));
    Tensor src = Tensor::zeros(DType::i64, {before + n + after});
    for (int64_t j = 0; j < src.numel(); ++j) {
      const int64_t k = j - before;
      src.data<int64_t>()[j] = mode == "edge" ? std::clamp<int64_t>(k, 0, n - 1) : k < 0 ? -k : k >= n ? 2 * (n - 1) - k : k;
    }
    VOLTA_ASSIGN_OR_RETURN(int32_t ids, im.constant(std::move(src)));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Gather, {y, ids}, {{"axis", axis}}));
  }
  if (value != 0 && mode == "constant") {
    const Shape out = im.type(y).shape;
    Tensor inside = Tensor::zeros(DType::f32, out);
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < inside.numel(); ++i) {  // idx walks `out` in row-major order
      bool in = true;
      for (size_t d = 0; d < rank; ++d) in = in && idx[d] >= pads[d] && idx[d] < pads[d] + in_shape[d];
      inside.data<float>()[i] = in ? 1.0f : 0.0f;
      for (size_t d = rank; d-- > 0 && ++idx[d] == out[d];) idx[d] = 0;
    }
    VOLTA_ASSIGN_OR_RETURN(int32_t mask, im.constant(std::move(inside)));
    VOLTA_ASSIGN_OR_RETURN(int32_t fill, im.scalar(static_cast<float>(value)));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Where, {mask, y, fill}));
  }
  return im.set_output(0, y, type);
}

Status expand(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, im.ints_input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  for (int64_t d : shape)
    if (d < 0) return im.fail("input 1 (shape) " + shape_to_string(shape) + " has a negative dim");
  auto out = ir::broadcast_shapes(im.type(x).shape, shape);  // Expand broadcasts both ways
  if (!out.is_ok()) return im.fail("cannot expand " + im.type(x).to_string() + " to " + shape_to_string(shape));
  const Op op = *out != im.type(x).shape ? Op::Broadcast : Op::Reshape;
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {x}, {{"shape", *out}}));
  return im.set_output(0, y, t);
}

}  // namespace

void add_layout(ConverterMap& t) {
  t.insert({
      {"Concat", concat},
      {"Expand", expand},
      {"Flatten", flatten},
      {"Gather", gather},
      {"Pad", pad},
      {"Reshape", reshape},
      {"Slice", slice},
      {"Split", split},
      {"Squeeze", squeeze},
      {"Transpose", transpose},
      {"Unsqueeze", unsqueeze},
  });
}

}  // namespace volta::onnx::conv
