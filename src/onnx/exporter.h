// Internal to the ONNX exporter: the Exporter walks an inference graph in topological order and
// writes each node as ONNX nodes at opset 17 (export.cpp: the table and most emitters;
// export_attention.cpp: attention, rope, swiglu and the causal masks, written as short standard
// subgraphs).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "onnx/onnx_util.h"
#include "volta/op_attrs.h"

namespace volta::onnx {

using ir::Op;

class Exporter {
 public:
  Exporter(const ir::Graph& g, const Bindings& params, ::onnx::GraphProto* out) : g_(g), params_(params), out_(out) {}

  Status run();

 private:
  const ir::Graph& g_;
  const Bindings& params_;
  ::onnx::GraphProto* out_;
  const ir::Node* n_ = nullptr;  // the node being emitted
  std::vector<std::string> names_;
  std::set<std::string> used_;
  std::map<std::array<int64_t, 3>, std::string> keeps_;  // causal_keep's initializers by (R, C, offset): one for all layers

  Status fail(const std::string& what) const {
    return unimplemented("export: " + std::string(ir::op_name(n_->op)) + " node '" + n_->name + "': " + what);
  }
  // A value name no other value has.
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_.insert(name);
    return name;
  }
  const std::string& in(size_t k) const { return names_[static_cast<size_t>(n_->inputs[k])]; }
  std::vector<std::string> all_inputs() const {
    std::vector<std::string> ins;
    for (size_t k = 0; k < n_->inputs.size(); ++k) ins.push_back(in(k));
    return ins;
  }
  const TensorType& in_type(size_t k) const { return g_.node(n_->inputs[k]).type; }
  const std::string& self() const { return names_[static_cast<size_t>(n_->id)]; }
  std::string temp(const char* what) { return fresh(self() + "/" + what); }

  ::onnx::NodeProto* node(const char* op_type, std::vector<std::string> inputs, const std::string& output) {
    ::onnx::NodeProto* p = out_->add_node();
    p->set_op_type(op_type);
    p->set_name(output == self() ? self() : output);
    for (const std::string& i : inputs) p->add_input(i);
    p->add_output(output);
    return p;
  }
  static void attr(::onnx::NodeProto* p, const char* name, int64_t v) {
    auto* a = p->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto* p, const char* name, double v) {
    auto* a = p->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }
  static void attr(::onnx::NodeProto* p, const char* name, const std::vector<int64_t>& v) {
    auto* a = p->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  Result<std::string> initializer(const Tensor& t, ElemType type, const std::string& name) {
    VOLTA_RETURN_IF_ERROR(tensor_to_proto(t, type, name, out_->add_initializer()));
    return name;
  }
  Result<std::string> ints(const std::vector<int64_t>& v, const char* what) {
    Tensor t = Tensor::zeros(DType::i64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
    return initializer(t, ElemType::kInt64, temp(what));
  }
  Result<std::string> scalar(double v, const char* what) {
    return initializer(Tensor::from_f32({}, {static_cast<float>(v)}), ElemType::kFloat, temp(what));
  }

  // One emitter per IR op or family, called by emit() (export.cpp).
  Status emit();
  Status leaf();
  Status matmul();
  Status gelu();
  Status gelu_of(const std::string& x, const std::string& y, bool tanh_form);
  Status softmax();
  Status layer_norm();
  Status rms_norm();
  Status slice();
  Status reduce(const char* op_type);
  Status window(const char* op_type);
  Status where();
  Status equal();
  Status outputs();

  // The attention family (export_attention.cpp). causal_keep: a BOOL [R, C] initializer, true
  // where column j <= row i + offset (what a causal mask keeps).
  Result<std::string> causal_keep(const Shape& s, int64_t offset);
  Status attention();
  Result<std::string> repeat_heads(const std::string& kv, int64_t E, const char* what);
  Result<std::pair<std::string, std::string>> last_axis_halves(const char* first, const char* second);
  Status rope();
  Status swiglu();
  Status causal_mask();
};

}  // namespace volta::onnx
