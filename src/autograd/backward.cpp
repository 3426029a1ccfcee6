// build_backward: copy the forward graph, seed d loss = 1, walk the nodes in reverse
// topological order applying each op's rule, and sum the contributions each value receives
// in that fixed order.
#include <map>

#include "volta/autograd.h"
#include "volta/verify.h"

namespace volta::autograd {

Result<GradientGraph> build_backward(const ir::Graph& forward, const std::string& loss_name) {
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(forward));
  const int32_t loss = loss_name.empty() ? forward.outputs[0] : forward.find(loss_name);
  if (loss < 0) return not_found("loss '" + loss_name + "' is not a value of graph '" + forward.name + "'");
  const ir::Node& loss_node = forward.node(loss);
  if (loss_node.type != TensorType{DType::f32, {}})
    return invalid_argument("[" + std::string(ir::op_name(loss_node.op)) + "] the loss must be a scalar f32[] but '" +
                            loss_node.name + "' is " + loss_node.type.to_string() + " " + ir::node_ref(loss_node));
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, ir::topological_order(forward));

  // Which values need a gradient: those that depend on a trainable param and that the loss
  // depends on.
  const size_t n = forward.size();
  std::vector<bool> from_param(n, false), to_loss(n, false);
  GradientGraph out;
  for (int32_t id : order) {
    const ir::Node& node = forward.node(id);
    if (node.op == ir::Op::Param) {
      VOLTA_ASSIGN_OR_RETURN(int64_t trainable, node.attrs.get_int("trainable", 1));
      from_param[static_cast<size_t>(id)] = trainable != 0;
    }
    for (int32_t in : node.inputs) from_param[static_cast<size_t>(id)] = from_param[static_cast<size_t>(id)] || from_param[static_cast<size_t>(in)];
  }
  to_loss[static_cast<size_t>(loss)] = true;
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (to_loss[static_cast<size_t>(*it)])
      for (int32_t in : forward.node(*it).inputs) to_loss[static_cast<size_t>(in)] = true;

  ModelBuilder b(forward);
  std::map<int32_t, Value> grad;  // forward id -> accumulated gradient
  grad[loss] = b.scalar(1.0f, "grad." + loss_node.name);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node node = forward.node(*it);  // a copy: the builder grows the node vector
    auto g = grad.find(node.id);
    if (g == grad.end() || ir::is_leaf(node.op)) continue;
    bool any_input_needs = false;
    for (int32_t in : node.inputs) any_input_needs = any_input_needs || from_param[static_cast<size_t>(in)];
    if (!any_input_needs) continue;
    VOLTA_ASSIGN_OR_RETURN(std::vector<Value> contributions, grad_rule(b, node, Value{node.id}, g->second));
    if (!b.status().is_ok())
      return Status(b.status().code(), "gradient of " + ir::node_ref(node) + ": " + b.status().message());
    for (size_t i = 0; i < node.inputs.size() && i < contributions.size(); ++i) {
      const int32_t in = node.inputs[i];
      if (!contributions[i].valid() || !from_param[static_cast<size_t>(in)] || !to_loss[static_cast<size_t>(in)]) continue;
      auto [slot, fresh] = grad.emplace(in, contributions[i]);
      if (!fresh) slot->second = b.add(slot->second, contributions[i]);
    }
  }

  std::vector<std::pair<Value, std::string>> param_grads;
  for (const ir::Node& node : forward.nodes) {
    if (node.op != ir::Op::Param || !from_param[static_cast<size_t>(node.id)]) continue;
    auto g = grad.find(node.id);
    Value d = g != grad.end() ? g->second : b.op(ir::Op::Broadcast, {b.scalar(0.0f)}, {{"shape", node.type.shape}});
    param_grads.emplace_back(d, "grad." + node.name);
    out.params.push_back(node.name);
  }
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, b.build());  // build() verifies
  // Name each gradient "grad.<param>": rename its node when it is a fresh backward node of
  // its own, otherwise add a named copy (a value shared by two params, or a forward value).
  ModelBuilder named(std::move(g));
  std::vector<int32_t> grad_ids;
  std::vector<std::pair<int32_t, std::string>> renames;
  std::map<int32_t, bool> taken;
  for (auto& [v, name] : param_grads) {
    const bool fresh = v.id >= static_cast<int32_t>(forward.size()) && !taken[v.id];
    taken[v.id] = true;
    grad_ids.push_back(fresh ? v.id : named.reshape(v, named.type(v).shape, name).id);
    if (fresh) renames.emplace_back(v.id, name);
  }
  VOLTA_ASSIGN_OR_RETURN(out.graph, named.build());
  for (auto& [id, name] : renames) {
    if (out.graph.find(name) >= 0)
      return invalid_argument("gradient name '" + name + "' is already a value of graph '" + forward.name + "'");
    out.graph.node(id).name = name;
  }
  out.graph.outputs = {loss};
  for (int32_t id : grad_ids) out.graph.outputs.push_back(id);
  out.graph.name = forward.name + ".train";
  return out;
}

}  // namespace volta::autograd
