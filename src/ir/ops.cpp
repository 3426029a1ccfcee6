// The op table and every op's shape/dtype rule.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "ir/elementwise_program.h"
#include "ir/infer_rules.h"
#include "ir/scalar_math.h"
#include "volta/ir.h"

namespace volta::ir {

using namespace rules;

namespace {

// f32 operands, or (ops with integer math, scalar_math.h) both i32 or both i64.
Result<TensorType> infer_binary(Op op, std::span<const TensorType> in) {
  const bool ints = has_integer_math(op) && is_integer(in[0].dtype);
  if (ints && in[1].dtype != in[0].dtype)
    return fail(op, "a and b differ in dtype: " + in[0].to_string() + " vs " + in[1].to_string());
  if (!ints) {
    VOLTA_RETURN_IF_ERROR(op == Op::BitwiseAnd ? require_int(op, in[0], "a") : require_f32(op, in[0], "a"));
    VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "b"));
  }
  auto s = broadcast_shapes(in[0].shape, in[1].shape);
  if (!s.is_ok()) return fail(op, "shapes " + in[0].to_string() + " and " + in[1].to_string() + " do not broadcast");
  return TensorType{in[0].dtype, *s};
}

Result<TensorType> infer_unary(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  if (has_integer_math(op) && is_integer(in[0].dtype)) return in[0];
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  if (op == Op::Gelu) {
    VOLTA_ASSIGN_OR_RETURN(std::string approx, tagged(op, attrs.get_string("approximate", "none")));
    if (approx != "none" && approx != "tanh")
      return fail(op, "attribute 'approximate' must be \"none\" or \"tanh\", got \"" + approx + "\"");
  }
  if (op == Op::Softmax || op == Op::LogSoftmax) {
    VOLTA_ASSIGN_OR_RETURN(int64_t axis, tagged(op, attrs.get_int("axis", -1)));
    if (in[0].shape.empty()) return fail(op, "needs rank >= 1");
    VOLTA_ASSIGN_OR_RETURN(size_t ax, normalize_axis(op, axis, in[0].shape.size()));
    VOLTA_RETURN_IF_ERROR(finite_scale(op, attrs));
    if (attrs.has("causal_offset")) {
      VOLTA_RETURN_IF_ERROR(check_offset(op, attrs, "causal_offset"));
      if (in[0].shape.size() < 2 || ax + 1 != in[0].shape.size())
        return fail(op, "a causal mask needs rank >= 2 and the last axis, got " + in[0].to_string() + " axis " +
                            std::to_string(axis));
    }
    if (in.size() == 2) {
      if (in[1].dtype != DType::i32 || in[1].numel() != 1)
        return fail(op, "position must be i32 with one element, got " + in[1].to_string());
      if (!attrs.has("causal_offset")) return fail(op, "a position input needs the causal_offset attribute");
    }
  }
  return in[0];
}

Result<TensorType> infer_norm(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  for (size_t i = 0; i < in.size(); ++i) VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], i == 0 ? "x" : i == 1 ? "gamma" : "beta"));
  VOLTA_ASSIGN_OR_RETURN(double eps, tagged(op, attrs.get_float("eps", 1e-5)));
  if (!(eps >= 0)) return fail(op, "eps must be >= 0, got " + std::to_string(eps));
  const Shape& x = in[0].shape;
  if (x.empty()) return fail(op, "x must have rank >= 1");
  Shape want = {x.back()};
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i].shape != want)
      return fail(op, std::string(i == 1 ? "gamma" : "beta") + " must be " + shape_to_string(want) + " to match " +
                          in[0].to_string() + ", got " + in[i].to_string());
  return in[0];
}

Result<TensorType> infer_embedding(std::span<const TensorType> in) {
  const Op op = Op::Embedding;
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "table"));
  VOLTA_RETURN_IF_ERROR(require_int(op, in[1], "ids"));
  if (in[0].shape.size() != 2) return fail(op, "table must be [V, D], got " + in[0].to_string());
  Shape out = in[1].shape;
  out.push_back(in[0].shape[1]);
  return TensorType{DType::f32, out};
}

