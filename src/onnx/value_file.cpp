// Value files: a .npy or .pb that holds a tensor, a SequenceProto or an OptionalProto
// (ValueFile), read and written for a model's inputs and outputs, and bound to them.
#include <filesystem>
#include <fstream>
#include <optional>

#include "onnx/onnx_util.h"
// After onnx_util.h: onnx_pb.h defines the ONNX_API this header uses.
#include <onnx/onnx-data.pb.h>  // SequenceProto, OptionalProto

namespace volta::onnx {

namespace {

Result<ValueFile> from_sequence(const ::onnx::SequenceProto& p, const std::string& origin) {
  if ((p.elem_type() != ::onnx::SequenceProto::TENSOR && p.tensor_values_size() > 0) || p.sparse_tensor_values_size() > 0 || p.sequence_values_size() > 0 ||
      p.map_values_size() > 0 || p.optional_values_size() > 0)
    return unimplemented(origin + ": a sequence of other than tensors is not supported");
  ValueFile v;
  v.sequence = true;
  for (int i = 0; i < p.tensor_values_size(); ++i) {
    TypedTensor t;
    VOLTA_ASSIGN_OR_RETURN(t.tensor, tensor_from_proto(p.tensor_values(i), origin + ": element " + std::to_string(i), &t.onnx_type));
    t.name = p.tensor_values(i).name();
    if (i > 0 && t.onnx_type != v.elem_type)
      return parse_error(origin + ": element " + std::to_string(i) + " is " + elem_type_name(static_cast<int32_t>(t.onnx_type)) + ", element 0 " +
                             elem_type_name(static_cast<int32_t>(v.elem_type)));
    v.elem_type = t.onnx_type;
    v.tensors.push_back(std::move(t));
  }
  return v;
}

// Bytes that are not a TensorProto, as a SequenceProto (`as_optional` false) or an OptionalProto
// (nullopt: they are not one). A sequence needs a tensor elem_type unless it is empty; an optional
// may leave elem_type out when it holds nothing.
std::optional<Result<ValueFile>> parse_as(std::string_view bytes, bool as_optional, const std::string& origin) {
  if (!as_optional) {
    ::onnx::SequenceProto seq;
    if (!seq.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) || !seq.unknown_fields().empty()) return std::nullopt;
    if (seq.elem_type() != ::onnx::SequenceProto::TENSOR && !(seq.elem_type() == 0 && seq.tensor_values_size() == 0)) return std::nullopt;
    return from_sequence(seq, origin);  // (an empty one may leave elem_type out)
  }
  ::onnx::OptionalProto opt;
  if (!opt.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) || !opt.unknown_fields().empty()) return std::nullopt;
  ValueFile v;
  if (opt.has_tensor_value()) {
    TypedTensor t;
    auto r = tensor_from_proto(opt.tensor_value(), origin, &t.onnx_type);
    if (!r.is_ok()) return Result<ValueFile>(r.status());
    t.tensor = *r;
    v.tensors.push_back(std::move(t));
  } else if (opt.has_sequence_value()) {
    auto r = from_sequence(opt.sequence_value(), origin);
    if (!r.is_ok()) return r;
    v = std::move(*r);
  } else {
    v.absent = true;
    v.sequence = opt.elem_type() == ::onnx::OptionalProto::SEQUENCE;
  }
  v.optional = true;
  return v;
}

}  // namespace

Result<ValueFile> read_value_file(const std::string& path) {
  VOLTA_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path));
  return parse_value(std::move(bytes), path);
}

Result<ValueFile> parse_value(std::string bytes, const std::string& path) {
  // Empty bytes parse as any protobuf message (an empty sequence among them), which is never
  // what an empty file meant.
  if (bytes.empty()) return invalid_argument("'" + path + "' is empty, not a .npy array or an ONNX TensorProto, sequence or optional");
  ValueFile v;
  if (io::detect_file_kind(std::string_view(bytes).substr(0, 16)) == io::FileKind::Npy) {
    VOLTA_ASSIGN_OR_RETURN(TypedTensor t, parse_npy(bytes, path));
    v.tensors.push_back(std::move(t));
    return v;
  }
  VOLTA_RETURN_IF_ERROR(io::expect_kind(bytes, io::FileKind::Onnx, path));
  auto t = parse_tensor_proto(bytes, path);
  if (t.is_ok()) {
    v.tensors.push_back(std::move(*t));
    return v;
  }
  for (bool as_optional : {false, true}) {
    if (auto r = parse_as(bytes, as_optional, path)) {
      if (r->is_ok()) (*r)->proto = std::move(bytes);
      return std::move(*r);
    }
  }
  return t.status();
}

Status as_declared(ValueFile* v, bool sequence, bool optional, const std::string& origin) {
  if (v->proto.empty() || (v->sequence == sequence && v->optional == optional)) return Status::ok();
  auto r = parse_as(v->proto, optional, origin);
  if (!r) return Status::ok();  // not that kind: binding the input names the mismatch
  if (!r->is_ok()) return r->status();
  (*r)->proto = std::move(v->proto);
  *v = std::move(**r);
  if (v->absent) v->sequence = sequence;  // holding nothing, it is of the declared kind
  return Status::ok();
}

