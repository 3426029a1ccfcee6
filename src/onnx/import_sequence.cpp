// The importer's sequence and optional values: graph inputs and outputs of those types, and the
// access the sequence converters (convert_sequence.cpp) and Identity use. A sequence's length is
// known at import (from an input's given value, or from the ops that build it), so each element
// is an IR value of its own and the IR graph stays a static graph of tensors.
#include "onnx/importer.h"

namespace volta::onnx {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// An element's shape against the declared one (-1 dims and an undeclared shape take anything).
bool fits(const Shape& declared, const Shape& got) {
  if (declared == Shape{-1}) return true;
  if (declared.size() != got.size()) return false;
  for (size_t d = 0; d < got.size(); ++d)
    if (declared[d] >= 0 && declared[d] != got[d]) return false;
  return true;
}

}  // namespace

const ::onnx::TypeProto_Tensor* inner_tensor_type(const ::onnx::TypeProto& t, bool* sequence, bool* optional) {
  const ::onnx::TypeProto* cur = &t;
  const bool opt = cur->has_optional_type();
  if (opt) cur = &cur->optional_type().elem_type();
  const bool seq = cur->has_sequence_type();
  if (seq) cur = &cur->sequence_type().elem_type();
  if (optional) *optional = opt;
  if (sequence) *sequence = seq;
  return cur->has_tensor_type() ? &cur->tensor_type() : nullptr;
}

Status Importer::bind_sequence_inputs(const std::vector<const ::onnx::ValueInfoProto*>& inputs) {
  for (const auto* in : inputs) {
    const std::string& name = in->name();
    bool sequence = false, optional = false;
    inner_tensor_type(in->type(), &sequence, &optional);
    OnnxValue& v = values_.at(name);
    v.optional = optional;
    const std::string what = origin_ + ": graph input " + quoted(name);
    if (options_.absent_inputs.count(name)) {
      if (!optional) return invalid_argument(what + " is not optional but is given no value");
      v.absent = true;
      v.sequence = sequence;
      continue;
    }
    const auto given = options_.input_sequences.find(name);
    if (!sequence) {
      if (given != options_.input_sequences.end()) return invalid_argument(what + " is a tensor but is given a sequence");
      continue;
    }
    if (given == options_.input_sequences.end() && options_.input_values.count(name))
      return invalid_argument(what + " is a sequence but is given a tensor");
    if (given == options_.input_sequences.end())
      return invalid_argument(what + " is a sequence: give its value (an input file, or ImportOptions::input_sequences), "
                              "which fixes its length and its elements' shapes");
    VOLTA_ASSIGN_OR_RETURN(auto decl, declared_type(*in, "graph input"));
    v.sequence = true;
    v.elem_shape = decl.second.shape;
    for (size_t i = 0; i < given->second.size(); ++i) {
      const Tensor& t = given->second[i];
      if (t.dtype() != decl.second.dtype || !fits(decl.second.shape, t.shape()))
        return invalid_argument(what + " is a sequence of " + declared_string(*in) + " but its element " + std::to_string(i) +
                                " is " + t.type().to_string());
      ir::Node n;
      n.op = ir::Op::Input;
      n.name = fresh_name(name + "/" + std::to_string(i));
      n.type = t.type();
      VOLTA_ASSIGN_OR_RETURN(int32_t id, add_node(std::move(n)));
      v.elements.push_back(id);
    }
  }
  return Status::ok();
}

Result<IoValue> Importer::sequence_input_io(const ::onnx::ValueInfoProto& in, const OnnxValue& v) {
  VOLTA_ASSIGN_OR_RETURN(auto decl, declared_type(in, "graph input"));
  IoValue io;
  io.name = in.name();
  io.onnx_type = decl.first;
  io.type = v.elements.empty() ? decl.second : graph_.node(v.elements[0]).type;
  io.sequence = v.sequence;
  io.elements = v.elements;
  io.optional = v.optional;
  io.absent = v.absent;
  return io;
}

Status Importer::add_sequence_output(const ::onnx::ValueInfoProto& out, const OnnxValue& v, Model& m) {
  VOLTA_ASSIGN_OR_RETURN(auto decl, declared_type(out, "graph output"));
  bool sequence = false, optional = false;
  inner_tensor_type(out.type(), &sequence, &optional);
  const std::string what = origin_ + ": graph output " + quoted(out.name());
  if (v.absent && !optional) return invalid_argument(what + " is declared a " + (sequence ? "sequence" : "tensor") + " but holds nothing");
  if (!v.absent && v.sequence != sequence)
    return invalid_argument(what + " is declared a " + (sequence ? "sequence" : "tensor") + " but the import computes a " +
                            (v.sequence ? "sequence" : "tensor"));
  if (!v.absent && computed_type(decl.first) != v.type)
    return invalid_argument(what + " is declared " + declared_string(out) + " but the import computes " +
                            elem_type_name(static_cast<int32_t>(v.type)) + " elements");
  IoValue io;
  io.name = out.name();
  io.onnx_type = decl.first;
  io.type = decl.second;
  io.sequence = sequence;
  io.optional = optional;
  io.absent = v.absent;
  for (size_t i = 0; i < v.elements.size(); ++i) {
    const TensorType& t = graph_.node(v.elements[i]).type;
    if (!fits(decl.second.shape, t.shape))
      return invalid_argument(what + " is declared a sequence of " + declared_string(out) + " but its element " + std::to_string(i) +
                              " is " + t.to_string());
    if (i == 0) io.type = t;
    io.elements.push_back(v.elements[i]);
    graph_.outputs.push_back(v.elements[i]);
  }
  m.outputs.push_back(std::move(io));
  return Status::ok();
}

Result<OnnxValue> Importer::input_value(size_t k) {
  VOLTA_RETURN_IF_ERROR(input_exists(k));
  const OnnxValue& v = values_.at(node_->input(static_cast<int>(k)));
  if (v.sequence || v.absent) return v;
  VOLTA_ASSIGN_OR_RETURN(int32_t id, input(k));
  OnnxValue out = values_.at(node_->input(static_cast<int>(k)));
  out.id = id;
  return out;
}

Status Importer::set_output_value(size_t k, OnnxValue v) {
  if (!v.sequence && !v.absent) {
    VOLTA_RETURN_IF_ERROR(set_output(k, v.id, v.type));
    if (wants_output(k)) values_.at(node_->output(static_cast<int>(k))).optional = v.optional;
    return Status::ok();
  }
  if (!wants_output(k)) return Status::ok();
  const std::string& name = node_->output(static_cast<int>(k));
  if (values_.count(name)) return fail("output " + quoted(name) + " is defined twice");
  v.id = -1;
  v.input = nullptr;
  v.initializer = nullptr;
  values_[name] = std::move(v);
  return Status::ok();
}

Result<std::vector<int32_t>> Importer::sequence_input(size_t k) {
  VOLTA_RETURN_IF_ERROR(input_exists(k));
  const OnnxValue& v = values_.at(node_->input(static_cast<int>(k)));
  if (v.absent) return fail("input " + std::to_string(k) + " " + quoted(node_->input(static_cast<int>(k))) + " is an optional that holds nothing");
  if (!v.sequence) return fail("input " + std::to_string(k) + " " + quoted(node_->input(static_cast<int>(k))) + " must be a sequence");
  return v.elements;
}

}  // namespace volta::onnx
