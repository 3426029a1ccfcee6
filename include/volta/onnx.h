// ONNX import: a static-shape subset of ONNX (docs/onnx.md) becomes an ir::Graph, so imported
// models are verified, planned and run on the one path like any other graph.
//
//   volta::onnx::ImportOptions opts;
//   opts.input_values["shape"] = shape_tensor;          // a graph input Reshape needs as a constant
//   auto m = volta::onnx::load_model("model.onnx", opts);  // "Reshape node 'r' (opset 14): ..."
//   auto plan = runtime.compile(m->graph);
//   runtime.run(*plan, {{"x", x}});                     // bind m->inputs with node >= 0 by name
//
// Every failure is a Status naming the node, op type, opset and the attribute or input at
// fault; malformed files (not protobuf, truncated, dangling names) are errors, never crashes.
// Built when Debian's libonnx-dev is found; otherwise every call returns kUnimplemented.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "volta/ir.h"
#include "volta/runtime.h"
#include "volta/status.h"
#include "volta/tensor.h"

namespace volta::onnx {

// ONNX TensorProto.DataType codes Volta reads and writes. BOOL values live in Volta as f32
// 0.0 / 1.0 (what `equal` produces and `where` reads). The integer types narrower than their
// Volta dtype live in it: INT8, UINT8, INT16 and UINT16 in i32, UINT32 and UINT64 in i64 (UINT64
// as the same bits); the import narrows the results of their arithmetic back to their width.
// STRING values are read as the f32 numbers they spell and only feed casts to float types.
enum class ElemType : int32_t {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kUint16 = 4, kInt16 = 5, kInt32 = 6, kInt64 = 7, kString = 8, kBool = 9,
  kFloat16 = 10, kDouble = 11, kUint32 = 12, kUint64 = 13, kBfloat16 = 16
};
const char* elem_type_name(int32_t onnx_type);  // "FLOAT", "DOUBLE", ... ("type 42" when unknown)
// The Volta dtype an ONNX type lives in, or an error for types Volta does not hold. BOOL lives in
// f32 as 0 / 1; DOUBLE lives and computes in f32 (read rounded to f32, written back widened).
Result<DType> volta_dtype(int32_t onnx_type);
// The type the import computes an ONNX type in: FLOAT for DOUBLE, the type itself otherwise.
inline ElemType computed_type(ElemType t) { return t == ElemType::kDouble ? ElemType::kFloat : t; }
// True when Volta builds with the ONNX importer.
bool available();

// A graph input or output.
struct IoValue {
  std::string name;    // the ONNX value name (also the IR input's name)
  ElemType onnx_type;  // its ONNX type (a sequence's: its elements')
  TensorType type;     // its Volta type (a sequence's: its first element's, when it has one)
  int32_t node = -1;   // the IR node; -1 for an input folded into constants at import
  // An ONNX sequence of tensors (or an optional holding one): its length is fixed at import, and
  // each element is an IR node of its own, in order (`node` stays -1). An input binds each
  // element by its IR node's name; an output is one graph output per element.
  bool sequence = false;
  std::vector<int32_t> elements;
  // An ONNX optional value; `absent` when it holds nothing (no node, no elements).
  bool optional = false, absent = false;
};

struct Model {
  ir::Graph graph;               // graph.outputs[i] == outputs[i].node
  std::vector<IoValue> inputs;   // graph inputs that are not initializers, in ONNX order
  std::vector<IoValue> outputs;  // graph outputs, in ONNX order
  Bindings params;               // initializer values (ImportOptions::initializers_as_params)
  int64_t opset = 0;             // of the default domain
  std::string producer;          // producer_name producer_version
};

struct ImportOptions {
  // Values of graph inputs that an op needs as constants at import (Reshape's shape, Slice's
  // starts, Clip's bounds, ...). An input consumed only that way does not become an IR input.
  std::map<std::string, Tensor> input_values;
  // Shapes of graph inputs with dynamic dims (symbolic or unknown): the import specialises the
  // model to them. A value in input_values binds its input's shape too.
  std::map<std::string, Shape> input_shapes;
  // Graph inputs of sequence type (or optional sequences): the elements' values, which fix the
  // sequence's length and the elements' shapes (each element becomes an IR input). Optional
  // inputs given no value are named in absent_inputs; an optional tensor takes input_values.
  std::map<std::string, std::vector<Tensor>> input_sequences;
  std::set<std::string> absent_inputs;
  // f32 initializers of rank >= 1 become trainable params (values in Model::params) instead
  // of constants, so an imported model can be fine-tuned.
  bool initializers_as_params = false;
};

Result<Model> import_model(std::string_view bytes, const std::string& origin, const ImportOptions& options = {});
Result<Model> load_model(const std::string& path, const ImportOptions& options = {});
// A model parsed once and specialised per distinct set of input shapes: a model exported with
// dynamic (symbolic) dims imports once per shape it is run at, each import cached by its shapes,
// so compiling the bound graph through one Runtime plans each distinct shape once (the Runtime's
// plan cache) and a repeated shape costs neither an import nor a plan.
class ShapedModel {
 public:
  static Result<ShapedModel> load(const std::string& path, ImportOptions options = {});
  static Result<ShapedModel> parse(std::string_view bytes, const std::string& origin, ImportOptions options = {});
  ShapedModel(ShapedModel&&) noexcept;
  ShapedModel& operator=(ShapedModel&&) noexcept;
  ~ShapedModel();
  // The model with these input shapes (options.input_shapes); inputs with a static shape may
  // be left out. Shapes differ from the declared ones only in dynamic dims.
  Result<std::shared_ptr<const Model>> bind(const std::map<std::string, Shape>& shapes);
  uint64_t hits() const;    // bind() calls answered from the cache
  uint64_t misses() const;  // bind() calls that imported

