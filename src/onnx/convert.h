// Internal to the ONNX importer: the converters, one per ONNX op type, by family
// (convert_math.cpp, convert_vision.cpp, convert_constants.cpp, convert_layout.cpp), and the
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

// Integer Add, Sub, Mul, Div, Neg, Abs, Sign: evaluated at import when the operands are known
// (shape arithmetic), refused otherwise (convert_logic.cpp).
Status integer_arithmetic(Importer& im, Op op);

// Each family adds its converters, keyed by ONNX op type.
void add_math(ConverterMap& t);
void add_vision(ConverterMap& t);
void add_constants(ConverterMap& t);
void add_layout(ConverterMap& t);
void add_logic(ConverterMap& t);
void add_index(ConverterMap& t);

}  // namespace volta::onnx::conv
