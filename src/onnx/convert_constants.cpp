// The ONNX converters whose output is known at import or passes its input through: Constant,
// ConstantOfShape, Shape, Range, Identity and inference-mode Dropout.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

// Identity and Dropout (inference): the output is the input (Identity's: a sequence or an
// optional too).
Status identity(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(OnnxValue v, im.input_value(0));
  return im.set_output_value(0, std::move(v));
}

Status dropout(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"seed", "ratio", "is_test"}));
  if (im.has_input(2)) {
    VOLTA_ASSIGN_OR_RETURN(Tensor mode, im.constant_input(2));
    if (mode.numel() != 1) return im.fail("input 2 (training_mode) must be a scalar");
    const bool on = mode.dtype() == DType::f32 ? mode.data<float>()[0] != 0.0f
                    : mode.dtype() == DType::i32 ? mode.data<int32_t>()[0] != 0 : mode.data<int64_t>()[0] != 0;
    if (on) return im.unsupported("input 2 (training_mode) = true is not supported (random; inference only)");
  }
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_RETURN_IF_ERROR(im.set_output(0, x, t));
  if (!im.wants_output(1)) return Status::ok();
  // The mask of an inference dropout keeps everything.
  Tensor ones = Tensor::zeros(DType::f32, im.type(x).shape);
  for (int64_t i = 0; i < ones.numel(); ++i) ones.data<float>()[i] = 1.0f;
  VOLTA_ASSIGN_OR_RETURN(int32_t mask, im.constant(ones));
  return im.set_output(1, mask, kBool);
}

Result<Tensor> tensor_attr(Importer& im, const ::onnx::AttributeProto& a, ElemType* type) {
  if (a.type() != ::onnx::AttributeProto::TENSOR) return im.fail("attribute '" + a.name() + "' must be a TENSOR");
  auto t = tensor_from_proto(a.t(), "attribute '" + a.name() + "'", type);
  if (!t.is_ok()) {
    if (t.status().code() == StatusCode::kUnimplemented) return im.unsupported(t.status().message());
    return im.fail(t.status().message());
  }
  *type = computed_type(*type);
  return t;
}

Status constant_op(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"value", "value_float", "value_floats", "value_int", "value_ints"}));
  if (im.node().attribute_size() != 1) return im.fail("needs exactly one value attribute");
  const auto& a = im.node().attribute(0);
  Tensor t;
  ElemType type = kFloat;
  if (a.name() == "value") {
    VOLTA_ASSIGN_OR_RETURN(t, tensor_attr(im, a, &type));
  } else if (a.name() == "value_float") {
    VOLTA_ASSIGN_OR_RETURN(double v, im.attr_float("value_float", 0));
    t = Tensor::from_f32({}, {static_cast<float>(v)});
  } else if (a.name() == "value_int") {
    VOLTA_ASSIGN_OR_RETURN(int64_t v, im.attr_int("value_int", 0));
    t = Tensor::from_i64({}, {v}), type = kInt64;
  } else if (a.name() == "value_floats") {
    if (a.type() != ::onnx::AttributeProto::FLOATS) return im.fail("attribute 'value_floats' must be FLOATS");
    std::vector<float> v(a.floats().begin(), a.floats().end());
    t = Tensor::from_f32({static_cast<int64_t>(v.size())}, v);
  } else {
    VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> v, im.attr_ints("value_ints"));
    t = Tensor::zeros(DType::i64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    type = kInt64;
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(t));
  return im.set_output(0, y, type);
}

Status constant_of_shape(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"value"}));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, im.ints_input(0));
  for (int64_t d : shape)
    if (d < 0 || d > (int64_t{1} << 28)) return im.fail("input 0 (shape) " + shape_to_string(shape) + " has a bad dim");
  Tensor fill = Tensor::from_f32({}, {0.0f});
  ElemType type = kFloat;
  if (const auto* a = im.attr("value")) {
    VOLTA_ASSIGN_OR_RETURN(fill, tensor_attr(im, *a, &type));
    if (fill.numel() != 1) return im.fail("attribute 'value' must hold one element");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > (int64_t{1} << 24) / d) return im.unsupported("a constant of shape " + shape_to_string(shape) + " is too large to build at import");
    n *= d;
  }
  Tensor t = Tensor::zeros(fill.dtype(), shape);
  const size_t es = dtype_size(fill.dtype());
  for (int64_t i = 0; i < n; ++i) std::memcpy(t.raw() + static_cast<size_t>(i) * es, fill.raw(), es);
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(t));
  return im.set_output(0, y, type);
}

Status shape_op(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"start", "end"}));
  VOLTA_RETURN_IF_ERROR(im.input_type(0).status());
  // Only the declared type is needed: read it without making the input a tensor operand.
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  const auto r = static_cast<int64_t>(s.size());
  VOLTA_ASSIGN_OR_RETURN(int64_t start, im.attr_int("start", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t end, im.attr_int("end", r));
  auto clamp = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  start = clamp(start), end = clamp(end);
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor t = Tensor::zeros(DType::i64, {n});
  for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = s[static_cast<size_t>(start + i)];
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(t));
  return im.set_output(0, y, kInt64);
}

Status range(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  Tensor v[3];
  for (size_t k = 0; k < 3; ++k) {
    VOLTA_ASSIGN_OR_RETURN(v[k], im.constant_input(k));
    VOLTA_ASSIGN_OR_RETURN(ElemType tk, im.input_type(k));
    if (v[k].numel() != 1 || tk != t) return im.fail("start, limit and delta must be scalars of one type");
  }
  if (t == kBool) return im.unsupported("BOOL ranges are not supported");
  auto get = [](const Tensor& x) -> double {
    return x.dtype() == DType::f32 ? x.data<float>()[0] : x.dtype() == DType::i32 ? x.data<int32_t>()[0] : static_cast<double>(x.data<int64_t>()[0]);
  };
  const double start = get(v[0]), limit = get(v[1]), delta = get(v[2]);
  if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) return im.fail("delta must be non-zero and all finite");
  const double count = std::max(std::ceil((limit - start) / delta), 0.0);
  if (count > static_cast<double>(int64_t{1} << 24)) return im.unsupported("a range of " + std::to_string(count) + " elements is too large");
  const auto n = static_cast<int64_t>(count);
  Tensor out = Tensor::zeros(v[0].dtype(), {n});
  for (int64_t i = 0; i < n; ++i) {
    if (t == kFloat) out.data<float>()[i] = static_cast<float>(start + static_cast<double>(i) * delta);
    else if (t == ElemType::kInt32) out.data<int32_t>()[i] = static_cast<int32_t>(v[0].data<int32_t>()[0] + i * v[2].data<int32_t>()[0]);
    else out.data<int64_t>()[i] = v[0].data<int64_t>()[0] + i * v[2].data<int64_t>()[0];
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(out));
  return im.set_output(0, y, t);
}

}  // namespace

void add_constants(ConverterMap& t) {
  t.insert({
      {"Constant", constant_op},
      {"ConstantOfShape", constant_of_shape},
      {"Dropout", dropout},
      {"Identity", identity},
      {"Range", range},
      {"Shape", shape_op},
  });
}

}  // namespace volta::onnx::conv
