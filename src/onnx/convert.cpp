// The ONNX importer's converter table: each family's converters (convert_*.cpp), then one per
// elementwise op whose ONNX op type the op table names (ops.def's ONNX column), unless a family
// writes it (Pow: its exponent may be an integer). The helpers the families share.
#include "onnx/convert.h"

#include <limits>
#include <set>

#include <onnx/defs/schema.h>

namespace volta::onnx {

namespace conv {

std::string type_name(ElemType t) { return elem_type_name(static_cast<int32_t>(t)); }

Status require_float(Importer& im, size_t k) {
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(k));
  if (t != kFloat) return im.unsupported("input " + std::to_string(k) + " has type " + type_name(t) + "; only FLOAT is supported");
  return Status::ok();
}

Result<int64_t> axis_for(Importer& im, int64_t axis, size_t rank, const std::string& what) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    return im.fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + r : axis;
}

Status unary(Importer& im, Op op, ir::Attrs attrs) {
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_ASSIGN_OR_RETURN(int32_t x, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {x}, std::move(attrs)));
  return im.set_output(0, y, kFloat);
}

bool is_narrow_int(ElemType t) {
  return t == ElemType::kInt8 || t == ElemType::kUint8 || t == ElemType::kInt16 || t == ElemType::kUint16 ||
         t == ElemType::kUint32 || t == ElemType::kUint64;
}
bool is_int(ElemType t) { return t == ElemType::kInt32 || t == kInt64 || is_narrow_int(t); }

Result<int32_t> int_constant(Importer& im, DType dtype, int64_t v) {
  return im.constant(dtype == DType::i32 ? Tensor::from_i32({}, {static_cast<int32_t>(v)}) : Tensor::from_i64({}, {v}));
}

// y's values (of t's Volta dtype) reduced to t's width: the low bits, sign-extended for the
// signed types ((y + 2^(w-1)) & (2^w - 1)) - 2^(w-1)).
Result<int32_t> wrap_to(Importer& im, int32_t y, ElemType t) {
  int bits = 0;
  const bool is_signed = t == ElemType::kInt8 || t == ElemType::kInt16;
  switch (t) {
    case ElemType::kInt8: case ElemType::kUint8: bits = 8; break;
    case ElemType::kInt16: case ElemType::kUint16: bits = 16; break;
    case ElemType::kUint32: bits = 32; break;
    default: return y;
  }
  const DType d = im.type(y).dtype;
  const int64_t half = int64_t{1} << (bits - 1), mask = (int64_t{1} << bits) - 1;
  VOLTA_ASSIGN_OR_RETURN(int32_t m, int_constant(im, d, mask));
  if (!is_signed) return im.emit(Op::BitwiseAnd, {y, m});
  VOLTA_ASSIGN_OR_RETURN(int32_t h, int_constant(im, d, half));
  VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::Add, {y, h}));
  VOLTA_ASSIGN_OR_RETURN(y, im.emit(Op::BitwiseAnd, {y, m}));
  return im.emit(Op::Sub, {y, h});
}

// a < b (or a <= b) for values of ONNX type t, as f32 0/1. UINT64 values are held in i64 as
// their bits: adding 2^63 (wrapping) to both maps their order onto the signed one.
Result<int32_t> less(Importer& im, int32_t a, int32_t b, ElemType t, bool or_equal) {
  if (t == ElemType::kUint64) {
    VOLTA_ASSIGN_OR_RETURN(int32_t top, int_constant(im, DType::i64, std::numeric_limits<int64_t>::min()));
    VOLTA_ASSIGN_OR_RETURN(a, im.emit(Op::Add, {a, top}));
    VOLTA_ASSIGN_OR_RETURN(b, im.emit(Op::Add, {b, top}));
  }
  return im.emit(or_equal ? Op::LessEqual : Op::Less, {a, b});
}

Status binary(Importer& im, Op op) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  if (is_int(t)) return integer_arithmetic(im, op);
  VOLTA_RETURN_IF_ERROR(require_float(im, 0));
  VOLTA_RETURN_IF_ERROR(require_float(im, 1));
  VOLTA_ASSIGN_OR_RETURN(int32_t a, im.input(0));
  VOLTA_ASSIGN_OR_RETURN(int32_t b, im.input(1));
  VOLTA_ASSIGN_OR_RETURN(int32_t y, im.emit(op, {a, b}));
  return im.set_output(0, y, kFloat);
}