Result<TensorType> infer_reshape(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Reshape;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, tagged(op, attrs.get_ints("shape")));
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) return fail(op, "more than one -1 in shape " + shape_to_string(shape));
      infer_at = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return fail(op, "negative dim in shape " + shape_to_string(shape));
    } else {
      if (shape[i] != 0 && known > (int64_t{1} << 62) / shape[i]) return fail(op, "shape " + shape_to_string(shape) + " is too large");
      known *= shape[i];
    }
  }
  int64_t total = in[0].numel();
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      return fail(op, "cannot reshape " + in[0].to_string() + " to " + shape_to_string(shape));
    shape[static_cast<size_t>(infer_at)] = total / known;
  } else if (known != total) {
    return fail(op, "cannot reshape " + in[0].to_string() + " (" + std::to_string(total) + " elements) to " +
                        shape_to_string(shape) + " (" + std::to_string(known) + " elements)");
  }
  return TensorType{in[0].dtype, shape};
}

Result<TensorType> infer_transpose(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Transpose;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> perm, tagged(op, attrs.get_ints("perm")));
  const Shape& x = in[0].shape;
  if (perm.size() != x.size())
    return fail(op, "perm " + shape_to_string(perm) + " has " + std::to_string(perm.size()) + " entries for rank " +
                        std::to_string(x.size()));
  std::vector<bool> seen(x.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(x.size()) || seen[static_cast<size_t>(p)])
      return fail(op, "perm " + shape_to_string(perm) + " is not a permutation of the axes");
    seen[static_cast<size_t>(p)] = true;
    out.push_back(x[static_cast<size_t>(p)]);
  }
  return TensorType{in[0].dtype, out};
}

Result<TensorType> infer_slice(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Slice;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, tagged(op, attrs.get_int("axis", 0)));
  VOLTA_ASSIGN_OR_RETURN(int64_t start, tagged(op, attrs.get_int("start", 0)));
  VOLTA_ASSIGN_OR_RETURN(int64_t end, tagged(op, attrs.get_int("end", 0)));
  if (in[0].shape.empty()) return fail(op, "cannot slice a scalar");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, axis_attr, in[0].shape.size()));
  Shape out = in[0].shape;
  int64_t dim = out[static_cast<size_t>(axis)];
  auto clamp = [dim](int64_t i) { return std::clamp(i < 0 ? i + dim : i, int64_t{0}, dim); };
  out[static_cast<size_t>(axis)] = std::max<int64_t>(0, clamp(end) - clamp(start));
  return TensorType{in[0].dtype, out};
}

Result<TensorType> infer_concat(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Concat;
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, tagged(op, attrs.get_int("axis", 0)));
  if (in[0].shape.empty()) return fail(op, "cannot concatenate scalars");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, axis_attr, in[0].shape.size()));
  Shape out = in[0].shape;
  for (size_t i = 1; i < in.size(); ++i) {
    const TensorType& t = in[i];
    bool ok = t.dtype == in[0].dtype && t.shape.size() == out.size();
    for (size_t d = 0; ok && d < out.size(); ++d)
      if (static_cast<int64_t>(d) != axis && t.shape[d] != out[d]) ok = false;
    if (!ok)
      return fail(op, "input " + std::to_string(i) + " " + t.to_string() + " does not match " + in[0].to_string() +
                          " outside axis " + std::to_string(axis));
    out[static_cast<size_t>(axis)] += t.shape[static_cast<size_t>(axis)];
  }
  return TensorType{in[0].dtype, out};
}

Result<TensorType> infer_reduce(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> axes, tagged(op, attrs.get_ints("axes")));
  VOLTA_ASSIGN_OR_RETURN(int64_t keepdims, tagged(op, attrs.get_int("keepdims", 0)));
  const Shape& x = in[0].shape;
  if (axes.empty()) return fail(op, "attribute 'axes' must not be empty");
  std::vector<bool> reduced(x.size(), false);
  for (int64_t a : axes) {
    VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, a, x.size()));
    if (reduced[static_cast<size_t>(axis)]) return fail(op, "axis " + std::to_string(a) + " listed twice");
    reduced[static_cast<size_t>(axis)] = true;
    if (op == Op::ReduceMax && x[static_cast<size_t>(axis)] == 0)
      return fail(op, "cannot take the max over empty axis " + std::to_string(a) + " of " + in[0].to_string());
  }
  Shape out;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!reduced[d]) out.push_back(x[d]);
    else if (keepdims) out.push_back(1);
  }
  return TensorType{DType::f32, out};
}

