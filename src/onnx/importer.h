// Internal to the ONNX importer: the state of one import and the per-op converters.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "onnx/onnx_util.h"

namespace volta::onnx {

// One ONNX value as the importer knows it.
struct OnnxValue {
  int32_t id = -1;               // IR node; -1 while a graph input or initializer is unused
  ElemType type = ElemType::kUndefined;  // a sequence's: its elements'
  const ::onnx::ValueInfoProto* input = nullptr;  // for a graph input
  const ::onnx::TensorProto* initializer = nullptr;
  // A sequence of tensors, its length known at import: the elements' IR nodes (id stays -1).
  bool sequence = false;
  std::vector<int32_t> elements;
  Shape elem_shape;  // an empty sequence's declared element shape, when one is declared
  // An optional value (ONNX optional types, the Optional op); absent: it holds nothing.
  bool optional = false, absent = false;
};

// The tensor type inside an ONNX value type: the type itself, a sequence's element type, or an
// optional's (of a tensor or a sequence); nullptr for what Volta does not hold (maps, sparse
// tensors, nested sequences). *sequence and *optional, when given, tell what was around it.
const ::onnx::TypeProto_Tensor* inner_tensor_type(const ::onnx::TypeProto& t, bool* sequence = nullptr, bool* optional = nullptr);
// The declared (inner) tensor type of a graph input or output ("graph input 'x'" in errors):
// -1 for each dynamic dim, {-1} for no shape.
Result<std::pair<ElemType, TensorType>> declared_type(const ::onnx::ValueInfoProto& v, const std::string& what);
std::string declared_string(const ::onnx::ValueInfoProto& v);  // "INT64[batch,128]"

// An initializer's value: its own bytes, or (data_location EXTERNAL) its slice of a file in the
// directory of `model_path`, the loaded model's file (empty: given as bytes, so refused)
// (external_data.cpp).
Result<Tensor> initializer_value(const ::onnx::TensorProto& p, const std::string& model_path, const std::string& origin, ElemType* type,
                                 bool release_raw = false);

// After import: the exported forms of GELU and LayerNorm become Volta's ops (recognize.cpp).
Status recognize_exported_forms(ir::Graph& g);

class Importer {
 public:
  // consume: `model` is the importer's to empty: each large initializer's bytes are released
  // once they are a tensor, so the weights are held once, not twice.
  Importer(const ::onnx::ModelProto& model, const ImportOptions& options, std::string origin, bool consume = false);
  Result<Model> run();
  void set_model_path(std::string path) { model_path_ = std::move(path); }  // its directory holds external data

  // ---- used by the converters (src/onnx/convert.cpp) ----
  const ::onnx::NodeProto& node() const { return *node_; }
  int64_t opset() const { return opset_; }
  // "Reshape node 'r' (opset 14): <what>"
  Status fail(const std::string& what) const;
  Status unsupported(const std::string& what) const;

  // Inputs: present means given with a non-empty name.
  size_t num_inputs() const { return static_cast<size_t>(node_->input_size()); }
  bool has_input(size_t k) const { return k < num_inputs() && !node_->input(static_cast<int>(k)).empty(); }
  Result<int32_t> input(size_t k);                 // the IR value of input k
  Result<ElemType> input_type(size_t k);
  TensorType type(int32_t id) const { return graph_.node(id).type; }
  // Input k's value, which must be known at import (initializer, Constant, folded, given).
  Result<Tensor> constant_input(size_t k);
  Result<std::vector<int64_t>> ints_input(size_t k);  // an integer constant as int64s

  // Attributes: only the listed ones may be present.
  Status allow_attrs(std::initializer_list<const char*> names) const;
  const ::onnx::AttributeProto* attr(const char* name) const;
  Result<int64_t> attr_int(const char* name, int64_t fallback) const;
  Result<double> attr_float(const char* name, double fallback) const;
  Result<std::vector<int64_t>> attr_ints(const char* name) const;  // empty when absent
  Result<std::string> attr_string(const char* name, std::string fallback) const;

