// The ONNX converters of math: elementwise ops with attributes or special operands (Pow, Clip,
// LeakyRelu, Cast, Equal, Where, Trilu), Softmax, MatMul and Gemm, the normalisations and the
// reductions.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

// Pow: the result has the base's type. An integer base with an integer exponent is integer
// math; with a FLOAT exponent it is computed in f32 and cast back (truncated, saturated).
Status pow_op(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType bt, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType et, im.input_type(1));
  if (bt != kFloat && !is_int(bt)) return im.unsupported("base type " + type_name(bt) + " is not supported");
  if (et != kFloat && !is_int(et)) return im.unsupported("exponent type " + type_name(et) + " is not supported");
  if (bt == ElemType::kUint64 || et == ElemType::kUint64)
    return im.unsupported("a UINT64 base or exponent is not supported (UINT64 values are held in i64 as their bits)");
  if (bt == et && is_int(bt)) return integer_arithmetic(im, Op::Pow);
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  const DType base_dtype = im.type(a).dtype;
  if (is_int(bt) && is_int(et)) {  // exponent to the base's dtype, then integer math
    if (im.type(b).dtype != base_dtype) {
      VOLTA_ASSIGN_OR_RETURN(b, im.emit(Op::Cast, {b}, {{"to", std::string(dtype_name(base_dtype))}}));
    }
    VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Pow, {a, b}));
    VOLTA_ASSIGN_OR_RETURN(y, wrap_to(im, y, bt));
    return im.set_output(0, y, bt);
  }
  const ir::Attrs to_f32{{"to", std::string("f32")}};
  if (is_int(et)) {
    VOLTA_ASSIGN_OR_RETURN(b, im.emit(Op::Cast, {b}, to_f32));
  }
  if (is_int(bt)) {
    VOLTA_ASSIGN_OR_RETURN(a, im.emit(Op::Cast, {a}, to_f32));
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Pow, {a, b}));
  if (is_int(bt)) {
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Cast, {y}, {{"to", std::string(dtype_name(base_dtype))}}));
    VOLTA_ASSIGN_OR_RETURN(y, wrap_to(im, y, bt));
  }
  return im.set_output(0, y, bt);
}

// Gelu (opset 20): the erf or tanh form.
Status gelu(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"approximate"}));
  VOLTA_ASSIGN_OR_RETURN(std::string approx, im.attr_string("approximate", "none"));
  if (approx != "none" && approx != "tanh") return im.fail("attribute 'approximate' must be 'none' or 'tanh', got '" + approx + "'");
  return unary(im, Op::Gelu, {{"approximate", approx}});
}

Status leaky_relu(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"alpha"}));
  VOLTA_ASSIGN_OR_RETURN(double alpha, im.attr_float("alpha", 0.01));
  return unary(im, Op::LeakyRelu, {{"alpha", alpha}});
}

// Integer Clip (opset >= 11): max with min, then min with max, as numpy's order.
Status integer_clip(Importer& im, ElemType t) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.input(0));
  for (size_t k = 1; k <= 2; ++k) {
    if (!im.has_input(k)) continue;
    VOLTA_ASSIGN_OR_RETURN(ElemType tk, im.input_type(k));
    if (tk != t) return im.fail("input " + std::to_string(k) + " has type " + type_name(tk) + ", not the input's " + type_name(t));
    VOLTA_ASSIGN_OR_RETURN(int32_t bound, im.input(k));
    VOLTA_ASSIGN_OR_RETURN(int32_t out, k == 1 ? less(im, y, bound, t) : less(im, bound, y, t));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Where, {out, bound, y}));
  }
  return im.set_output(0, y, t);
}