Result<TensorType> infer_where(std::span<const TensorType> in) {
  const Op op = Op::Where;
  if (in[1].dtype != in[2].dtype) return fail(op, "a and b differ in dtype: " + in[1].to_string() + " vs " + in[2].to_string());
  auto ab = broadcast_shapes(in[1].shape, in[2].shape);
  Result<Shape> all = ab.is_ok() ? broadcast_shapes(in[0].shape, *ab) : ab;
  if (!all.is_ok())
    return fail(op, "shapes " + in[0].to_string() + ", " + in[1].to_string() + ", " + in[2].to_string() + " do not broadcast");
  return TensorType{in[1].dtype, *all};
}

Result<TensorType> infer_causal_mask(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::CausalMask;
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  VOLTA_RETURN_IF_ERROR(check_offset(op, attrs, "offset"));
  VOLTA_RETURN_IF_ERROR(tagged(op, attrs.get_float("value", 0.0)).status());
  if (in[0].shape.size() < 2) return fail(op, "x must have rank >= 2, got " + in[0].to_string());
  return in[0];
}

// Inputs of any shapes that broadcast together -> their broadcast shape, f32.
Result<TensorType> infer_fused_elementwise(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::FusedElementwise;
  VOLTA_ASSIGN_OR_RETURN(const std::string text, tagged(op, attrs.get_string("program", "")));
  auto prog = parse_elementwise_program(text, static_cast<int32_t>(in.size()));
  if (!prog.is_ok()) return fail(op, "program '" + text + "': " + prog.status().message());
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], ("x" + std::to_string(i)).c_str()));
    auto s = broadcast_shapes(out, in[i].shape);
    if (!s.is_ok()) return fail(op, "input x" + std::to_string(i) + " " + in[i].to_string() + " does not broadcast with the others");
    out = *s;
  }
  return TensorType{DType::f32, out};
}

Result<TensorType> infer_cross_entropy(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::CrossEntropy;
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "logits"));
  VOLTA_RETURN_IF_ERROR(require_int(op, in[1], "targets"));
  VOLTA_RETURN_IF_ERROR(tagged(op, attrs.get_int("ignore_index", -1)).status());
  const Shape& l = in[0].shape;
  if (l.empty()) return fail(op, "logits must have rank >= 1, got " + in[0].to_string());
  if (Shape(l.begin(), l.end() - 1) != in[1].shape)
    return fail(op, "targets " + in[1].to_string() + " must have the shape of logits " + in[0].to_string() +
                        " without its last axis");
  return TensorType{DType::f32, {}};
}

Result<TensorType> infer_mse(std::span<const TensorType> in) {
  const Op op = Op::Mse;
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "a"));
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "b"));
  if (in[0].shape != in[1].shape) return fail(op, "shapes differ: " + in[0].to_string() + " vs " + in[1].to_string());
  return TensorType{DType::f32, {}};
}

Result<TensorType> infer_broadcast(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Broadcast;
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, tagged(op, attrs.get_ints("shape")));
  for (int64_t d : shape)
    if (d < 0) return fail(op, "negative dim in shape " + shape_to_string(shape));
  auto b = broadcast_shapes(in[0].shape, shape);
  if (!b.is_ok() || *b != shape) return fail(op, "cannot broadcast " + in[0].to_string() + " to " + shape_to_string(shape));
  return TensorType{in[0].dtype, shape};
}

Result<TensorType> infer_pad(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Pad;
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, tagged(op, attrs.get_int("axis", 0)));
  VOLTA_ASSIGN_OR_RETURN(int64_t before, tagged(op, attrs.get_int("before", 0)));
  VOLTA_ASSIGN_OR_RETURN(int64_t after, tagged(op, attrs.get_int("after", 0)));
  if (in[0].shape.empty()) return fail(op, "cannot pad a scalar");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, axis_attr, in[0].shape.size()));
  constexpr int64_t kMaxPad = int64_t{1} << 40;
  if (before < 0 || after < 0 || before > kMaxPad || after > kMaxPad)
    return fail(op, "before and after must be in [0, 2^40], got " + std::to_string(before) + " and " + std::to_string(after));
  Shape out = in[0].shape;
  out[static_cast<size_t>(axis)] += before + after;
  return TensorType{DType::f32, out};
}

