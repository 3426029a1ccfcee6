#include "volta/verify.h"

#include <set>
#include <string>

namespace volta::ir {

namespace {

Status bad(const Node& n, const std::string& msg) {
  return invalid_argument("[" + std::string(op_name(n.op)) + "] " + msg + " " + node_ref(n));
}

Status verify_leaf(const Node& n) {
  for (int64_t d : n.type.shape)
    if (d < 0) return bad(n, "negative dim in declared type " + n.type.to_string());
  if (Status s = check_attrs(n.op, n.attrs); !s.is_ok()) return Status(s.code(), s.message() + " " + node_ref(n));
  if (n.op == Op::Constant) {
    if (!n.value.defined()) return bad(n, "constant has no payload");
    if (n.value.type() != n.type)
      return bad(n, "payload " + n.value.type().to_string() + " does not match declared type " + n.type.to_string());
  }
  if (n.op == Op::Param) {
    auto init = n.attrs.get_string("init", "normal");
    if (!init.is_ok()) return bad(n, init.status().message());
    if (*init != "normal" && *init != "uniform" && *init != "zeros" && *init != "ones")
      return bad(n, "attribute 'init' must be normal, uniform, zeros or ones, got \"" + *init + "\"");
    auto trainable = n.attrs.get_int("trainable", 1);
    if (!trainable.is_ok()) return bad(n, trainable.status().message());
    if (*trainable != 0 && *trainable != 1) return bad(n, "attribute 'trainable' must be 0 or 1, got " + std::to_string(*trainable));
    // Trainable params are f32; state that is never differentiated (a step counter) may be an integer.
    if (n.type.dtype == DType::f64)
      return bad(n, "params are f32, or i32/i64 state that is never differentiated; got " + n.type.to_string());
    if (n.type.dtype != DType::f32 && *trainable != 0)
      return bad(n, "trainable params must be f32, got " + n.type.to_string());
    for (const char* key : {"std", "scale"}) {
      auto v = n.attrs.get_float(key, 0.0);
      if (!v.is_ok()) return bad(n, v.status().message());
      if (!(*v >= 0) || *v > 1e30) return bad(n, std::string("attribute '") + key + "' must be finite and >= 0");
    }
  }
  if (!n.inputs.empty()) return bad(n, "a leaf takes no inputs");
  return Status::ok();
}

}  // namespace

Status verify_graph(const Graph& g) {
  const int32_t n = static_cast<int32_t>(g.size());
  std::set<std::string> names;
  for (int32_t i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    if (node.id != i)
      return internal_error("node '" + node.name + "' has id " + std::to_string(node.id) + " at position " + std::to_string(i));
    if (node.name.empty()) return bad(node, "node " + std::to_string(i) + " has no name");
    if (!names.insert(node.name).second) return bad(node, "value '" + node.name + "' is defined twice");
    if (static_cast<int>(node.op) >= kNumOps)
      return invalid_argument("node '" + node.name + "' has an unknown op code");
    for (int32_t in : node.inputs)
      if (in < 0 || in >= n) return bad(node, "reads undefined value id " + std::to_string(in));
    if (is_leaf(node.op)) VOLTA_RETURN_IF_ERROR(verify_leaf(node));
  }
  if (g.outputs.empty()) return invalid_argument("graph '" + g.name + "' has no outputs");
  for (int32_t out : g.outputs)
    if (out < 0 || out >= n) return invalid_argument("graph output id " + std::to_string(out) + " is not a value");

  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, topological_order(g));
  for (int32_t id : order) {
    const Node& node = g.node(id);
    if (is_leaf(node.op)) continue;
    std::vector<TensorType> in;
    for (int32_t i : node.inputs) in.push_back(g.node(i).type);
    auto t = infer_type(node.op, in, node.attrs);
    if (!t.is_ok()) return Status(t.status().code(), t.status().message() + " " + node_ref(node));
    if (*t != node.type)
      return bad(node, "recorded type " + node.type.to_string() + " but the op's rule gives " + t->to_string());
    // In-place writes go to the model's state only, never to a caller's bound input or a constant.
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (writes_input(node.op, i) && g.node(node.inputs[i]).op != Op::Param)
        return bad(node, "writes '" + g.node(node.inputs[i]).name + "' in place, which must be a param (the model's state)");
  }
  return Status::ok();
}

}  // namespace volta::ir
