// One converter per ONNX op type: reads the node's attributes and inputs in the form its
// opset defines and emits IR ops. Shape operands are read as constants here, so the IR graph
// is fully static. Anything not handled fails naming the attribute or input.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include "onnx/importer.h"

namespace volta::onnx {

namespace {

using ir::Op;
using Converter = Status (*)(Importer&);

constexpr ElemType kFloat = ElemType::kFloat, kBool = ElemType::kBool, kInt64 = ElemType::kInt64;

std::string type_name(ElemType t) { return elem_type_name(static_cast<int32_t>(t)); }

Status require_float(Importer& im, size_t k) {
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(k));
  if (t != kFloat) return im.unsupported("input " + std::to_string(k) + " has type " + type_name(t) + "; only FLOAT is supported");
  return Status::ok();
}

// Normalises an axis for `rank`, naming the attribute or input it came from.
Result<int64_t> axis_for(Importer& im, int64_t axis, size_t rank, const std::string& what) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return im.fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

// y = op(x) for the float unary ops.
Status unary(Importer& im, Op op, ir::Attrs attrs = {}) {
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {x}, std::move(attrs)));
  return im.set_output(0, y, kFloat);
}

Status binary(Importer& im, Op op) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_RETURN_IF_ERROR(require_float(im, 1));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {a, b}));
  return im.set_output(0, y, kFloat);
}

Status simple_unary(Importer& im, Op op) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  return unary(im, op);
}

Status pow_op(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType et, im.input_type(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  if (et == ElemType::kInt32 || et == kInt64) {  // an integer exponent of a float base
    VOLTA_ASSIGN_OR_RETURN(b, im.emit(Op::Cast, {b}, {{"to", std::string("f32")}}));
  } else if (et != kFloat) {
    return im.unsupported("exponent type " + type_name(et) + " is not supported");
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Pow, {a, b}));
  return im.set_output(0, y, kFloat);
}

Status leaky_relu(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"alpha"}));
  VOLTA_ASSIGN_OR_RETURN(double alpha, im.attr_float("alpha", 0.01));
  return unary(im, Op::LeakyRelu, {{"alpha", alpha}});
}

Status clip(Importer& im) {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (im.opset() < 11) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"min", "max"}));
    VOLTA_ASSIGN_OR_RETURN(lo, im.attr_float("min", lo));
    VOLTA_ASSIGN_OR_RETURN(hi, im.attr_float("max", hi));
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
    for (size_t k = 1; k <= 2; ++k) {
      if (!im.has_input(k)) continue;
      VOLTA_ASSIGN_OR_RETURN(Tensor t, im.constant_input(k));
      if (t.dtype() != DType::f32 || t.numel() != 1)
        return im.unsupported("input " + std::to_string(k) + " (" + (k == 1 ? "min" : "max") + ") must be a FLOAT scalar, got " +
                              t.type().to_string());
      (k == 1 ? lo : hi) = t.data<float>()[0];
    }
  }
  return unary(im, Op::Clip, {{"min", lo}, {"max", hi}});
}

// Softmax / LogSoftmax: before opset 13 the input is seen as 2-D [prod(:axis), prod(axis:)].
Status softmax(Importer& im, Op op) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis"}));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, im.attr_int("axis", im.opset() < 13 ? 1 : -1));
  if (s.empty()) return im.unsupported("a scalar input is not supported");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, axis_for(im, axis_attr, s.size(), "attribute 'axis'"));
  int32_t y;
  if (im.opset() >= 13) {
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(op, {x}, {{"axis", axis}}));
  } else {
    const int64_t outer = numel(Shape(s.begin(), s.begin() + axis)), inner = numel(Shape(s.begin() + axis, s.end()));
    VOLTA_ASSIGN_OR_RETURN(int32_t x2, im.reshape(x, {outer, inner}));
    VOLTA_ASSIGN_OR_RETURN(int32_t y2, im.emit(op, {x2}, {{"axis", int64_t{-1}}}));
    VOLTA_ASSIGN_OR_RETURN(y, im.reshape(y2, s));
  }
  return im.set_output(0, y, kFloat);
}