// (x, dy) pairs: dy has x's type.
Result<TensorType> infer_pointwise_grad(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  if (in[1] != in[0]) return fail(op, "dy " + in[1].to_string() + " must match x " + in[0].to_string());
  // The forward op's attribute checks, their errors naming this op.
  const auto forward = [&](Op fwd) -> Status {
    const auto r = infer_unary(fwd, in.subspan(0, 1), attrs);
    if (r.is_ok()) return Status::ok();
    const std::string tag = "[" + std::string(op_name(fwd)) + "] ", msg = r.status().message();
    return fail(op, msg.rfind(tag, 0) == 0 ? msg.substr(tag.size()) : msg);
  };
  if (op == Op::GeluGrad) VOLTA_RETURN_IF_ERROR(forward(Op::Gelu));
  if (op == Op::SoftmaxGrad) VOLTA_RETURN_IF_ERROR(forward(Op::Softmax));
  return in[0];
}

// (x, gamma, dy) -> dx
Result<TensorType> infer_norm_grad(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  VOLTA_RETURN_IF_ERROR(infer_norm(op, in.subspan(0, 2), attrs).status());
  if (in[2] != in[0]) return fail(op, "dy " + in[2].to_string() + " must match x " + in[0].to_string());
  return in[0];
}

Result<TensorType> infer_norm_param_grad(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::NormParamGrad;
  VOLTA_RETURN_IF_ERROR(infer_norm(op, in.subspan(0, 1), attrs).status());
  VOLTA_ASSIGN_OR_RETURN(int64_t center, tagged(op, attrs.get_int("center", 1)));
  if (center != 0 && center != 1) return fail(op, "center must be 0 or 1, got " + std::to_string(center));
  if (in[1] != in[0]) return fail(op, "dy " + in[1].to_string() + " must match x " + in[0].to_string());
  return TensorType{DType::f32, {2, in[0].shape.back()}};
}

Result<TensorType> infer_gelu_and_grad(std::span<const TensorType> in) {
  VOLTA_RETURN_IF_ERROR(require_f32(Op::GeluAndGrad, in[0], "x"));
  Shape s = in[0].shape;
  s.insert(s.begin(), 2);
  return TensorType{DType::f32, s};
}

Result<TensorType> infer_embedding_grad(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::EmbeddingGrad;
  VOLTA_RETURN_IF_ERROR(require_int(op, in[0], "ids"));
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "dy"));
  VOLTA_ASSIGN_OR_RETURN(int64_t rows, tagged(op, attrs.get_int("rows", 0)));
  if (rows < 0 || rows > (int64_t{1} << 40)) return fail(op, "rows must be in [0, 2^40], got " + std::to_string(rows));
  const Shape& ids = in[0].shape;
  const Shape& dy = in[1].shape;
  if (dy.size() != ids.size() + 1 || !std::equal(ids.begin(), ids.end(), dy.begin()))
    return fail(op, "dy " + in[1].to_string() + " must be ids " + in[0].to_string() + " plus one trailing dim");
  return TensorType{DType::f32, {rows, dy.back()}};
}

Result<TensorType> infer_cross_entropy_grad(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::CrossEntropyGrad;
  VOLTA_RETURN_IF_ERROR(infer_cross_entropy(in.subspan(0, 2), attrs).status());
  if (in[2] != TensorType{DType::f32, {}}) return fail(op, "dloss must be f32[], got " + in[2].to_string());
  return in[0];
}

Result<TensorType> infer_grad_norm(std::span<const TensorType> in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].dtype != DType::f32)
      return fail(Op::GradNorm, "gradient " + std::to_string(i) + " must be f32, got " + in[i].to_string());
  return TensorType{DType::f64, {}};
}

