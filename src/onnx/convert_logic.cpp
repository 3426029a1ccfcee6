// The ONNX converters of comparisons and logic (Less, Greater, LessOrEqual, GreaterOrEqual, Not,
// And, Or, Xor, IsNaN, IsInf, Max, Min), Size, BitwiseAnd and integer arithmetic. BOOL values
// are f32 0/1 in Volta, so the logic ops are exact f32 arithmetic or selects on them. Integer
// arithmetic is the IR's (folded at import when its operands are known, as the shape
// computations of exported graphs are), narrowed back to the ONNX type's width.
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
Status compare(Importer& im, bool or_equal, bool swap) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType ta, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType tb, im.input_type(1));
  if (ta != tb) return im.fail("inputs differ in type: " + type_name(ta) + " vs " + type_name(tb));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, swap ? less(im, b, a, ta, or_equal) : less(im, a, b, ta, or_equal));
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
    VOLTA_ASSIGN_OR_RETURN(int32_t b_wins, is_max ? less(im, y, b, t) : less(im, b, y, t));
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

}  // namespace

Status integer_arithmetic(Importer& im, Op op) {
  const size_t n = static_cast<size_t>(ir::elementwise_arity(op));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  std::vector<int32_t> in;
  for (size_t k = 0; k < n; ++k) {
    VOLTA_ASSIGN_OR_RETURN(ElemType tk, im.input_type(k));
    if (tk != t) return im.fail("inputs differ in type: " + type_name(t) + " vs " + type_name(tk));
    VOLTA_ASSIGN_OR_RETURN(int32_t v, im.input(k));
    in.push_back(v);
  }
  if (t == ElemType::kUint64 && (op == Op::Div || op == Op::Pow))
    return im.unsupported("UINT64 " + im.node().op_type() + " is not supported (UINT64 values are held in i64 as their bits)");
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, in));
  VOLTA_ASSIGN_OR_RETURN(y, wrap_to(im, y, t));
  return im.set_output(0, y, t);
}

namespace {

Status bitwise_and(Importer& im) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  VOLTA_ASSIGN_OR_RETURN(ElemType t2, im.input_type(1));
  if (!is_int(t) || t2 != t) return im.unsupported("inputs must be integers of one type, got " + type_name(t) + " and " + type_name(t2));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(Op::BitwiseAnd, {a, b}));
  return im.set_output(0, y, t);
}

}  // namespace

void add_logic(ConverterMap& t) {
  t.insert({
      {"Less", [](Importer& im) { return compare(im, false, false); }},
      {"Greater", [](Importer& im) { return compare(im, false, true); }},
      {"LessOrEqual", [](Importer& im) { return compare(im, true, false); }},
      {"GreaterOrEqual", [](Importer& im) { return compare(im, true, true); }},
      {"Not", not_op},
      {"And", [](Importer& im) { return logic(im, Logic::And); }},
      {"Or", [](Importer& im) { return logic(im, Logic::Or); }},
      {"Xor", [](Importer& im) { return logic(im, Logic::Xor); }},
      {"IsNaN", is_nan},
      {"IsInf", is_inf},
      {"Max", [](Importer& im) { return extremum(im, true); }},
      {"Min", [](Importer& im) { return extremum(im, false); }},
      {"Size", size_op},
      {"BitwiseAnd", bitwise_and},
  });
}

}  // namespace volta::onnx::conv