Status matmul(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_RETURN_IF_ERROR(require_float(im, 1));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  const Shape as = im.type(a).shape, bs = im.type(b).shape;
  if (as.empty() || bs.empty()) return im.fail("MatMul operands must have rank >= 1");
  // numpy matmul: a 1-D operand gains a dim that the result drops again.
  int32_t a2 = a, b2 = b;
  if (as.size() == 1) { VOLTA_ASSIGN_OR_RETURN(a2, im.reshape(a, {1, as[0]})); }
  if (bs.size() == 1) { VOLTA_ASSIGN_OR_RETURN(b2, im.reshape(b, {bs[0], 1})); }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Matmul, {a2, b2}));
  Shape ys = im.type(y).shape;
  if (as.size() == 1) ys.erase(ys.end() - 2);
  if (bs.size() == 1) ys.erase(ys.end() - 1);
  VOLTA_ASSIGN_OR_RETURN(y, im.reshape(y, ys));
  return im.set_output(0, y, kFloat);
}

Status gemm(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"alpha", "beta", "transA", "transB"}));
  VOLTA_ASSIGN_OR_RETURN(double alpha, im.attr_float("alpha", 1.0));
  VOLTA_ASSIGN_OR_RETURN(double beta, im.attr_float("beta", 1.0));
  VOLTA_ASSIGN_OR_RETURN(int64_t ta, im.attr_int("transA", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t tb, im.attr_int("transB", 0));
  for (size_t k = 0; k < 3; ++k)
    if (k < 2 || im.has_input(k)) VOLTA_RETURN_IF_ERROR(require_float(im, k));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  if (im.type(a).shape.size() != 2 || im.type(b).shape.size() != 2)
    return im.fail("A and B must be 2-D, got " + im.type(a).to_string() + " and " + im.type(b).to_string());
  ir::Attrs mm;
  if (ta) mm.set("transpose_a", int64_t{1});
  if (tb) mm.set("transpose_b", int64_t{1});
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Matmul, {a, b}, mm));
  if (alpha != 1.0) {
    VOLTA_ASSIGN_OR_RETURN(int32_t s, im.scalar(static_cast<float>(alpha)));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Mul, {y, s}));
  }
  if (im.has_input(2) && beta != 0.0) {
    VOLTA_ASSIGN_OR_RETURN(int32_t c, im.input(2));
    if (beta != 1.0) {
      VOLTA_ASSIGN_OR_RETURN(int32_t s, im.scalar(static_cast<float>(beta)));
      VOLTA_ASSIGN_OR_RETURN(c, im.emit(Op::Mul, {c, s}));
    }
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Add, {y, c}));
  }
  return im.set_output(0, y, kFloat);
}

