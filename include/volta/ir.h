// The SSA graph. Every node defines exactly one value, so a value is named by its node:
// node id == index in Graph::nodes, and the node's `type` is the value's shape and dtype.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "volta/op_id.h"
#include "volta/status.h"
#include "volta/tensor.h"

namespace volta::ir {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

// Attributes in a sorted map: printing, hashing and comparison see one fixed order.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  bool has(const std::string& key) const { return map_.count(key) != 0; }
  void set(const std::string& key, AttrValue v) {
    map_[key] = std::move(v);
    typed_.reset();
  }
  const std::map<std::string, AttrValue>& items() const { return map_; }
  bool operator==(const Attrs& o) const { return map_ == o.map_; }

  // The attributes parsed into the op's typed struct (volta/op_attrs.h), bound once when a plan
  // is made (bind_typed_attrs) so that kernels never look keys up; set() drops it.
  const std::shared_ptr<const void>& typed() const { return typed_; }
  void bind_typed(std::shared_ptr<const void> typed) { typed_ = std::move(typed); }

  // Typed getters fail with "[op] attribute 'key' ..." when present with the wrong type.
  Result<int64_t> get_int(const std::string& key, int64_t fallback) const;
  Result<double> get_float(const std::string& key, double fallback) const;  // ints widen
  Result<std::string> get_string(const std::string& key, std::string fallback) const;
  Result<std::vector<int64_t>> get_ints(const std::string& key) const;  // required

 private:
  std::map<std::string, AttrValue> map_;
  std::shared_ptr<const void> typed_;
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

// Diff: autograd has a rule for the op; NoGrad: its rule refuses, saying why.
enum class OpGrad : uint8_t { Diff, NoGrad };

// One attribute of an op's schema (ops.def's ATTR / OPT / REQ entries).
enum class AttrKind : uint8_t { Int, Float, Str, Ints };
enum class AttrPresence : uint8_t { Default, Optional, Required };
const char* attr_kind_name(AttrKind k);

struct AttrSpec {
  const char* name = nullptr;  // nullptr ends an op's list
  AttrKind kind = AttrKind::Int;
  AttrPresence presence = AttrPresence::Optional;
  int64_t int_default = 0;
  double float_default = 0.0;
  const char* str_default = "";
  const char* doc = "";

  static constexpr AttrSpec Int(const char* n, int64_t d, const char* doc) {
    return {n, AttrKind::Int, AttrPresence::Default, d, 0.0, "", doc};
  }
  static constexpr AttrSpec Float(const char* n, double d, const char* doc) {
    return {n, AttrKind::Float, AttrPresence::Default, 0, d, "", doc};
  }
  static constexpr AttrSpec Str(const char* n, const char* d, const char* doc) {
    return {n, AttrKind::Str, AttrPresence::Default, 0, 0.0, d, doc};
  }
  static constexpr AttrSpec optional(AttrKind k, const char* n, const char* doc) {
    return {n, k, AttrPresence::Optional, 0, 0.0, "", doc};
  }
  static constexpr AttrSpec required(AttrKind k, const char* n, const char* doc) {
    return {n, k, AttrPresence::Required, 0, 0.0, "", doc};
  }
};

constexpr size_t kMaxOpAttrs = 9;

// One row of ops.def: the op's whole contract.
struct OpInfo {
  const char* name;
  int min_inputs;
  int max_inputs;
  OpCategory category;
  OpGrad grad;
  const char* onnx;     // the ONNX op type it maps to one to one, or ""
  const char* inputs_doc;
  const char* result_doc;
  std::array<AttrSpec, kMaxOpAttrs> attrs;  // the schema, ended by a nameless entry

  // The schema entry of `key`, or nullptr when the op has no such attribute.
  const AttrSpec* attr(std::string_view key) const;
  size_t num_attrs() const;
};

// The table, one entry per ops.def row, in Op order.
inline constexpr std::array<OpInfo, kNumOps> kOpTable = {{
#define ATTR(kind, name, def, doc) AttrSpec::kind(#name, def, doc),
#define OPT(kind, name, doc) AttrSpec::optional(AttrKind::kind, #name, doc),
#define REQ(kind, name, doc) AttrSpec::required(AttrKind::kind, #name, doc),
#define VOLTA_OP(Id, name, min_in, max_in, category, grad, onnx, inputs, result, ...) \
  OpInfo{name, min_in, max_in, OpCategory::category, OpGrad::grad, onnx, inputs, result, {{__VA_ARGS__}}},
#include "volta/ops.def"
#undef VOLTA_OP
#undef REQ
#undef OPT
#undef ATTR
}};

constexpr const OpInfo& op_info(Op op) { return kOpTable[static_cast<size_t>(op)]; }
constexpr const char* op_name(Op op) { return op_info(op).name; }
Result<Op> parse_op(std::string_view name);
bool is_leaf(Op op);  // input, param, constant
// True when `op` writes its input `i` in place (the model's state: optimizer_update's param and
// slots, increment's counter, cache_write's and cache_attention's caches). Such a node is
// scheduled after every other reader of that input, and is never removed as dead: its effect is
// the write.
bool writes_input(Op op, size_t i);
// True when the op's value is its input 0's bytes after the op wrote them (cache_write): the
// planner makes it a view of that input, and the runtime still executes it.
bool output_is_input(Op op);
bool op_allows_attr(Op op, std::string_view attr);
// Checks `attrs` against the op's schema: no unknown keys, every required one present, each
// value of its kind (an Int widens to a Float). Errors read "[op] attribute 'key' ...".
Status check_attrs(Op op, const Attrs& attrs);

// The shape/dtype rule of `op`. Errors read "[op] <what is wrong>"; callers append the node.
Result<TensorType> infer_type(Op op, std::span<const TensorType> inputs, const Attrs& attrs);

// The shape [..., H, T, S] of the probabilities of a self-attention's q (plain [..., H, T, D],
// or with packed_heads H > 0: [..., T, 3 H D]) over `keys` keys: attention's stored ones and
// attention_grad's p.
Shape attention_probs_shape(const Shape& q, int64_t packed_heads, int64_t keys);

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
// The checked window of `op` for `spatial` dims; `kernel` is taken from the attributes (pools) or
// given (conv2d: the weight's trailing dims). window_attrs parses `attrs` (the shape rules);
// window_of reads node n's typed attributes (kernels, the exporter), an error naming the node.
Result<Window> window_attrs(Op op, const Attrs& attrs, size_t spatial, const std::vector<int64_t>* kernel = nullptr);
Result<Window> window_of(const Node& n, size_t spatial, const std::vector<int64_t>* kernel = nullptr);

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
