// The ONNX converters of comparisons and logic (Less, Greater, LessOrEqual, GreaterOrEqual, Not,
// And, Or, Xor, IsNaN, IsInf, Max, Min), Size, and integer arithmetic. BOOL values are f32 0/1
// in Volta, so the logic ops are exact f32 arithmetic or selects on them. Integer arithmetic
// (the shape computations of exported graphs) is evaluated at import: its operands must be
// known then, and a run-time integer operand is refused naming the op.
#include <cmath>
#include <limits>

#include "onnx/convert.h"

namespace volta::onnx::conv {

namespace {

Status require_bool(Importer& im, size_t k) {
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(k));
  if (t != kBool) return im.unsupported("input " + std::to_string(k) + " has type " + type_name(t) + "; only BOOL is supported");
  return Status::ok();
}

// Less / Greater (swapped), LessOrEqual / GreaterOrEqual (swapped): any one dtype on both sides.
Status compare(Importer& im, Op op, bool swap) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType ta, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType tb, im.input_type(1));
  if (ta != tb) return im.fail("inputs differ in type: " + type_name(ta) + " vs " + type_name(tb));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, swap ? im.emit(op, {b, a}) : im.emit(op, {a, b}));
  return im.set_output(0, y, kBool);
}

Status not_op(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_bool(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Sub, {one, x}));
  return im.set_output(0, y, kBool);
}

enum class Logic { And, Or, Xor };

// On 0/1: and = where(a, b, 0), or = where(a, 1, b), xor = 1 - (a == b).
Status logic(Importer& im, Logic kind) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_RETURN_IF_ERROR(require_bool(im, 0));
  VOLTA_RETURN_IF_ERROR(require_bool(im, 1));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  int32_t y = -1;
  if (kind == Logic::Xor) {
    VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
    VOLTA_ASSIGN_OR_RETURN(int32_t eq, im.emit(Op::Equal, {a, b}));
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Sub, {one, eq}));
  } else {
    VOLTA_ASSIGN_OR_RETURN(int32_t c, im.scalar(kind == Logic::And ? 0.0f : 1.0f));
    VOLTA_ASSIGN_OR_RETURN(y, kind == Logic::And ? im.emit(Op::Where, {a, b, c}) : im.emit(Op::Where, {a, c, b}));
  }
  return im.set_output(0, y, kBool);
}

// Constant false (or true) in x's shape, for an integer IsNaN / IsInf.
Status constant_bool(Importer& im, int32_t x, float v) {
  Tensor t = Tensor::zeros(DType::f32, im.type(x).shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(t));
  return im.set_output(0, y, kBool);
}

Status is_nan(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  if (t != kFloat) return constant_bool(im, x, 0.0f);
  VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
  VOLTA_ASSIGN_OR_RETURN(int32_t self_equal, im.emit(Op::Equal, {x, x}));  // false only for nan
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Sub, {one, self_equal}));
  return im.set_output(0, y, kBool);
}

Status is_inf(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({"detect_negative", "detect_positive"}));
  VOLTA_ASSIGN_OR_RETURN(int64_t neg, im.attr_int("detect_negative", 1));
  VOLTA_ASSIGN_OR_RETURN(int64_t pos, im.attr_int("detect_positive", 1));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  if (t != kFloat || (!neg && !pos)) return constant_bool(im, x, 0.0f);
  const float inf = std::numeric_limits<float>::infinity();
  int32_t v = x;
  if (neg && pos) {
    VOLTA_ASSIGN_OR_RETURN(v, im.emit(Op::Abs, {x}));
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t target, im.scalar(pos ? inf : -inf));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::Equal, {v, target}));
  return im.set_output(0, y, kBool);
}

// Max / Min of any number of inputs (numpy broadcasting), folded left: max(a, b) is
// where(a < b, b, a); for floats a nan in b is kept too (numpy's maximum propagates nan).
Status extremum(Importer& im, bool is_max) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  if (im.num_inputs() == 0) return im.fail("needs at least one input");
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.input(0));
  for (size_t k = 1; k < im.num_inputs(); ++k) {
    VOLTA_ASSIGN_OR_RETURN(ElemType tk, im.input_type(k));
    if (tk != t) return im.fail("inputs differ in type: " + type_name(t) + " vs " + type_name(tk));
    VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(k));
    VOLTA_ASSIGN_OR_RETURN(int32_t b_wins, is_max ? im.emit(Op::Less, {y, b}) : im.emit(Op::Less, {b, y}));
    if (t == kFloat) {
      VOLTA_ASSIGN_OR_RETURN(int32_t b_number, im.emit(Op::Equal, {b, b}));
      VOLTA_ASSIGN_OR_RETURN(int32_t one, im.scalar(1.0f));
      VOLTA_ASSIGN_OR_RETURN(int32_t b_nan, im.emit(Op::Sub, {one, b_number}));
      VOLTA_ASSIGN_OR_RETURN(b_wins, im.emit(Op::Where, {b_nan, one, b_wins}));
    }
    VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Where, {b_wins, b, y}));
  }
  return im.set_output(0, y, t);
}