Status layer_normalization(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "epsilon", "stash_type"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, im.attr_int("axis", -1));
  VOLTA_ASSIGN_OR_RETURN(double eps, im.attr_float("epsilon", 1e-5));
  VOLTA_ASSIGN_OR_RETURN(int64_t stash, im.attr_int("stash_type", 1));
  if (stash != 1) return im.unsupported("attribute 'stash_type' = " + std::to_string(stash) + " is not supported (1 is)");
  for (size_t k = 0; k < 3; ++k)
    if (k < 2 || im.has_input(k)) VOLTA_RETURN_IF_ERROR(require_float(im, k));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  if (s.empty()) return im.fail("X must have rank >= 1");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, axis_for(im, axis_attr, s.size(), "attribute 'axis'"));
  const Shape norm_shape(s.begin() + axis, s.end());
  const int64_t outer = numel(Shape(s.begin(), s.begin() + axis)), inner = numel(norm_shape);
  // Scale and B broadcast to the normalised dims, then flatten to [inner].
  auto per_element = [&](size_t k) -> Result<int32_t> {
    VOLTA_ASSIGN_OR_RETURN(int32_t v, im.input(k));
    if (im.type(v).shape != norm_shape) {
      VOLTA_ASSIGN_OR_RETURN(v, im.emit(Op::Broadcast, {v}, {{"shape", norm_shape}}));
    }
    return im.reshape(v, {inner});
  };
  VOLTA_ASSIGN_OR_RETURN(int32_t x2, im.reshape(x, {outer, inner}));
  VOLTA_ASSIGN_OR_RETURN(int32_t gamma, per_element(1));
  std::vector<int32_t> ins = {x2, gamma};
  if (im.has_input(2)) {
    VOLTA_ASSIGN_OR_RETURN(int32_t beta, per_element(2));
    ins.push_back(beta);
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y2, im.emit(Op::LayerNorm, ins, {{"eps", eps}}));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.reshape(y2, s));
  VOLTA_RETURN_IF_ERROR(im.set_output(0, y, kFloat));
  if (!im.wants_output(1) && !im.wants_output(2)) return Status::ok();
  // Mean and InvStdDev: [outer dims, 1, ...], biased variance.
  Shape stat_shape = s;
  for (size_t d = static_cast<size_t>(axis); d < s.size(); ++d) stat_shape[d] = 1;
  VOLTA_ASSIGN_OR_RETURN(int32_t mean, im.emit(Op::ReduceMean, {x2}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}}));
  VOLTA_ASSIGN_OR_RETURN(int32_t centered, im.emit(Op::Sub, {x2, mean}));
  VOLTA_ASSIGN_OR_RETURN(int32_t sq, im.emit(Op::Mul, {centered, centered}));
  VOLTA_ASSIGN_OR_RETURN(int32_t var, im.emit(Op::ReduceMean, {sq}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}}));
  VOLTA_ASSIGN_OR_RETURN(int32_t e, im.scalar(static_cast<float>(eps)));
  VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
  VOLTA_ASSIGN_OR_RETURN(int32_t ve, im.emit(Op::Add, {var, e}));
  VOLTA_ASSIGN_OR_RETURN(int32_t sd, im.emit(Op::Sqrt, {ve}));
  VOLTA_ASSIGN_OR_RETURN(int32_t inv, im.emit(Op::Div, {one, sd}));
  VOLTA_ASSIGN_OR_RETURN(int32_t mean_out, im.reshape(mean, stat_shape));
  VOLTA_ASSIGN_OR_RETURN(int32_t inv_out, im.reshape(inv, stat_shape));
  VOLTA_RETURN_IF_ERROR(im.set_output(1, mean_out, kFloat));
  return im.set_output(2, inv_out, kFloat);
}

// Inference-mode batch norm as elementwise IR ops over [N, C, ...] with [C] statistics:
// y = (x - mean) / sqrt(var + eps) * scale + B.
Status batch_normalization(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"epsilon", "momentum", "training_mode", "spatial"}));
  VOLTA_ASSIGN_OR_RETURN(double eps, im.attr_float("epsilon", 1e-5));
  VOLTA_ASSIGN_OR_RETURN(int64_t training, im.attr_int("training_mode", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t spatial, im.attr_int("spatial", 1));
  if (training != 0) return im.unsupported("attribute 'training_mode' = 1 is not supported (inference only)");
  if (spatial != 1) return im.unsupported("attribute 'spatial' = 0 is not supported");
  if (im.wants_output(1) || im.wants_output(2) || im.wants_output(3) || im.wants_output(4))
    return im.unsupported("outputs running_mean / running_var (training) are not supported");
  for (size_t k = 0; k < 5; ++k) VOLTA_RETURN_IF_ERROR(require_float(im, k));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape s = im.type(x).shape;
  if (s.size() < 2) return im.fail("X must be [N, C, ...], got " + im.type(x).to_string());
  Shape stat(s.size() - 1, 1);
  stat[0] = s[1];
  std::vector<int32_t> p;
  for (size_t k = 1; k < 5; ++k) {
    VOLTA_ASSIGN_OR_RETURN(int32_t v, im.input(k));
    if (im.type(v).shape != Shape{s[1]})
      return im.fail("input " + std::to_string(k) + " must be [" + std::to_string(s[1]) + "], got " + im.type(v).to_string());
    VOLTA_ASSIGN_OR_RETURN(v, im.reshape(v, stat));
    p.push_back(v);
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t e, im.scalar(static_cast<float>(eps)));
  VOLTA_ASSIGN_OR_RETURN(int32_t ve, im.emit(Op::Add, {p[3], e}));
  VOLTA_ASSIGN_OR_RETURN(int32_t sd, im.emit(Op::Sqrt, {ve}));
  VOLTA_ASSIGN_OR_RETURN(int32_t xc, im.emit(Op::Sub, {x, p[2]}));
  VOLTA_ASSIGN_OR_RETURN(int32_t xn, im.emit(Op::Div, {xc, sd}));
  VOLTA_ASSIGN_OR_RETURN(int32_t ys, im.emit(Op::Mul, {xn, p[0]}));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Add, {ys, p[1]}));
  return im.set_output(0, y, kFloat);
}

