// Typed attributes: one struct per op, generated from ops.def's attribute schema (ATTR: a field
// with its default; OPT: std::optional, empty when absent; REQ: a field verify guarantees), so
// every default is written once, in ops.def. A plan binds each node's struct once
// (bind_typed_attrs, after verify); kernels read typed_attrs<op>(node) instead of looking keys up.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "volta/ir.h"

namespace volta::ir {

namespace attrs {
using Int = int64_t;
using Float = double;
using Str = std::string;
using Ints = std::vector<int64_t>;
template <typename T>
using Opt = std::optional<T>;

#define ATTR(kind, name, def, doc) kind name = def;
#define OPT(kind, name, doc) Opt<kind> name;
#define REQ(kind, name, doc) kind name{};
#define VOLTA_OP(Id, name, min_in, max_in, category, grad, onnx, inputs, result, ...) \
  struct Id {                                                                        \
    __VA_ARGS__                                                                      \
  };
#include "volta/ops.def"
#undef VOLTA_OP
#undef REQ
#undef OPT
#undef ATTR
}  // namespace attrs

template <Op op>
struct AttrsFor;
#define VOLTA_OP(Id, ...) \
  template <>            \
  struct AttrsFor<Op::Id> { using type = attrs::Id; };
#include "volta/ops.def"
#undef VOLTA_OP
template <Op op>
using AttrsOf = typename AttrsFor<op>::type;

namespace detail {
// Reads `key` into `out` when present (absent: `out` keeps its default); a wrong kind is an error.
Status read_attr(const Attrs& a, const char* key, int64_t& out);
Status read_attr(const Attrs& a, const char* key, double& out);
Status read_attr(const Attrs& a, const char* key, std::string& out);
Status read_attr(const Attrs& a, const char* key, std::vector<int64_t>& out);
template <typename T>
Status read_attr(const Attrs& a, const char* key, std::optional<T>& out) {
  out.reset();
  if (!a.has(key)) return Status::ok();
  T v{};
  VOLTA_RETURN_IF_ERROR(read_attr(a, key, v));
  out = std::move(v);
  return Status::ok();
}
}  // namespace detail

// The attributes of an `op` node as its struct.
template <Op op>
Result<AttrsOf<op>> parse_attrs(const Attrs& a);
#define ATTR(kind, name, def, doc) VOLTA_RETURN_IF_ERROR(detail::read_attr(a, #name, out.name));
#define OPT(kind, name, doc) VOLTA_RETURN_IF_ERROR(detail::read_attr(a, #name, out.name));
#define REQ(kind, name, doc) VOLTA_RETURN_IF_ERROR(detail::read_attr(a, #name, out.name));
#define VOLTA_OP(Id, name, min_in, max_in, category, grad, onnx, inputs, result, ...) \
  template <>                                                                        \
  inline Result<attrs::Id> parse_attrs<Op::Id>([[maybe_unused]] const Attrs& a) {   \
    attrs::Id out;                                                                   \
    __VA_ARGS__                                                                      \
    return out;                                                                      \
  }
#include "volta/ops.def"
#undef VOLTA_OP
#undef REQ
#undef OPT
#undef ATTR

// Binds every node's typed struct (Attrs::bind_typed); an error names the node. Runtime::compile
// calls it on the verified graph a plan is made from.
Status bind_typed_attrs(Graph& g);

// A node's typed attributes as typed_attrs returns them: the struct bound with the plan,
// borrowed (the node outlives the kernel call that reads it), or one parsed now and owned. A
// decode token's kernels read them tens of times, so the bound case takes no reference count
// (an atomic add and subtract a read, on a count the threads share).
template <typename T>
class AttrsRef {
 public:
  explicit AttrsRef(const T* bound) : p_(bound) {}
  explicit AttrsRef(T parsed) : owned_(std::make_shared<const T>(std::move(parsed))), p_(owned_.get()) {}
  const T& operator*() const { return *p_; }
  const T* operator->() const { return p_; }

 private:
  std::shared_ptr<const T> owned_;  // (declared first: p_ points into it)
  const T* p_;
};

// The typed attributes of node n, an `op` node: the struct bound with its plan, or parsed now (a
// node outside a plan: constant folding, tests).
template <Op op>
Result<AttrsRef<AttrsOf<op>>> typed_attrs(const Node& n) {
  if (n.op != op)
    return internal_error("[" + std::string(op_name(n.op)) + "] read as the attributes of " + op_name(op) + " " + node_ref(n));
  if (n.attrs.typed()) return AttrsRef<AttrsOf<op>>(static_cast<const AttrsOf<op>*>(n.attrs.typed().get()));
  auto parsed = parse_attrs<op>(n.attrs);
  if (!parsed.is_ok()) return invalid_argument("[" + std::string(op_name(op)) + "] " + parsed.status().message() + " " + node_ref(n));
  return AttrsRef<AttrsOf<op>>(std::move(parsed).value());
}

// A field several ops' structs share, read from node n whichever of `first, rest...` it is: the
// kernels one function serves (the norms' eps, the reductions' axes),
// field_of<Op::LayerNorm, Op::RmsNorm>(n, [](const auto& a) { return a.eps; }).
template <Op first, Op... rest, typename Get>
auto field_of(const Node& n, Get get) -> Result<decltype(get(std::declval<const AttrsOf<first>&>()))> {
  if (n.op == first) {
    VOLTA_ASSIGN_OR_RETURN(const auto a, typed_attrs<first>(n));
    return get(*a);
  }
  if constexpr (sizeof...(rest) > 0) {
    return field_of<rest...>(n, get);
  } else {
    return internal_error("[" + std::string(op_name(n.op)) + "] has none of the attributes asked for " + node_ref(n));
  }
}

}  // namespace volta::ir