Status size_op(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(Tensor::from_i64({}, {im.type(x).numel()})));
  return im.set_output(0, y, kInt64);
}

int64_t int_at(const Tensor& t, int64_t i) { return t.dtype() == DType::i32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i]; }

// Wrapping two's-complement arithmetic, as the integer ops of ONNX runtimes do.
int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

}  // namespace

Status integer_arithmetic(Importer& im, Op op) {
  const size_t n = static_cast<size_t>(ir::elementwise_arity(op));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  std::vector<Tensor> v;
  for (size_t k = 0; k < n; ++k) {
    VOLTA_ASSIGN_OR_RETURN(ElemType tk, im.input_type(k));
    if (tk != t) return im.fail("inputs differ in type: " + type_name(t) + " vs " + type_name(tk));
    auto known = im.constant_input(k);
    if (!known.is_ok())
      return im.unsupported("integer " + im.node().op_type() + " of a value computed at run time is not supported (integer " +
                            "arithmetic, the graph's shape computations, is evaluated at import)");
    v.push_back(std::move(known).value());
  }
  Shape shape = v[0].shape();
  if (n == 2) {
    auto s = ir::broadcast_shapes(v[0].shape(), v[1].shape());
    if (!s.is_ok()) return im.fail(s.status().message());
    shape = *s;
  }
  int64_t count = 1;  // evaluated here, so bounded like every value evaluated at import
  for (int64_t d : shape) count = d > 0 && count > (int64_t{1} << 16) / d ? (int64_t{1} << 16) + 1 : count * d;
  if (count > (int64_t{1} << 16))
    return im.unsupported("integer " + im.node().op_type() + " of " + shape_to_string(shape) + " is too large to evaluate at import");
  Tensor out = Tensor::zeros(v[0].dtype(), shape);
  const auto rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  auto offset = [&](const Tensor& x) {  // numpy broadcasting, right-aligned
    int64_t off = 0, stride = 1;
    for (size_t d = x.shape().size(); d-- > 0;) {
      const int64_t dim = x.shape()[d];
      if (dim != 1) off += idx[rank - x.shape().size() + d] * stride;
      stride *= dim;
    }
    return off;
  };
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t a = int_at(v[0], offset(v[0]));
    const int64_t b = n == 2 ? int_at(v[1], offset(v[1])) : 0;
    int64_t r = 0;
    switch (op) {
      case Op::Add: r = wrap_add(a, b); break;
      case Op::Sub: r = wrap_add(a, wrap_mul(b, -1)); break;
      case Op::Mul: r = wrap_mul(a, b); break;
      case Op::Div:
        if (b == 0) return im.fail("integer division by zero at import");
        r = (a == std::numeric_limits<int64_t>::min() && b == -1) ? a : a / b;  // truncates, as C and ONNX runtimes
        break;
      case Op::Neg: r = wrap_mul(a, -1); break;
      case Op::Abs: r = a < 0 ? wrap_mul(a, -1) : a; break;
      case Op::Sign: r = (a > 0) - (a < 0); break;
      default: return im.unsupported("integer " + im.node().op_type() + " is not supported (only FLOAT)");
    }
    if (out.dtype() == DType::i32) out.data<int32_t>()[i] = static_cast<int32_t>(r);
    else out.data<int64_t>()[i] = r;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.constant(std::move(out)));
  return im.set_output(0, y, t);
}

void add_logic(ConverterMap& t) {
  t.insert({
      {"Less", [](Importer& im) { return compare(im, Op::Less, false); }},
      {"Greater", [](Importer& im) { return compare(im, Op::Less, true); }},
      {"LessOrEqual", [](Importer& im) { return compare(im, Op::LessEqual, false); }},
      {"GreaterOrEqual", [](Importer& im) { return compare(im, Op::LessEqual, true); }},
      {"Not", not_op},
      {"And", [](Importer& im) { return logic(im, Logic::And); }},
      {"Or", [](Importer& im) { return logic(im, Logic::Or); }},
      {"Xor", [](Importer& im) { return logic(im, Logic::Xor); }},
      {"IsNaN", is_nan},
      {"IsInf", is_inf},
      {"Max", [](Importer& im) { return extremum(im, true); }},
      {"Min", [](Importer& im) { return extremum(im, false); }},
      {"Size", size_op},
  });
}

}  // namespace volta::onnx::conv