Result<TensorType> infer_optimizer_update(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::OptimizerUpdate;
  VOLTA_ASSIGN_OR_RETURN(const std::string kind, tagged(op, attrs.get_string("kind", "")));
  const size_t slots = in.size() - 5;
  if (kind == "sgd") {
    if (slots > 1) return fail(op, "sgd takes at most one state slot (the momentum buffer), got " + std::to_string(slots));
  } else if (kind == "adam" || kind == "adamw") {
    if (slots != 2) return fail(op, kind + " takes two state slots (m, v), got " + std::to_string(slots));
  } else {
    return fail(op, "attribute 'kind' must be sgd, adam or adamw, got '" + kind + "'");
  }
  if (in[0].dtype != DType::f32) return fail(op, "param must be f32, got " + in[0].to_string());
  if (in[1] != in[0]) return fail(op, "gradient " + in[1].to_string() + " must have the param's type " + in[0].to_string());
  if (in[2] != TensorType{DType::f64, {}}) return fail(op, "norm must be f64[], got " + in[2].to_string());
  if (in[3] != TensorType{DType::f64, {}}) return fail(op, "lr must be f64[], got " + in[3].to_string());
  if (in[4] != TensorType{DType::i64, {}}) return fail(op, "step must be i64[], got " + in[4].to_string());
  for (size_t i = 5; i < in.size(); ++i)
    if (in[i] != in[0]) return fail(op, "state slot " + in[i].to_string() + " must have the param's type " + in[0].to_string());
  for (const char* key : {"beta1", "beta2", "eps", "momentum", "weight_decay", "clip"}) {
    VOLTA_ASSIGN_OR_RETURN(const double v, tagged(op, attrs.get_float(key, 0.0)));
    if (!std::isfinite(v)) return fail(op, std::string("attribute '") + key + "' must be finite");
  }
  return TensorType{DType::f32, {}};
}

Result<TensorType> infer_increment(std::span<const TensorType> in) {
  if (in[0] != TensorType{DType::i64, {}}) return fail(Op::Increment, "counter must be i64[], got " + in[0].to_string());
  return in[0];
}

Result<TensorType> infer_equal(std::span<const TensorType> in) {
  const Op op = Op::Equal;
  if (in[0].dtype != in[1].dtype) return fail(op, "a and b differ in dtype: " + in[0].to_string() + " vs " + in[1].to_string());
  auto s = broadcast_shapes(in[0].shape, in[1].shape);
  if (!s.is_ok()) return fail(op, "shapes " + in[0].to_string() + " and " + in[1].to_string() + " do not broadcast");
  return TensorType{DType::f32, *s};
}


// ---- Ops added for ONNX import ----------------------------------------------------------

Result<TensorType> infer_unary_extra(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  if (op == Op::LeakyRelu) VOLTA_RETURN_IF_ERROR(tagged(op, attrs.get_float("alpha", 0.01)).status());
  if (op == Op::Clip) {
    VOLTA_ASSIGN_OR_RETURN(double lo, tagged(op, attrs.get_float("min", -std::numeric_limits<double>::infinity())));
    VOLTA_ASSIGN_OR_RETURN(double hi, tagged(op, attrs.get_float("max", std::numeric_limits<double>::infinity())));
    if (std::isnan(lo) || std::isnan(hi)) return fail(op, "min and max must not be nan");
  }
  return in[0];
}

Result<TensorType> infer_cast(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Cast;
  VOLTA_ASSIGN_OR_RETURN(std::string to, tagged(op, attrs.get_string("to", "")));
  auto dt = parse_dtype(to);
  if (!dt.is_ok()) return fail(op, "attribute 'to' must be a dtype (f32, i32, i64, bf16, f16), got \"" + to + "\"");
  return TensorType{*dt, in[0].shape};
}

Result<TensorType> infer_gather(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Gather;
  VOLTA_RETURN_IF_ERROR(require_int(op, in[1], "indices"));
  VOLTA_ASSIGN_OR_RETURN(int64_t axis_attr, tagged(op, attrs.get_int("axis", 0)));
  if (in[0].shape.empty()) return fail(op, "cannot gather from a scalar");
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(op, axis_attr, in[0].shape.size()));
  const Shape& x = in[0].shape;
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), in[1].shape.begin(), in[1].shape.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  return TensorType{in[0].dtype, out};
}

Result<TensorType> infer_trilu(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Trilu;
  VOLTA_ASSIGN_OR_RETURN(int64_t upper, tagged(op, attrs.get_int("upper", 1)));
  VOLTA_RETURN_IF_ERROR(tagged(op, attrs.get_int("k", 0)).status());
  if (upper != 0 && upper != 1) return fail(op, "attribute 'upper' must be 0 or 1, got " + std::to_string(upper));
  if (in[0].shape.size() < 2) return fail(op, "x must have rank >= 2, got " + in[0].to_string());
  return in[0];
}

