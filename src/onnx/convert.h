// Internal to the ONNX importer: the converters, one per ONNX op type, by family
// (convert_math.cpp, convert_vision.cpp, convert_constants.cpp, convert_layout.cpp,
// convert_sequence.cpp, ...), and the
// helpers they share (convert.cpp). A converter reads the node's attributes and inputs in the
// form its opset defines and emits IR ops; shape operands are read as constants, so the IR graph
// is fully static. Anything not handled fails naming the attribute or input.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "onnx/importer.h"

namespace volta::onnx::conv {

using ir::Op;
using ConverterMap = std::map<std::string, std::function<Status(Importer&)>>;

constexpr ElemType kFloat = ElemType::kFloat, kBool = ElemType::kBool, kInt64 = ElemType::kInt64;

std::string type_name(ElemType t);
Status require_float(Importer& im, size_t k);
// Normalises an axis for `rank`, naming the attribute or input it came from.
Result<int64_t> axis_for(Importer& im, int64_t axis, size_t rank, const std::string& what);
// y = op(x) for the float unary ops.
Status unary(Importer& im, Op op, ir::Attrs attrs = {});
Status binary(Importer& im, Op op);
Status simple_unary(Importer& im, Op op);

// Integer types: any of them, and those held in a wider Volta dtype (ElemType's comment).
bool is_int(ElemType t);
bool is_narrow_int(ElemType t);
Result<int32_t> int_constant(Importer& im, DType dtype, int64_t v);
// y narrowed to the width of ONNX type t (the low bits, sign-extended for the signed types);
// y itself for types that fill their dtype.
Result<int32_t> wrap_to(Importer& im, int32_t y, ElemType t);
// a < b (a <= b with or_equal) as BOOL, for values of ONNX type t (UINT64 compared unsigned).
Result<int32_t> less(Importer& im, int32_t a, int32_t b, ElemType t, bool or_equal = false);

// Integer Add, Sub, Mul, Div, Pow, Neg, Abs, Sign, Relu: the IR's integer math on the values'
// dtype (folded at import when the operands are known), narrowed to the ONNX type's width
// (convert_logic.cpp).
Status integer_arithmetic(Importer& im, Op op);

// Each family adds its converters, keyed by ONNX op type.
void add_math(ConverterMap& t);
void add_vision(ConverterMap& t);
void add_constants(ConverterMap& t);
void add_layout(ConverterMap& t);
void add_logic(ConverterMap& t);
void add_index(ConverterMap& t);
void add_sequence(ConverterMap& t);

}  // namespace volta::onnx::conv