Status simple_unary(Importer& im, Op op) {
  VOLTA_RETURN_IF_ERROR(im.allow_attrs({}));
  VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(0));
  if (is_int(t)) return integer_arithmetic(im, op);
  return unary(im, op);
}

}  // namespace conv

namespace {

using conv::ConverterMap;

const ConverterMap& converters() {
  static const ConverterMap table = [] {
    ConverterMap t;
    conv::add_math(t);
    conv::add_vision(t);
    conv::add_constants(t);
    conv::add_layout(t);
    conv::add_logic(t);
    conv::add_index(t);
    conv::add_sequence(t);
    for (int i = 0; i < ir::kNumOps; ++i) {
      const ir::Op op = static_cast<ir::Op>(i);
      const ir::OpInfo& info = ir::op_info(op);
      if (*info.onnx == '\0' || ir::elementwise_arity(op) == 0) continue;
      if (info.category == ir::OpCategory::Unary) t.emplace(info.onnx, [op](Importer& im) { return conv::simple_unary(im, op); });
      else t.emplace(info.onnx, [op](Importer& im) { return conv::binary(im, op); });
    }
    return t;
  }();
  return table;
}

}  // namespace

bool is_supported_op(const std::string& op_type) { return converters().count(op_type) != 0; }

namespace {

// The ONNX op types whose converters take the integer types held in a wider dtype (INT8, UINT8,
// INT16, UINT16, UINT32, UINT64): they move or compare values, or narrow what they compute.
bool takes_narrow_ints(const std::string& op_type) {
  static const std::set<std::string> ops = {
      "Abs", "Add", "BitwiseAnd", "Cast", "CastLike", "Clip", "Concat", "Div", "Equal", "Expand", "Flatten", "Gather",
      "GatherElements", "GatherND", "Greater", "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "MaxPool",
      "Min", "Mul", "Neg", "Pow", "Relu", "Reshape", "ScatterND", "Shape", "Sign", "Size", "Slice", "Split", "Squeeze",
      "Sub", "Tile", "Transpose", "Unsqueeze", "Where", "SequenceConstruct", "SequenceAt", "SequenceInsert",
      "SequenceErase", "ConcatFromSequence", "SplitToSequence", "SequenceLength", "Optional", "OptionalHasElement",
      "OptionalGetElement"};
  return ops.count(op_type) != 0;
}

}  // namespace

namespace {

// The node's input and output counts against its op's schema, and its attribute names unique:
// a converter reads the inputs it knows, so an extra one would be dropped without a word (a
// missing one the converter names). Only at opsets the ONNX library knows: at a later one its
// schema could be an older form of the op.
Status check_node_form(Importer& im) {
  const ::onnx::NodeProto& node = im.node();
  std::set<std::string> seen;
  for (const auto& a : node.attribute())
    if (!seen.insert(a.name()).second) return im.fail("attribute '" + a.name() + "' is given twice");
  const auto& known = ::onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto last = known.find(::onnx::ONNX_DOMAIN);
  if (last == known.end() || im.opset() > last->second.second) return Status::ok();
  const ::onnx::OpSchema* schema = ::onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(im.opset()), ::onnx::ONNX_DOMAIN);
  if (schema == nullptr) return Status::ok();
  if (node.input_size() > schema->max_input())
    return im.fail("has " + std::to_string(node.input_size()) + " inputs; the op takes at most " + std::to_string(schema->max_input()));
  if (node.output_size() > schema->max_output())
    return im.fail("has " + std::to_string(node.output_size()) + " outputs; the op gives at most " + std::to_string(schema->max_output()));
  return Status::ok();
}

}  // namespace

Status convert(Importer& im) {
  auto it = converters().find(im.node().op_type());
  if (it == converters().end()) return im.unsupported("op type '" + im.node().op_type() + "' is not supported");
  VOLTA_RETURN_IF_ERROR(check_node_form(im));
  const bool narrow_ok = takes_narrow_ints(im.node().op_type()), string_ok = im.node().op_type() == "Cast";
  for (size_t k = 0; k < im.num_inputs(); ++k) {
    if (!im.has_input(k)) continue;
    VOLTA_ASSIGN_OR_RETURN(ElemType t, im.input_type(k));
    if (t == ElemType::kString && !string_ok)
      return im.unsupported("input " + std::to_string(k) + " has type STRING, which only a Cast to a float type takes");
    if (conv::is_narrow_int(t) && !narrow_ok)
      return im.unsupported("input " + std::to_string(k) + " has type " + conv::type_name(t) + ", which only the " +
                            "arithmetic, comparison, selection and layout ops take");
  }
  return it->second(im);
}

}  // namespace volta::onnx