// auto_pad, kernel_shape, strides, pads, dilations of Conv and the pools as IR attributes.
Result<ir::Attrs> window(Importer& im, const Shape& x, std::vector<int64_t> kernel, bool with_dilations) {
  const size_t sr = x.size() - 2;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> ks, im.attr_ints("kernel_shape"));
  if (!ks.empty() && !kernel.empty() && ks != kernel)
    return im.fail("attribute 'kernel_shape' " + shape_to_string(ks) + " does not match the weight's " + shape_to_string(kernel));
  if (kernel.empty()) kernel = ks;
  if (kernel.size() != sr) return im.fail("attribute 'kernel_shape' must have " + std::to_string(sr) + " entries, got " + shape_to_string(kernel));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> strides, im.attr_ints("strides"));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> pads, im.attr_ints("pads"));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> dil, im.attr_ints("dilations"));
  VOLTA_ASSIGN_OR_RETURN(std::string auto_pad, im.attr_string("auto_pad", "NOTSET"));
  if (strides.empty()) strides.assign(sr, 1);
  if (dil.empty()) dil.assign(sr, 1);
  if (strides.size() != sr) return im.fail("attribute 'strides' must have " + std::to_string(sr) + " entries");
  if (dil.size() != sr) return im.fail("attribute 'dilations' must have " + std::to_string(sr) + " entries");
  if (!with_dilations && dil != std::vector<int64_t>(sr, 1)) return im.unsupported("attribute 'dilations' is not supported");
  if (auto_pad == "NOTSET") {
    if (pads.empty()) pads.assign(2 * sr, 0);
  } else if (auto_pad == "VALID") {
    pads.assign(2 * sr, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * sr, 0);
    for (size_t d = 0; d < sr; ++d) {
      if (strides[d] < 1 || dil[d] < 1 || kernel[d] < 1 || kernel[d] > (int64_t{1} << 24) || dil[d] > (int64_t{1} << 24))
        return im.fail("bad kernel_shape, strides or dilations");
      const int64_t out = (x[d + 2] + strides[d] - 1) / strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - x[d + 2]);
      const int64_t small = total / 2, big = total - small;
      pads[d] = auto_pad == "SAME_UPPER" ? small : big;
      pads[d + sr] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else {
    return im.unsupported("attribute 'auto_pad' = '" + auto_pad + "' is not supported");
  }
  if (pads.size() != 2 * sr) return im.fail("attribute 'pads' must have " + std::to_string(2 * sr) + " entries");
  ir::Attrs a{{"strides", strides}, {"pads", pads}};
  if (with_dilations) a.set("dilations", dil);
  a.set("kernel", kernel);
  return a;
}

Status conv(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  for (size_t k = 0; k < 3; ++k)
    if (k < 2 || im.has_input(k)) VOLTA_RETURN_IF_ERROR(require_float(im, k));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t w, im.input(1));
  const Shape xs = im.type(x).shape, ws = im.type(w).shape;
  if (xs.size() != 4 || ws.size() != 4)
    return im.unsupported("only 2-D convolution is supported (X [N, C, H, W]), got X " + im.type(x).to_string() + " and W " +
                          im.type(w).to_string());
  VOLTA_ASSIGN_OR_RETURN(ir::Attrs a, window(im, xs, {ws[2], ws[3]}, true));
  VOLTA_ASSIGN_OR_RETURN(int64_t group, im.attr_int("group", 1));
  ir::Attrs ca{{"strides", *a.get_ints("strides")}, {"pads", *a.get_ints("pads")}, {"dilations", *a.get_ints("dilations")},
               {"groups", group}};
  std::vector<int32_t> ins = {x, w};
  if (im.has_input(2)) {
    VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(2));
    ins.push_back(b);
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Conv2d, ins, ca));
  return im.set_output(0, y, kFloat);
}

