// Tests' ONNX models built with the protobuf classes: typed inputs and outputs, nodes,
// initializers and attributes (test_onnx.cpp, test_onnx_sequence.cpp).
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace volta::test {

struct ModelMaker {
  ::onnx::ModelProto m;
  explicit ModelMaker(int64_t opset = 13) {
    m.set_ir_version(8);
    m.set_producer_name("volta-test");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("t");
  }
  ::onnx::GraphProto& g() { return *m.mutable_graph(); }
  static void set_type(::onnx::ValueInfoProto* v, const std::string& name, int32_t elem, const std::vector<int64_t>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  ModelMaker& input(const std::string& name, std::vector<int64_t> dims, int32_t elem = 1) {
    set_type(g().add_input(), name, elem, dims);
    return *this;
  }
  ModelMaker& output(const std::string& name, std::vector<int64_t> dims, int32_t elem = 1) {
    set_type(g().add_output(), name, elem, dims);
    return *this;
  }
  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                          const std::string& name = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_0" : name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  ModelMaker& init(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (int64_t d : dims) t->add_dims(d);
    for (float f : v) t->add_float_data(f);
    return *this;
  }
  ModelMaker& init_i64(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(7);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t x : v) t->add_int64_data(x);
    return *this;
  }
  std::string bytes() const { return m.SerializeAsString(); }
};

inline void set_int(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

}  // namespace volta::test
