// The SSA graph. Every node defines exactly one value, so a value is named by its node:
// node id == index in Graph::nodes, and the node's `type` is the value's shape and dtype.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "volta/status.h"
#include "volta/tensor.h"

namespace volta::ir {

enum class Op : uint8_t {
#define VOLTA_OP(Id, name, min_in, max_in, attrs) Id,
#include "volta/ops.def"
#undef VOLTA_OP
};

constexpr int kNumOps = 0
#define VOLTA_OP(Id, name, min_in, max_in, attrs) +1
#include "volta/ops.def"
#undef VOLTA_OP
    ;

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

// Attributes in a sorted map: printing, hashing and comparison see one fixed order.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  bool has(const std::string& key) const { return map_.count(key) != 0; }
  void set(const std::string& key, AttrValue v) { map_[key] = std::move(v); }
  const std::map<std::string, AttrValue>& items() const { return map_; }
  bool operator==(const Attrs&) const = default;

  // Typed getters fail with "[op] attribute 'key' ..." when present with the wrong type.
  Result<int64_t> get_int(const std::string& key, int64_t fallback) const;
  Result<double> get_float(const std::string& key, double fallback) const;  // ints widen
  Result<std::string> get_string(const std::string& key, std::string fallback) const;
  Result<std::vector<int64_t>> get_ints(const std::string& key) const;  // required

 private:
  std::map<std::string, AttrValue> map_;
};

struct Node {
  int32_t id = -1;
  std::string name;  // unique in the graph; used in every error message
  Op op = Op::Input;
  std::vector<int32_t> inputs;  // node ids
  Attrs attrs;
  TensorType type;  // the defined value's type (declared for leaves, inferred otherwise)
  Tensor value;     // payload of a Constant, undefined otherwise
};

class Graph {
 public:
  std::string name = "main";
  std::vector<Node> nodes;
  std::vector<int32_t> outputs;

  const Node& node(int32_t id) const { return nodes[static_cast<size_t>(id)]; }
  Node& node(int32_t id) { return nodes[static_cast<size_t>(id)]; }
  size_t size() const { return nodes.size(); }
  // -1 when no node has that name.
  int32_t find(std::string_view name) const;
  // Ids of all nodes of the given op, in id order.
  std::vector<int32_t> nodes_of(Op op) const;
};

// ---- The op table -------------------------------------------------------------------

struct OpInfo {
  const char* name;
  int min_inputs;
  int max_inputs;
  const char* attrs;  // comma-separated allowed attribute names
};

const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).name; }
Result<Op> parse_op(std::string_view name);
bool is_leaf(Op op);  // input, param, constant
// True when `op` writes its input `i` in place (the model's state: optimizer_update's param and
// slots, increment's counter, cache_write's cache). Such a node is scheduled after every other
// reader of that input, and is never removed as dead: its effect is the write.
bool writes_input(Op op, size_t i);
// True when the op's value is its input 0's bytes after the op wrote them (cache_write): the
// planner makes it a view of that input, and the runtime still executes it.
bool output_is_input(Op op);
bool op_allows_attr(Op op, std::string_view attr);

// The shape/dtype rule of `op`. Errors read "[op] <what is wrong>"; callers append the node.
Result<TensorType> infer_type(Op op, std::span<const TensorType> inputs, const Attrs& attrs);

// Window geometry of conv2d, max_pool, avg_pool and their gradients over the spatial dims of an
// [N, C, spatial...] tensor. pads are [begin_0, begin_1, ..., end_0, end_1, ...] as in ONNX.
struct Window {
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t groups = 1;
  bool ceil_mode = false;
  bool count_include_pad = false;
  // Output extent of spatial dim d for an input extent `in` (>= 1 when the rule accepted it).
  int64_t out_dim(size_t d, int64_t in) const;
};
// Reads and checks the window attributes of `op` for `spatial` dims; `kernel` is taken from the
// attributes (pools) or given (conv2d: the weight's trailing dims).
Result<Window> window_attrs(Op op, const Attrs& attrs, size_t spatial, const std::vector<int64_t>* kernel = nullptr);

// Numpy-style broadcast of two shapes.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// "(node 'attn.q')" suffix for messages.
std::string node_ref(const Node& n);
// The name in a message's trailing node_ref suffix, or "" when it has none (the text
// parser uses it to point a verify error at the node's line).
std::string_view node_named_in(std::string_view message);

// A deterministic topological order (Kahn's algorithm, smallest ready id first).
// Fails naming a node on a cycle, or a node that reads an id outside the graph.
Result<std::vector<int32_t>> topological_order(const Graph& g);

// Re-derive every non-leaf type in schedule order (after changing input shapes).
// Fails naming the first node whose rule rejects its inputs.
Status infer_types(Graph& g);

}  // namespace volta::ir