Status pool(Importer& im, Op op) {
  const bool is_max = op == Op::MaxPool;
  if (is_max) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}));
    VOLTA_ASSIGN_OR_RETURN(int64_t order, im.attr_int("storage_order", 0));
    if (order != 0) return im.unsupported("attribute 'storage_order' = 1 is not supported");
    if (im.wants_output(1)) return im.unsupported("output 'Indices' is not supported");
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}));
  }
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const Shape xs = im.type(x).shape;
  if (xs.size() < 3 || xs.size() > 5) return im.unsupported("X must be [N, C, spatial...] with 1 to 3 spatial dims, got " + im.type(x).to_string());
  VOLTA_ASSIGN_OR_RETURN(ir::Attrs a, window(im, xs, {}, is_max));
  VOLTA_ASSIGN_OR_RETURN(int64_t ceil_mode, im.attr_int("ceil_mode", 0));
  if (ceil_mode) a.set("ceil_mode", int64_t{1});
  if (!is_max) {
    VOLTA_ASSIGN_OR_RETURN(int64_t cip, im.attr_int("count_include_pad", 0));
    if (cip) a.set("count_include_pad", int64_t{1});
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {x}, a));
  return im.set_output(0, y, kFloat);
}

Status global_average_pool(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const size_t rank = im.type(x).shape.size();
  if (rank < 3) return im.fail("X must be [N, C, spatial...], got " + im.type(x).to_string());
  std::vector<int64_t> axes;
  for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::ReduceMean, {x}, {{"axes", axes}, {"keepdims", int64_t{1}}}));
  return im.set_output(0, y, kFloat);
}

// Identity and Dropout (inference): the output is the input.
Status identity(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  return im.set_output(0, x, t);
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
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axis", "split"}));
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

Status where(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType tc, im.input_type(0));
  if (tc != kBool) return im.fail("condition must be BOOL, got " + type_name(tc));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(1));
  VOLTA_ASSIGN_OR_RETURN(ElemType t2, im.input_type(2));
  if (t != t2) return im.fail("X and Y differ in type: " + type_name(t) + " vs " + type_name(t2));
  VOLTA_ASSIGN_OR_RETURN(int32_t c, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(2));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Where, {c, a, b}));
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
    if (im.has_input(3)) return im.unsupported("input 3 (axes) is not supported");
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

Status equal(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t2, im.input_type(1));
  if (t != t2) return im.fail("A and B differ in type: " + type_name(t) + " vs " + type_name(t2));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Equal, {a, b}));
  return im.set_output(0, y, kBool);
}

Status cast(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"to", "saturate"}));
  if (!im.attr("to")) return im.fail("attribute 'to' is required");
  VOLTA_ASSIGN_OR_RETURN(int64_t to_code, im.attr_int("to", 0));
  VOLTA_ASSIGN_OR_RETURN(ElemType from, im.input_type(0));
  const auto to = static_cast<ElemType>(to_code);
  auto dt = volta_dtype(static_cast<int32_t>(to_code));
  if (!dt.is_ok()) return im.unsupported("attribute 'to' = " + std::string(elem_type_name(static_cast<int32_t>(to_code))) + ": " + dt.status().message());
  if (!volta_dtype(static_cast<int32_t>(from)).is_ok()) return im.unsupported("input type " + type_name(from) + " is not supported");
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  int32_t y = x;
  if (to == kBool && from != kBool) {  // non-zero (and nan) is true
    VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
    VOLTA_ASSIGN_OR_RETURN(int32_t zero, im.scalar(0.0f));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Where, {x, one, zero}));
  } else if (*dt != im.type(x).dtype) {
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Cast, {x}, {{"to", std::string(dtype_name(*dt))}}));
  }
  return im.set_output(0, y, to);
}