Result<TensorType> infer_gather_grad(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::GatherGrad;
  VOLTA_RETURN_IF_ERROR(require_int(op, in[0], "indices"));
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "dy"));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int64_t> shape, tagged(op, attrs.get_ints("shape")));
  for (int64_t d : shape)
    if (d < 0 || d > (int64_t{1} << 40)) return fail(op, "bad dim in shape " + shape_to_string(shape));
  VOLTA_ASSIGN_OR_RETURN(TensorType y, infer_gather(std::vector<TensorType>{{DType::f32, shape}, in[0]}, attrs));
  if (y.shape != in[1].shape) return fail(op, "dy must be " + shape_to_string(y.shape) + ", got " + in[1].to_string());
  return TensorType{DType::f32, shape};
}

}  // namespace

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "int";
    case AttrKind::Float: return "float";
    case AttrKind::Str: return "string";
    case AttrKind::Ints: return "int list";
  }
  return "?";
}

const AttrSpec* OpInfo::attr(std::string_view key) const {
  for (const AttrSpec& a : attrs) {
    if (a.name == nullptr) break;
    if (key == a.name) return &a;
  }
  return nullptr;
}

size_t OpInfo::num_attrs() const {
  size_t n = 0;
  while (n < attrs.size() && attrs[n].name != nullptr) ++n;
  return n;
}

Status check_attrs(Op op, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  for (const auto& [key, value] : attrs.items()) {
    const AttrSpec* spec = info.attr(key);
    if (spec == nullptr) return fail(op, "unknown attribute '" + key + "'");
    const bool ok = spec->kind == AttrKind::Int     ? std::holds_alternative<int64_t>(value)
                    : spec->kind == AttrKind::Float ? std::holds_alternative<double>(value) || std::holds_alternative<int64_t>(value)
                    : spec->kind == AttrKind::Str   ? std::holds_alternative<std::string>(value)
                                                    : std::holds_alternative<std::vector<int64_t>>(value);
    if (!ok) return fail(op, "attribute '" + key + "' must be " + std::string(attr_kind_name(spec->kind)[0] == 'i' ? "an " : "a ") + attr_kind_name(spec->kind));
  }
  for (size_t i = 0; i < info.num_attrs(); ++i) {
    const AttrSpec& spec = info.attrs[i];
    if (spec.presence == AttrPresence::Required && !attrs.has(spec.name))
      return fail(op, std::string("missing attribute '") + spec.name + "'");
  }
  return Status::ok();
}

Result<Op> parse_op(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOpTable[static_cast<size_t>(i)].name) return static_cast<Op>(i);
  return invalid_argument("unknown op '" + std::string(name) + "'");
}

bool is_leaf(Op op) { return op == Op::Input || op == Op::Param || op == Op::Constant; }

bool writes_input(Op op, size_t i) {
  if (op == Op::OptimizerUpdate) return i == 0 || i >= 5;  // the param and its slots
  if (op == Op::Increment || op == Op::CacheWrite) return i == 0;
  if (op == Op::CacheAttention) return i == 1 || i == 2;  // the caches
  return false;
}

bool output_is_input(Op op) { return op == Op::CacheWrite; }