 private:
  struct Impl;
  explicit ShapedModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a model declares, without importing it (for test runners and `volta inspect`).
struct ModelInfo {
  std::vector<std::string> op_types;  // of the main graph's nodes, in node order
  std::vector<std::string> inputs;    // graph inputs that are not initializers, in order
  std::vector<std::string> outputs;   // graph outputs, in order
  std::vector<ElemType> input_types;   // inputs' declared element types (a sequence's or optional's
                                       // tensors'; kUndefined: maps and other values Volta does not hold)
  std::vector<ElemType> output_types;  // outputs' the same
  std::vector<bool> input_sequence, input_optional;  // inputs declared a sequence (or an optional one), optional
  int64_t opset = 0;
};
Result<ModelInfo> read_model_info(std::string_view bytes, const std::string& origin);

// ---- Export ------------------------------------------------------------------------------

constexpr int64_t kExportOpset = 17;  // default domain; IR version 8

struct ExportOptions {
  std::string doc;                              // ModelProto.doc_string
  std::map<std::string, std::string> metadata;  // ModelProto.metadata_props, in key order
};

// The bytes of an ONNX model computing `g` on its inputs: params take their values from
// `params` and become initializers, as do constants; graph outputs keep their node names.
// Forward ops only: gradient helpers and losses fail naming the node. Ops without one ONNX
// counterpart are written as small standard subgraphs (gelu -> Erf, causal masks -> Where on a
// boolean initializer). The model is checked with ONNX's own checker and strict shape
// inference before it is returned, so a model that fails them is never written.
Result<std::string> export_model(const ir::Graph& g, const Bindings& params, const ExportOptions& options = {});
// export_model, then an atomic write of `path`.
Status save_model(const std::string& path, const ir::Graph& g, const Bindings& params, const ExportOptions& options = {});

// ---- Tensor files: ONNX TensorProto (.pb) and numpy (.npy) ---------------------------------

struct TypedTensor {
  Tensor tensor;       // in the Volta dtype (bool as f32 0/1)
  ElemType onnx_type;  // the file's element type
  std::string name;    // TensorProto.name (empty for .npy)
};

Result<TypedTensor> parse_tensor_proto(std::string_view bytes, const std::string& origin);
Result<std::string> serialize_tensor_proto(const Tensor& t, ElemType onnx_type, const std::string& name);
Result<TypedTensor> parse_npy(std::string_view bytes, const std::string& origin);
Result<std::string> serialize_npy(const Tensor& t, ElemType onnx_type);
// By extension: .npy is numpy, anything else a TensorProto.
Result<TypedTensor> read_tensor_file(const std::string& path);
Status write_tensor_file(const std::string& path, const Tensor& t, ElemType onnx_type, const std::string& name);
// A file's tensor as the input `io` expects: same element type and shape, else an error.
Result<Tensor> as_input(const TypedTensor& t, const IoValue& io, const std::string& origin);

// Any ONNX value a .pb file holds: a TensorProto, a SequenceProto of tensors, or an
// OptionalProto holding either or nothing (ONNX's test data stores sequence and optional inputs
// and outputs so); a .npy file holds a tensor.
struct ValueFile {
  bool sequence = false;                  // a sequence: `tensors` are its elements
  bool optional = false, absent = false;  // an optional; absent: it holds nothing
  std::vector<TypedTensor> tensors;       // the tensor, or the sequence's elements
  ElemType elem_type = ElemType::kUndefined;  // a sequence's element type (also when empty)
  std::string proto;  // the bytes of a .pb that is not a TensorProto (for as_declared)
};
// A tensor file is read as a tensor first; bytes that are not a valid TensorProto are tried as a
// SequenceProto, then as an OptionalProto, and the tensor's error is reported if neither fits.
Result<ValueFile> read_value_file(const std::string& path);
Result<ValueFile> parse_value(std::string bytes, const std::string& origin);  // the same from a file's bytes
// Some bytes are two values: a SequenceProto of one tensor is also an OptionalProto holding it,
// and a name alone an empty sequence or an empty optional. Reads a non-tensor file again as the
// kind its input declares (ModelInfo::input_sequence / input_optional); a no-op for tensors.
Status as_declared(ValueFile* v, bool sequence, bool optional, const std::string& origin);
// Writes `value` (sequences and optionals as .pb only); `name` is the proto's name.
Status write_value_file(const std::string& path, const ValueFile& value, const std::string& name);
// Adds a file's value for graph input `name` to `opts` (input_values, input_sequences or
// absent_inputs).
void give_input(ImportOptions& opts, const std::string& name, const ValueFile& value);
// The IR bindings of input `io` (by its nodes' names) from a file's value, which must be of the
// input's kind, element type and shapes; `graph` is the imported graph.
Status bind_input(const ValueFile& value, const IoValue& io, const ir::Graph& graph, const std::string& origin, Bindings* out);
// The value of output `io` from the run's outputs, taking its own from position *next on.
Result<ValueFile> output_value(const IoValue& io, const std::vector<Tensor>& outputs, size_t* next);

}  // namespace volta::onnx