Status reduce(Importer& im, Op op) {
  std::vector<int64_t> axes;
  int64_t noop_with_empty = 0;
  if (op == Op::ReduceSum && im.opset() >= 13) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"keepdims", "noop_with_empty_axes"}));
    VOLTA_ASSIGN_OR_RETURN(noop_with_empty, im.attr_int("noop_with_empty_axes", 0));
    if (im.has_input(1)) {
      VOLTA_ASSIGN_OR_RETURN(axes, im.ints_input(1));
    }
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"axes", "keepdims"}));
    VOLTA_ASSIGN_OR_RETURN(axes, im.attr_ints("axes"));
  }
  VOLTA_ASSIGN_OR_RETURN(int64_t keepdims, im.attr_int("keepdims", 1));
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  const size_t rank = im.type(x).shape.size();
  if (axes.empty()) {
    if (noop_with_empty) return im.set_output(0, x, kFloat);
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  if (axes.empty()) return im.set_output(0, x, kFloat);  // a scalar reduces to itself
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {x}, {{"axes", axes}, {"keepdims", keepdims ? int64_t{1} : int64_t{0}}}));
  return im.set_output(0, y, kFloat);
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

Status trilu(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"upper"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t upper, im.attr_int("upper", 1));
  int64_t k = 0;
  if (im.has_input(1)) {
    VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> kv, im.ints_input(1));
    if (kv.size() != 1) return im.fail("input 1 (k) must be a scalar");
    k = kv[0];
  }
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Trilu, {x}, {{"upper", upper ? int64_t{1} : int64_t{0}}, {"k", k}}));
  return im.set_output(0, y, t);
}

using ConverterMap = std::map<std::string, std::function<Status(Importer&)>>;

// The converters written here, then one per elementwise op whose ONNX op type the op table
// names (ops.def's ONNX column), unless written here (Pow: its exponent may be an integer).
const ConverterMap& converters() {
  static const ConverterMap table = [] {
    ConverterMap t = {
        {"AveragePool", [](Importer& im) { return pool(im, Op::AvgPool); }},
        {"BatchNormalization", batch_normalization},
        {"Cast", cast},
        {"Clip", clip},
        {"Concat", concat},
        {"Constant", constant_op},
        {"ConstantOfShape", constant_of_shape},
        {"Conv", conv},
        {"Dropout", dropout},
        {"Equal", equal},
        {"Expand", expand},
        {"Flatten", flatten},
        {"Gather", gather},
        {"Gemm", gemm},
        {"GlobalAveragePool", global_average_pool},
        {"Identity", identity},
        {"LayerNormalization", layer_normalization},
        {"LeakyRelu", leaky_relu},
        {"LogSoftmax", [](Importer& im) { return softmax(im, Op::LogSoftmax); }},
        {"MatMul", matmul},
        {"MaxPool", [](Importer& im) { return pool(im, Op::MaxPool); }},
        {"Pad", pad},
        {"Pow", pow_op},
        {"Range", range},
        {"ReduceMax", [](Importer& im) { return reduce(im, Op::ReduceMax); }},
        {"ReduceMean", [](Importer& im) { return reduce(im, Op::ReduceMean); }},
        {"ReduceSum", [](Importer& im) { return reduce(im, Op::ReduceSum); }},
        {"Reshape", reshape},
        {"Shape", shape_op},
        {"Slice", slice},
        {"Softmax", [](Importer& im) { return softmax(im, Op::Softmax); }},
        {"Split", split},
        {"Squeeze", squeeze},
        {"Transpose", transpose},
        {"Trilu", trilu},
        {"Unsqueeze", unsqueeze},
        {"Where", where},
    };
    for (int i = 0; i < ir::kNumOps; ++i) {
      const Op op = static_cast<Op>(i);
      const ir::OpInfo& info = ir::op_info(op);
      if (*info.onnx == '\0' || ir::elementwise_arity(op) == 0) continue;
      if (info.category == ir::OpCategory::Unary) t.emplace(info.onnx, [op](Importer& im) { return simple_unary(im, op); });
      else t.emplace(info.onnx, [op](Importer& im) { return binary(im, op); });
    }
    return t;
  }();
  return table;
}

}  // namespace

bool is_supported_op(const std::string& op_type) { return converters().count(op_type) != 0; }

Status convert(Importer& im) {
  auto it = converters().find(im.node().op_type());
  if (it == converters().end()) return im.unsupported("op type '" + im.node().op_type() + "' is not supported");
  return it->second(im);
}

}  // namespace volta::onnx