  // Builders: a node of the IR, typed by the op's rule; errors carry the ONNX node.
  Result<int32_t> emit(ir::Op op, std::vector<int32_t> inputs, ir::Attrs attrs = {});
  Result<int32_t> constant(Tensor value);
  Result<int32_t> scalar(float v) { return constant(Tensor::from_f32({}, {v})); }
  Result<int32_t> reshape(int32_t x, Shape shape);
  // Output k of the ONNX node is `id` with ONNX type `type`.
  Status set_output(size_t k, int32_t id, ElemType type);

  // Sequence and optional values (import_sequence.cpp). Input k as the importer holds it (a
  // tensor input is materialized); output k as a copy of `v` (elements, flags and type).
  Result<OnnxValue> input_value(size_t k);
  Status set_output_value(size_t k, OnnxValue v);
  // The elements of input k, which must be a sequence (or an optional holding one).
  Result<std::vector<int32_t>> sequence_input(size_t k);
  bool wants_output(size_t k) const { return k < static_cast<size_t>(node_->output_size()) && !node_->output(static_cast<int>(k)).empty(); }

 private:
  Status input_exists(size_t k);
  Result<int32_t> materialize(const std::string& name, OnnxValue& v);
  Result<int32_t> add_node(ir::Node n);
  std::string fresh_name(const std::string& base);
  Status convert_node();
  Status refusal_report() const;
  Result<std::pair<ElemType, TensorType>> bound_input_type(const ::onnx::ValueInfoProto& v);
  // Sequence and optional graph inputs and outputs (import_sequence.cpp): the given values make
  // a sequence input's elements (IR inputs) and mark absent optionals; the interface entries.
  Status bind_sequence_inputs(const std::vector<const ::onnx::ValueInfoProto*>& inputs);
  Result<IoValue> sequence_input_io(const ::onnx::ValueInfoProto& in, const OnnxValue& v);
  Status add_sequence_output(const ::onnx::ValueInfoProto& out, const OnnxValue& v, Model& m);

  const ::onnx::ModelProto& model_;
  bool consume_ = false;
  std::map<std::string, Tensor> loaded_;  // initializers made tensors (their proto bytes may be gone)
  const ImportOptions& options_;
  std::string origin_, model_path_;
  int64_t opset_ = 0;
  const ::onnx::NodeProto* node_ = nullptr;
  int node_index_ = 0;
  int32_t node_first_id_ = 0;  // first IR id emitted for the current ONNX node
  ir::Graph graph_;
  std::map<std::string, OnnxValue> values_;
  std::set<std::string> reserved_;  // every ONNX value name: helper nodes never take one
  std::set<std::string> used_;      // IR node names taken
  std::map<int32_t, Tensor> known_;  // IR id -> value known at import
  Bindings params_;
  std::map<std::string, std::pair<int64_t, std::string>> dim_params_;  // symbolic dim -> size, first input
  // Refused nodes (kUnimplemented): the import goes on past them so that one error lists them all.
  struct Refusal {
    std::string op_type, what;
    std::vector<std::string> nodes;
  };
  std::vector<Refusal> refusals_;  // in first-seen order, one per (op type, reason)
  mutable std::string last_refusal_;  // what unsupported() said last
  Status first_refusal_ = Status::ok();
  int skipped_ = 0;                   // nodes not checked: they read a refused node's output
};

// A ModelProto from bytes; truncated or non-ONNX input is an error naming `origin`.
Result<::onnx::ModelProto> parse_model(std::string_view bytes, const std::string& origin);
// The same from a file, streamed (the file's bytes are never held whole).
Result<::onnx::ModelProto> read_model(const std::string& path);

// Converts the current node of `im` (dispatch on op type); defined in convert.cpp.
Status convert(Importer& im);
// The ONNX op types convert() knows.
bool is_supported_op(const std::string& op_type);

}  // namespace volta::onnx
