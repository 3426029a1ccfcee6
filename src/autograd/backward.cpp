// build_backward: copy the forward graph, seed d loss = 1, walk the nodes in reverse
// topological order applying each op's rule, and sum the contributions each value receives
// in that fixed order. Slices of one value that cut an axis into consecutive pieces (a fused
// q/k/v projection split into heads) give their gradients back as one concat, not as a zero pad
// per piece summed: every element is its piece's gradient unchanged, where the pads' sum gives
// x + 0 (the same but for -0, which becomes +0) after a pass over memory per piece.
#include <algorithm>
#include <map>

#include "volta/autograd.h"
#include "volta/verify.h"

namespace volta::autograd {

namespace {

// One contribution to a value's gradient: a value of its type, or the gradient `v` of a slice of
// it (`axis`, elements [start, start + length of v)), which still needs its zero padding.
struct Contribution {
  Value v;
  bool slice = false;
  int64_t axis = 0, start = 0;
};

Result<Contribution> slice_piece(const ir::Graph& forward, const ir::Node& slice, Value dy) {
  VOLTA_ASSIGN_OR_RETURN(int64_t axis, slice.attrs.get_int("axis", 0));
  VOLTA_ASSIGN_OR_RETURN(int64_t start, slice.attrs.get_int("start", 0));
  const Shape& xs = forward.node(slice.inputs[0]).type.shape;
  if (axis < 0) axis += static_cast<int64_t>(xs.size());
  const int64_t dim = xs[static_cast<size_t>(axis)];
  return Contribution{dy, true, axis, std::clamp(start < 0 ? start + dim : start, int64_t{0}, dim)};
}

// The gradient of `x` from its contributions: slices that cut one axis into consecutive pieces
// (each element once) concatenated; otherwise each slice's piece zero-padded, and all summed in
// arrival order.
Value sum_contributions(ModelBuilder& b, const ir::Node& x, const std::vector<Contribution>& parts) {
  auto length = [&](const Contribution& c) { return b.type(c.v).shape[static_cast<size_t>(c.axis)]; };
  if (parts.size() >= 2 && std::all_of(parts.begin(), parts.end(), [&](const Contribution& c) {
        return c.slice && c.axis == parts[0].axis;
      })) {
    std::vector<Contribution> sorted = parts;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Contribution& a, const Contribution& c) { return a.start < c.start; });
    int64_t end = 0;
    for (const Contribution& c : sorted) end = c.start == end ? end + length(c) : -1;
    if (end == x.type.shape[static_cast<size_t>(parts[0].axis)]) {
      std::vector<Value> pieces;
      for (const Contribution& c : sorted) pieces.push_back(c.v);
      return b.concat(pieces, parts[0].axis);
    }
  }
  Value sum;
  for (const Contribution& c : parts) {
    Value v = c.v;
    if (c.slice) {
      const int64_t after = x.type.shape[static_cast<size_t>(c.axis)] - c.start - length(c);
      v = b.op(ir::Op::Pad, {v}, {{"axis", c.axis}, {"before", c.start}, {"after", after}});
    }
    sum = sum.valid() ? b.add(sum, v) : v;
  }
  return sum;
}

}  // namespace

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
  // forward id -> its gradient's contributions, in arrival order; summed (or concatenated) when
  // the node is reached, after all its readers.
  std::map<int32_t, std::vector<Contribution>> pending;
  std::map<int32_t, Value> grad;  // forward id -> its gradient, once summed
  pending[loss].push_back({b.scalar(1.0f, "grad." + loss_node.name)});
  auto gradient = [&](int32_t id) -> Value {
    auto p = pending.find(id);
    if (p == pending.end()) return Value{};
    auto [slot, fresh] = grad.emplace(id, Value{});
    if (fresh) slot->second = sum_contributions(b, forward.node(id), p->second);
    return slot->second;
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const ir::Node node = forward.node(*it);  // a copy: the builder grows the node vector
    if (ir::is_leaf(node.op) || !pending.count(node.id)) continue;
    bool any_input_needs = false;
    for (int32_t in : node.inputs) any_input_needs = any_input_needs || from_param[static_cast<size_t>(in)];
    if (!any_input_needs) continue;
    const Value dy = gradient(node.id);
    if (!b.status().is_ok())
      return Status(b.status().code(), "gradient of " + ir::node_ref(node) + ": " + b.status().message());
    if (node.op == ir::Op::Slice) {  // kept as a piece: sum_contributions pads it or concatenates
      const int32_t in = node.inputs[0];
      if (!from_param[static_cast<size_t>(in)] || !to_loss[static_cast<size_t>(in)]) continue;
      VOLTA_ASSIGN_OR_RETURN(Contribution piece, slice_piece(forward, node, dy));
      pending[in].push_back(piece);
      continue;
    }
    VOLTA_ASSIGN_OR_RETURN(std::vector<Value> contributions, grad_rule(b, node, Value{node.id}, dy));
    if (!b.status().is_ok())
      return Status(b.status().code(), "gradient of " + ir::node_ref(node) + ": " + b.status().message());
    for (size_t i = 0; i < node.inputs.size() && i < contributions.size(); ++i) {
      const int32_t in = node.inputs[i];
      if (!contributions[i].valid() || !from_param[static_cast<size_t>(in)] || !to_loss[static_cast<size_t>(in)]) continue;
      pending[in].push_back({contributions[i]});
    }
  }

  std::vector<std::pair<Value, std::string>> param_grads;
  for (const ir::Node& node : forward.nodes) {
    if (node.op != ir::Op::Param || !from_param[static_cast<size_t>(node.id)]) continue;
    Value d = gradient(node.id);
    if (!d.valid()) d = b.op(ir::Op::Broadcast, {b.scalar(0.0f)}, {{"shape", node.type.shape}});
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