bool op_allows_attr(Op op, std::string_view attr) { return op_info(op).attr(attr) != nullptr; }

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return invalid_argument("shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Result<TensorType> infer_type(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  int n = static_cast<int>(in.size());
  if (n < info.min_inputs || n > info.max_inputs) {
    std::string want = info.min_inputs == info.max_inputs ? std::to_string(info.min_inputs)
                                                          : std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
    return fail(op, "takes " + want + " inputs but got " + std::to_string(n));
  }
  VOLTA_RETURN_IF_ERROR(check_attrs(op, attrs));
  for (size_t i = 0; i < in.size(); ++i)
    if (is_half(in[i].dtype) && !(op == Op::Matmul && i == 1) && op != Op::Cast)
      return fail(op, "input " + std::to_string(i) + " is " + in[i].to_string() +
                          ": bf16 and f16 values are weights, read only as a matmul's right operand or a cast");
  switch (op) {
    case Op::Input:
    case Op::Param:
    case Op::Constant: return fail(op, "leaves have declared types");
    case Op::Matmul: return infer_matmul(in, attrs);
    // The fusable elementwise ops (Unary and Binary rows): one rule per arity.
#define VOLTA_OP(Id, name, min_in, max_in, category, ...) VOLTA_IF_FUSABLE(category, case Op::Id:)
#include "volta/ops.def"
#undef VOLTA_OP
      return elementwise_arity(op) == 2 ? infer_binary(op, in) : infer_unary(op, in, attrs);
    case Op::Gelu: case Op::Softmax: case Op::LogSoftmax: return infer_unary(op, in, attrs);
    case Op::LayerNorm: case Op::RmsNorm: return infer_norm(op, in, attrs);
    case Op::Attention: return infer_attention(in, attrs);
    case Op::AttentionGrad: return infer_attention_grad(in, attrs);
    case Op::FusedElementwise: return infer_fused_elementwise(in, attrs);
    case Op::Embedding: return infer_embedding(in);
    case Op::Reshape: return infer_reshape(in, attrs);
    case Op::Transpose: return infer_transpose(in, attrs);
    case Op::Slice: return infer_slice(in, attrs);
    case Op::Concat: return infer_concat(in, attrs);
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: return infer_reduce(op, in, attrs);
    case Op::Where: return infer_where(in);
    case Op::CausalMask: return infer_causal_mask(in, attrs);
    case Op::CrossEntropy: return infer_cross_entropy(in, attrs);
    case Op::Mse: return infer_mse(in);
    case Op::Broadcast: return infer_broadcast(in, attrs);
    case Op::Pad: return infer_pad(in, attrs);
    case Op::Equal: return infer_equal(in);
    case Op::ReluGrad: case Op::GeluGrad: case Op::SoftmaxGrad: case Op::SiluGrad: return infer_pointwise_grad(op, in, attrs);
    case Op::LayerNormGrad: case Op::RmsNormGrad: return infer_norm_grad(op, in, attrs);
    case Op::EmbeddingGrad: return infer_embedding_grad(in, attrs);
    case Op::CrossEntropyGrad: return infer_cross_entropy_grad(in, attrs);
    case Op::Clip: case Op::LeakyRelu: return infer_unary_extra(op, in, attrs);
    case Op::Cast: return infer_cast(in, attrs);
    case Op::Gather: return infer_gather(in, attrs);
    case Op::Trilu: return infer_trilu(in, attrs);
    case Op::Conv2d: case Op::Conv2dGradInput: case Op::Conv2dGradWeight: return infer_conv2d(op, in, attrs);
    case Op::MaxPool: case Op::AvgPool: case Op::MaxPoolGrad: case Op::AvgPoolGrad: return infer_pool(op, in, attrs);
    case Op::GatherGrad: return infer_gather_grad(in, attrs);
    case Op::GradNorm: return infer_grad_norm(in);
    case Op::OptimizerUpdate: return infer_optimizer_update(in, attrs);
    case Op::Increment: return infer_increment(in);
    case Op::CacheWrite: return infer_cache_write(in, attrs);
    case Op::CacheAttention: return infer_cache_attention(in, attrs);
    case Op::Rope: return infer_rope(in);
    case Op::Swiglu: case Op::SwigluGrad: return infer_swiglu(op, in);
    case Op::Less: case Op::LessEqual: return infer_compare(op, in);
    case Op::GatherElements: return infer_gather_elements(in, attrs);
    case Op::GatherNd: return infer_gather_nd(in, attrs);
    case Op::ScatterNd: return infer_scatter_nd(in, attrs);
    case Op::Cumsum: return infer_cumsum(in, attrs);
    case Op::TopK: return infer_top_k(in, attrs);
    case Op::ArgMax: return infer_arg_max(in, attrs);
    case Op::NormParamGrad: return infer_norm_param_grad(in, attrs);
    case Op::BitwiseAnd: return infer_binary(op, in);
    case Op::GeluAndGrad: return infer_gelu_and_grad(in);
  }
  return internal_error("infer_type: op without a rule");
}

}  // namespace volta::ir
