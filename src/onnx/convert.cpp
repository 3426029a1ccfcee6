// The ONNX importer's converter table: each family's converters (convert_*.cpp), then one per
// elementwise op whose ONNX op type the op table names (ops.def's ONNX column), unless a family
// writes it (Pow: its exponent may be an integer). The helpers the families share.
#include "onnx/convert.h"

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

bool is_int(ElemType t) { return t == ElemType::kInt32 || t == kInt64; }

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

Status convert(Importer& im) {
  auto it = converters().find(im.node().op_type());
  if (it == converters().end()) return im.unsupported("op type '" + im.node().op_type() + "' is not supported");
  return it->second(im);
}

}  // namespace volta::onnx