Status write_value_file(const std::string& path, const ValueFile& value, const std::string& name) {
  if (!value.sequence && !value.optional && value.tensors.size() == 1)
    return write_tensor_file(path, value.tensors[0].tensor, value.tensors[0].onnx_type, name);
  if (std::filesystem::path(path).extension() == ".npy")
    return invalid_argument("cannot write '" + path + "': a sequence or an optional value has no .npy form (write .pb)");
  if (!value.sequence && !value.absent && value.tensors.size() != 1)
    return invalid_argument("cannot write '" + path + "': an optional tensor holds one tensor, not " + std::to_string(value.tensors.size()));
  // The tensors go straight into the message written: the sequence, the optional's sequence or
  // the optional's one tensor.
  ::onnx::SequenceProto seq;
  ::onnx::OptionalProto opt;
  ::onnx::SequenceProto* elements = &seq;
  if (value.optional) {
    opt.set_name(name);
    opt.set_elem_type(value.sequence ? ::onnx::OptionalProto::SEQUENCE : ::onnx::OptionalProto::TENSOR);
    elements = value.sequence && !value.absent ? opt.mutable_sequence_value() : nullptr;
    if (!value.sequence && !value.absent)
      VOLTA_RETURN_IF_ERROR(tensor_to_proto(value.tensors[0].tensor, value.tensors[0].onnx_type, "", opt.mutable_tensor_value()));
  } else {
    seq.set_name(name);
  }
  if (elements) {
    elements->set_elem_type(::onnx::SequenceProto::TENSOR);
    for (const TypedTensor& t : value.tensors) VOLTA_RETURN_IF_ERROR(tensor_to_proto(t.tensor, t.onnx_type, "", elements->add_tensor_values()));
  }
  std::string bytes;
  const bool ok = value.optional ? opt.SerializeToString(&bytes) : seq.SerializeToString(&bytes);
  if (!ok) return internal_error("cannot serialize '" + name + "'");
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !f.flush()) return not_found("cannot write '" + path + "'");
  return Status::ok();
}

void give_input(ImportOptions& opts, const std::string& name, const ValueFile& value) {
  if (value.absent) {
    opts.absent_inputs.insert(name);
  } else if (value.sequence) {
    std::vector<Tensor>& elements = opts.input_sequences[name];
    for (const TypedTensor& t : value.tensors) elements.push_back(t.tensor);
  } else if (!value.tensors.empty()) {
    opts.input_values[name] = value.tensors[0].tensor;
  }
}

Status bind_input(const ValueFile& value, const IoValue& io, const ir::Graph& graph, const std::string& origin, Bindings* out) {
  const auto kind = [](bool sequence, bool absent) { return std::string(absent ? "an empty optional" : sequence ? "a sequence" : "a tensor"); };
  if (value.absent != io.absent || (!io.absent && value.sequence != io.sequence))
    return invalid_argument(origin + ": input '" + io.name + "' is " + kind(io.sequence, io.absent) + " but the file holds " +
                            kind(value.sequence, value.absent));
  if (!io.sequence) {
    if (io.absent || io.node < 0) return Status::ok();
    VOLTA_ASSIGN_OR_RETURN((*out)[graph.node(io.node).name], as_input(value.tensors.at(0), io, origin));
    return Status::ok();
  }
  if (value.tensors.size() != io.elements.size())
    return invalid_argument(origin + ": input '" + io.name + "' is a sequence of " + std::to_string(io.elements.size()) +
                            " elements but the file holds " + std::to_string(value.tensors.size()));
  for (size_t i = 0; i < io.elements.size(); ++i) {
    IoValue element = io;
    element.type = graph.node(io.elements[i]).type;
    element.name = io.name + " element " + std::to_string(i);
    VOLTA_ASSIGN_OR_RETURN((*out)[graph.node(io.elements[i]).name], as_input(value.tensors[i], element, origin));
  }
  return Status::ok();
}

Result<ValueFile> output_value(const IoValue& io, const std::vector<Tensor>& outputs, size_t* next) {
  ValueFile v;
  v.sequence = io.sequence;
  v.optional = io.optional;
  v.absent = io.absent;
  v.elem_type = io.onnx_type;
  const size_t n = io.absent ? 0 : io.sequence ? io.elements.size() : 1;
  if (*next + n > outputs.size()) return internal_error("output '" + io.name + "': the run returned too few values");
  for (size_t i = 0; i < n; ++i) v.tensors.push_back({outputs[*next + i], io.onnx_type, ""});
  *next += n;
  return v;
}

Status write_tensor_file(const std::string& path, const Tensor& t, ElemType onnx_type, const std::string& name) {
  std::string bytes;
  if (std::filesystem::path(path).extension() == ".npy") {
    VOLTA_ASSIGN_OR_RETURN(bytes, serialize_npy(t, onnx_type));
  } else {
    VOLTA_ASSIGN_OR_RETURN(bytes, serialize_tensor_proto(t, onnx_type, name));
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) || !f.flush()) return not_found("cannot write '" + path + "'");
  return Status::ok();
}

Result<Tensor> as_input(const TypedTensor& t, const IoValue& io, const std::string& origin) {
  if (t.onnx_type != io.onnx_type || t.tensor.shape() != io.type.shape)
    return invalid_argument(origin + ": input '" + io.name + "' is " + elem_type_name(static_cast<int32_t>(io.onnx_type)) +
                            shape_to_string(io.type.shape) + " but the file holds " +
                            elem_type_name(static_cast<int32_t>(t.onnx_type)) + shape_to_string(t.tensor.shape()));
  return t.tensor;
}

}  // namespace volta::onnx
