#include <queue>

#include "volta/ir.h"

namespace volta::ir {

namespace {
const char* kind_of(const AttrValue& v) {
  switch (v.index()) {
    case 0: return "an integer";
    case 1: return "a float";
    case 2: return "a string";
    default: return "an integer list";
  }
}
Status wrong_kind(const std::string& key, const AttrValue& v, const char* want) {
  return invalid_argument("attribute '" + key + "' must be " + want + " but is " + kind_of(v));
}
}  // namespace

Result<int64_t> Attrs::get_int(const std::string& key, int64_t fallback) const {
  auto it = map_.find(key);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return *v;
  return wrong_kind(key, it->second, "an integer");
}

Result<double> Attrs::get_float(const std::string& key, double fallback) const {
  auto it = map_.find(key);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  if (const auto* v = std::get_if<int64_t>(&it->second)) return static_cast<double>(*v);
  return wrong_kind(key, it->second, "a number");
}

Result<std::string> Attrs::get_string(const std::string& key, std::string fallback) const {
  auto it = map_.find(key);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
  return wrong_kind(key, it->second, "a string");
}

Result<std::vector<int64_t>> Attrs::get_ints(const std::string& key) const {
  auto it = map_.find(key);
  if (it == map_.end()) return invalid_argument("missing attribute '" + key + "'");
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return *v;
  return wrong_kind(key, it->second, "an integer list");
}

int32_t Graph::find(std::string_view n) const {
  for (const Node& node : nodes)
    if (node.name == n) return node.id;
  return -1;
}

std::vector<int32_t> Graph::nodes_of(Op op) const {
  std::vector<int32_t> ids;
  for (const Node& n : nodes)
    if (n.op == op) ids.push_back(n.id);
  return ids;
}

std::string node_ref(const Node& n) { return "(node '" + n.name + "')"; }

std::string_view node_named_in(std::string_view message) {
  constexpr std::string_view kOpen = "(node '", kClose = "')";
  if (message.size() < kOpen.size() + kClose.size() || !message.ends_with(kClose)) return {};
  size_t at = message.rfind(kOpen);
  if (at == std::string_view::npos) return {};
  size_t begin = at + kOpen.size();
  return message.substr(begin, message.size() - kClose.size() - begin);
}

Result<std::vector<int32_t>> topological_order(const Graph& g) {
  const int32_t n = static_cast<int32_t>(g.size());
  std::vector<int32_t> pending(g.size(), 0);
  std::vector<std::vector<int32_t>> users(g.size());
  for (const Node& node : g.nodes) {
    for (int32_t in : node.inputs) {
      if (in < 0 || in >= n)
        return invalid_argument("[" + std::string(op_name(node.op)) + "] input id " + std::to_string(in) +
                                " is not a value of the graph " + node_ref(node));
      users[static_cast<size_t>(in)].push_back(node.id);
      ++pending[static_cast<size_t>(node.id)];
    }
  }
  // Smallest ready id first: a graph already in topological order keeps its order.
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
  for (int32_t i = 0; i < n; ++i)
    if (pending[static_cast<size_t>(i)] == 0) ready.push(i);
  std::vector<int32_t> order;
  order.reserve(g.size());
  while (!ready.empty()) {
    int32_t id = ready.top();
    ready.pop();
    order.push_back(id);
    for (int32_t u : users[static_cast<size_t>(id)])
      if (--pending[static_cast<size_t>(u)] == 0) ready.push(u);
  }
  if (order.size() != g.size()) {
    // Any node left over lies on, or behind, a cycle; name the smallest one on a cycle.
    for (int32_t i = 0; i < n; ++i) {
      if (pending[static_cast<size_t>(i)] == 0) continue;
      // Walk back through unfinished inputs until a node repeats: that node is on a cycle.
      std::vector<int32_t> seen_at(g.size(), -1);
      int32_t cur = i;
      for (int32_t step = 0; seen_at[static_cast<size_t>(cur)] < 0; ++step) {
        seen_at[static_cast<size_t>(cur)] = step;
        for (int32_t in : g.node(cur).inputs)
          if (pending[static_cast<size_t>(in)] > 0) {
            cur = in;
            break;
          }
      }
      const Node& on = g.node(cur);
      return invalid_argument("[" + std::string(op_name(on.op)) + "] value '" + on.name + "' depends on itself (cycle) " +
                              node_ref(on));
    }
  }
  return order;
}

Status infer_types(Graph& g) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, topological_order(g));
  for (int32_t id : order) {
    Node& node = g.node(id);
    if (is_leaf(node.op)) continue;
    std::vector<TensorType> in;
    for (int32_t i : node.inputs) in.push_back(g.node(i).type);
    auto t = infer_type(node.op, in, node.attrs);
    if (!t.is_ok()) return Status(t.status().code(), t.status().message() + " " + node_ref(node));
    node.type = *t;
  }
  return Status::ok();
}

}  // namespace volta::ir
