#include "volta/builder.h"

#include <cmath>

#include "volta/verify.h"

namespace volta {

using ir::Attrs;
using ir::Node;
using ir::Op;

ModelBuilder::ModelBuilder(std::string graph_name) { graph_.name = std::move(graph_name); }

ModelBuilder::ModelBuilder(ir::Graph start) : graph_(std::move(start)) {
  for (const Node& n : graph_.nodes) names_.insert(n.name);
}

bool ModelBuilder::usable(std::initializer_list<Value> vs) {
  if (!status_.is_ok()) return false;
  for (Value v : vs)
    if (v.id < 0 || v.id >= static_cast<int32_t>(graph_.size())) {
      status_ = invalid_argument("value handle " + std::to_string(v.id) + " does not belong to this builder");
      return false;
    }
  return true;
}

Value ModelBuilder::add_node(Node node) {
  node.id = static_cast<int32_t>(graph_.size());
  if (node.name.empty()) node.name = std::string(ir::op_name(node.op)) + "." + std::to_string(node.id);
  if (!names_.insert(node.name).second) {
    status_ = invalid_argument("[" + std::string(ir::op_name(node.op)) + "] value '" + node.name +
                               "' is defined twice " + ir::node_ref(node));
    return {};
  }
  graph_.nodes.push_back(std::move(node));
  return {graph_.nodes.back().id};
}

Value ModelBuilder::input(const std::string& name, TensorType type) {
  if (!usable({})) return {};
  Node n;
  n.op = Op::Input;
  n.name = name;
  n.type = std::move(type);
  return add_node(std::move(n));
}

Value ModelBuilder::param(const std::string& name, TensorType type, const ParamInit& init) {
  if (!usable({})) return {};
  Node n;
  n.op = Op::Param;
  n.name = name;
  n.type = std::move(type);
  n.attrs.set("init", init.kind);
  if (init.kind == "normal") n.attrs.set("std", init.std);
  if (init.kind == "uniform") n.attrs.set("scale", init.scale);
  if (!init.trainable) n.attrs.set("trainable", int64_t{0});
  return add_node(std::move(n));
}

Value ModelBuilder::constant(const std::string& name, Tensor value) {
  if (!usable({})) return {};
  Node n;
  n.op = Op::Constant;
  n.name = name;
  n.type = value.type();
  n.value = std::move(value);
  return add_node(std::move(n));
}

Value ModelBuilder::scalar(float v, const std::string& name) {
  return constant(name.empty() ? "const." + std::to_string(graph_.size()) : name, Tensor::from_f32({}, {v}));
}

Value ModelBuilder::op(Op op, std::vector<Value> inputs, Attrs attrs, const std::string& name) {
  if (!usable({})) return {};
  for (Value v : inputs)
    if (!usable({v})) return {};
  Node n;
  n.op = op;
  n.name = name;
  n.attrs = std::move(attrs);
  std::vector<TensorType> in;
  for (Value v : inputs) {
    n.inputs.push_back(v.id);
    in.push_back(graph_.node(v.id).type);
  }
  if (ir::is_leaf(op)) {
    status_ = invalid_argument("[" + std::string(ir::op_name(op)) + "] use input(), param() or constant() for leaves");
    return {};
  }
  auto t = ir::infer_type(op, in, n.attrs);
  if (!t.is_ok()) {
    std::string who = name.empty() ? std::string(ir::op_name(op)) + "." + std::to_string(graph_.size()) : name;
    status_ = Status(t.status().code(), t.status().message() + " (node '" + who + "')");
    return {};
  }
  n.type = *t;
  return add_node(std::move(n));
}

Value ModelBuilder::matmul(Value a, Value b, const std::string& name, bool transpose_a, bool transpose_b) {
  Attrs attrs;
  if (transpose_a) attrs.set("transpose_a", int64_t{1});
  if (transpose_b) attrs.set("transpose_b", int64_t{1});
  return op(Op::Matmul, {a, b}, std::move(attrs), name);
}
Value ModelBuilder::gelu(Value x, const std::string& name, bool tanh_approx) {
  Attrs attrs;
  if (tanh_approx) attrs.set("approximate", std::string("tanh"));
  return op(Op::Gelu, {x}, std::move(attrs), name);
}
Value ModelBuilder::softmax(Value x, int64_t axis, const std::string& name) {
  return op(Op::Softmax, {x}, {{"axis", axis}}, name);
}
Value ModelBuilder::log_softmax(Value x, int64_t axis, const std::string& name) {
  return op(Op::LogSoftmax, {x}, {{"axis", axis}}, name);
}
Value ModelBuilder::layer_norm(Value x, Value gamma, Value beta, double eps, const std::string& name) {
  return op(Op::LayerNorm, {x, gamma, beta}, {{"eps", eps}}, name);
}
Value ModelBuilder::layer_norm(Value x, Value gamma, double eps, const std::string& name) {
  return op(Op::LayerNorm, {x, gamma}, {{"eps", eps}}, name);
}
Value ModelBuilder::rms_norm(Value x, Value gamma, double eps, const std::string& name) {
  return op(Op::RmsNorm, {x, gamma}, {{"eps", eps}}, name);
}
Value ModelBuilder::rope(Value x, Value cos, Value sin, Value position, const std::string& name) {
  return position.valid() ? op(Op::Rope, {x, cos, sin, position}, {}, name) : op(Op::Rope, {x, cos, sin}, {}, name);
}

Tensor rope_table(int64_t positions, int64_t dim, double theta, bool sine) {
  const int64_t half = dim / 2;
  Tensor t = Tensor::zeros(DType::f32, {positions, half});
  for (int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    for (int64_t p = 0; p < positions; ++p) {
      const double angle = static_cast<double>(p) * freq;
      t.data<float>()[p * half + i] = static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
    }
  }
  return t;
}

Value ModelBuilder::embedding(Value table, Value ids, const std::string& name) {
  return op(Op::Embedding, {table, ids}, {}, name);
}
Value ModelBuilder::reshape(Value x, std::vector<int64_t> shape, const std::string& name) {
  return op(Op::Reshape, {x}, {{"shape", std::move(shape)}}, name);
}
Value ModelBuilder::transpose(Value x, std::vector<int64_t> perm, const std::string& name) {
  return op(Op::Transpose, {x}, {{"perm", std::move(perm)}}, name);
}
Value ModelBuilder::slice(Value x, int64_t axis, int64_t start, int64_t end, const std::string& name) {
  return op(Op::Slice, {x}, {{"axis", axis}, {"start", start}, {"end", end}}, name);
}
Value ModelBuilder::concat(std::vector<Value> xs, int64_t axis, const std::string& name) {
  return op(Op::Concat, std::move(xs), {{"axis", axis}}, name);
}
Value ModelBuilder::reduce_sum(Value x, std::vector<int64_t> axes, bool keepdims, const std::string& name) {
  return op(Op::ReduceSum, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}}, name);
}
Value ModelBuilder::reduce_mean(Value x, std::vector<int64_t> axes, bool keepdims, const std::string& name) {
  return op(Op::ReduceMean, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}}, name);
}
Value ModelBuilder::reduce_max(Value x, std::vector<int64_t> axes, bool keepdims, const std::string& name) {
  return op(Op::ReduceMax, {x}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}}, name);
}
Value ModelBuilder::causal_mask(Value x, int64_t offset, const std::string& name) {
  Attrs attrs;
  if (offset != 0) attrs.set("offset", offset);
  return op(Op::CausalMask, {x}, std::move(attrs), name);
}
Value ModelBuilder::cross_entropy(Value logits, Value targets, const std::string& name) {
  return op(Op::CrossEntropy, {logits, targets}, {}, name);
}
Value ModelBuilder::cross_entropy(Value logits, Value targets, int64_t ignore_index, const std::string& name) {
  return op(Op::CrossEntropy, {logits, targets}, {{"ignore_index", ignore_index}}, name);
}

void ModelBuilder::output(Value v) {
  if (usable({v})) graph_.outputs.push_back(v.id);
}

TensorType ModelBuilder::type(Value v) const {
  if (v.id < 0 || v.id >= static_cast<int32_t>(graph_.size())) return {};
  return graph_.node(v.id).type;
}

Result<ir::Graph> ModelBuilder::build() {
  if (!status_.is_ok()) return status_;
  ir::Graph g = std::move(graph_);
  graph_ = ir::Graph{};
  graph_.name = g.name;
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(g));
  return g;
}

}  // namespace volta
