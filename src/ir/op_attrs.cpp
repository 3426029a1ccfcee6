#include "volta/op_attrs.h"

#include <array>

namespace volta::ir {

namespace detail {

Status read_attr(const Attrs& a, const char* key, int64_t& out) {
  VOLTA_ASSIGN_OR_RETURN(out, a.get_int(key, out));
  return Status::ok();
}
Status read_attr(const Attrs& a, const char* key, double& out) {
  VOLTA_ASSIGN_OR_RETURN(out, a.get_float(key, out));
  return Status::ok();
}
Status read_attr(const Attrs& a, const char* key, std::string& out) {
  VOLTA_ASSIGN_OR_RETURN(out, a.get_string(key, out));
  return Status::ok();
}
Status read_attr(const Attrs& a, const char* key, std::vector<int64_t>& out) {
  if (!a.has(key)) return Status::ok();
  VOLTA_ASSIGN_OR_RETURN(out, a.get_ints(key));
  return Status::ok();
}

}  // namespace detail

namespace {

using Binder = Result<std::shared_ptr<const void>> (*)(const Attrs&);

// One binder per op: its struct parsed and type-erased.
constexpr std::array<Binder, kNumOps> kBinders = {
#define VOLTA_OP(Id, ...)                                                   \
  [](const Attrs& a) -> Result<std::shared_ptr<const void>> {               \
    VOLTA_ASSIGN_OR_RETURN(attrs::Id v, parse_attrs<Op::Id>(a));            \
    return std::shared_ptr<const void>(std::make_shared<const attrs::Id>(std::move(v))); \
  },
#include "volta/ops.def"
#undef VOLTA_OP
};

}  // namespace

Status bind_typed_attrs(Graph& g) {
  for (Node& n : g.nodes) {
    auto typed = kBinders[static_cast<size_t>(n.op)](n.attrs);
    if (!typed.is_ok()) return invalid_argument("[" + std::string(op_name(n.op)) + "] " + typed.status().message() + " " + node_ref(n));
    n.attrs.bind_typed(std::move(typed).value());
  }
  return Status::ok();
}

}  // namespace volta::ir