Status clip(Importer& im) {
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  if (is_int(t) && im.opset() >= 11) return integer_clip(im, t);
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (im.opset() < 11) {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({"min", "max"}));
    VOLTA_ASSIGN_OR_RETURN(lo, im.attr_float("min", lo));
    VOLTA_ASSIGN_OR_RETURN(hi, im.attr_float("max", hi));
  } else {
    VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
    for (size_t k = 1; k <= 2; ++k) {
      if (!im.has_input(k)) continue;
      VOLTA_ASSIGN_OR_RETURN(Tensor bound, im.constant_input(k));
      if (bound.dtype() != DType::f32 || bound.numel() != 1)
        return im.unsupported("input " + std::to_string(k) + " (" + (k == 1 ? "min" : "max") + ") must be a FLOAT scalar, got " +
                              bound.type().to_string());
      (k == 1 ? lo : hi) = bound.data<float>()[0];
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

// Batch norm as elementwise IR ops over [N, C, ...] with [C] statistics:
// y = (x - mean) / sqrt(var + eps) * scale + B. Inference mode uses the given mean and var;
// training mode (opset 14+) the batch's own (the mean and biased variance over every axis but
// C), and also gives running_mean / running_var = given * momentum + batch's * (1 - momentum).
// `is_test` (opset <= 6) is read and ignored, as ONNX Runtime does.
Status batch_normalization(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"epsilon", "momentum", "training_mode", "spatial", "is_test"}));
  VOLTA_ASSIGN_OR_RETURN(double eps, im.attr_float("epsilon", 1e-5));
  VOLTA_ASSIGN_OR_RETURN(double momentum, im.attr_float("momentum", 0.9));
  VOLTA_ASSIGN_OR_RETURN(int64_t training, im.attr_int("training_mode", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t spatial, im.attr_int("spatial", 1));
  if (spatial != 1) return im.unsupported("attribute 'spatial' = 0 is not supported");
  if (im.wants_output(3) || im.wants_output(4))
    return im.unsupported("outputs saved_mean / saved_var (opset < 14 training) are not supported");
  if (training == 0 && (im.wants_output(1) || im.wants_output(2)))
    return im.unsupported("outputs running_mean / running_var without training_mode = 1 are not supported");
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
  int32_t mean = p[2], var = p[3];
  if (training != 0) {  // the batch's statistics, [C, 1, ...] like the given ones
    std::vector<int64_t> axes = {0};
    for (size_t d = 2; d < s.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    const ir::Attrs over{{"axes", axes}, {"keepdims", int64_t{1}}};
    VOLTA_ASSIGN_OR_RETURN(int32_t m, im.emit(Op::ReduceMean, {x}, over));
    VOLTA_ASSIGN_OR_RETURN(int32_t c, im.emit(Op::Sub, {x, m}));
    VOLTA_ASSIGN_OR_RETURN(int32_t c2, im.emit(Op::Mul, {c, c}));
    VOLTA_ASSIGN_OR_RETURN(int32_t v, im.emit(Op::ReduceMean, {c2}, over));
    VOLTA_ASSIGN_OR_RETURN(mean, im.reshape(m, stat));
    VOLTA_ASSIGN_OR_RETURN(var, im.reshape(v, stat));
    VOLTA_ASSIGN_OR_RETURN(int32_t keep, im.scalar(static_cast<float>(momentum)));
    VOLTA_ASSIGN_OR_RETURN(int32_t take, im.scalar(static_cast<float>(1.0 - momentum)));
    for (size_t k = 1; k <= 2; ++k) {
      if (!im.wants_output(k)) continue;
      VOLTA_ASSIGN_OR_RETURN(int32_t old_part, im.emit(Op::Mul, {p[k + 1], keep}));
      VOLTA_ASSIGN_OR_RETURN(int32_t new_part, im.emit(Op::Mul, {k == 1 ? mean : var, take}));
      VOLTA_ASSIGN_OR_RETURN(int32_t running, im.emit(Op::Add, {old_part, new_part}));
      VOLTA_ASSIGN_OR_RETURN(running, im.reshape(running, {s[1]}));
      VOLTA_RETURN_IF_ERROR(im.set_output(k, running, kFloat));
    }
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t e, im.scalar(static_cast<float>(eps)));
  VOLTA_ASSIGN_OR_RETURN(int32_t ve, im.emit(Op::Add, {var, e}));
  VOLTA_ASSIGN_OR_RETURN(int32_t sd, im.emit(Op::Sqrt, {ve}));
  VOLTA_ASSIGN_OR_RETURN(int32_t xc, im.emit(Op::Sub, {x, mean}));
  VOLTA_ASSIGN_OR_RETURN(int32_t xn, im.emit(Op::Div, {xc, sd}));
  VOLTA_ASSIGN_OR_RETURN(int32_t ys, im.emit(Op::Mul, {xn, p[0]}));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Add, {ys, p[1]}));
  return im.set_output(0, y, kFloat);
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
  const auto to = computed_type(static_cast<ElemType>(to_code));
  auto dt = volta_dtype(static_cast<int32_t>(to_code));
  if (!dt.is_ok()) return im.unsupported("attribute 'to' = " + std::string(elem_type_name(static_cast<int32_t>(to_code))) + ": " + dt.status().message());
  if (!volta_dtype(static_cast<int32_t>(from)).is_ok()) return im.unsupported("input type " + type_name(from) + " is not supported");
  const bool to_float = to == kFloat || to == ElemType::kFloat16 || to == ElemType::kBfloat16;
  if (to == ElemType::kString) return im.unsupported("a cast to STRING is not supported");
  if (from == ElemType::kString && !to_float)
    return im.unsupported("a cast from STRING to " + type_name(static_cast<ElemType>(to_code)) +
                          " is not supported (STRING values are held as the f32 numbers they spell; only float types)");
  const bool from_float = computed_type(from) == kFloat || from == ElemType::kString || from == ElemType::kFloat16 ||
                          from == ElemType::kBfloat16;
  if (from == ElemType::kUint64 && to != kBool && !is_int(to))
    return im.unsupported("a cast from UINT64 to a float type is not supported (UINT64 values are held in i64 as their bits)");
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  int32_t y = x;
  if (to == kBool && from != kBool) {  // non-zero (and nan) is true
    VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
    VOLTA_ASSIGN_OR_RETURN(int32_t zero, im.scalar(0.0f));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Where, {x, one, zero}));
  } else if (from_float && is_narrow_int(to)) {
    // Saturated to the type's range in f32 first (the largest f32 below 2^32 for UINT32; UINT64
    // saturates at 2^63 - 1, i64's largest), then truncated like every float -> int cast.
    if (from != kFloat) {
      VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Cast, {y}, {{"to", std::string("f32")}}));
    }
    const double lo = to == ElemType::kInt8 ? -128 : to == ElemType::kInt16 ? -32768 : 0;
    const double hi = to == ElemType::kInt8     ? 127
                      : to == ElemType::kUint8  ? 255
                      : to == ElemType::kInt16  ? 32767
                      : to == ElemType::kUint16 ? 65535
                      : to == ElemType::kUint32 ? 4294967040.0
                                                : std::numeric_limits<double>::infinity();
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Clip, {y}, {{"min", lo}, {"max", hi}}));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Cast, {y}, {{"to", std::string(dtype_name(*dt))}}));
  } else {
    if (*dt != im.type(x).dtype) {
      VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Cast, {x}, {{"to", std::string(dtype_name(*dt))}}));
    }
    if (is_int(from)) {  // integers convert modulo the width
      VOLTA_ASSIGN_OR_RETURN(y, wrap_to(im, y, to));
    }
  }
  return im.set_output(0, y, to);
}

Status reduce(Importer& im, Op op) {
  std::vector<int64_t> axes;
  int64_t noop_with_empty = 0;
  if ((op == Op::ReduceSum && im.opset() >= 13) || im.opset() >= 18) {  // axes became an input
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

}  // namespace

void add_math(ConverterMap& t) {
  t.insert({
      {"Cast", cast},
      {"Clip", clip},
      {"Equal", equal},
      {"Gelu", gelu},
      {"Gemm", gemm},
      {"LayerNormalization", layer_normalization},
      {"BatchNormalization", batch_normalization},
      {"LeakyRelu", leaky_relu},
      {"LogSoftmax", [](Importer& im) { return softmax(im, Op::LogSoftmax); }},
      {"MatMul", matmul},
      {"Pow", pow_op},
      {"ReduceMax", [](Importer& im) { return reduce(im, Op::ReduceMax); }},
      {"ReduceMean", [](Importer& im) { return reduce(im, Op::ReduceMean); }},
      {"ReduceSum", [](Importer& im) { return reduce(im, Op::ReduceSum); }},
      {"Softmax", [](Importer& im) { return softmax(im, Op::Softmax); }},
      {"Trilu", trilu},
      {"Where", where},
  });
}

}  // namespace volta::onnx::conv
