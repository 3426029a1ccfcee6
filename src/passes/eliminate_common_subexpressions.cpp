// Precondition: a verified graph. Two nodes are the same expression when op, (merged) inputs,
// attributes, type and constant payload agree. Inputs and params are distinct by identity.
#include <cstring>
#include <map>
#include <string>

#include "rewrite.h"
#include "volta/passes.h"

namespace volta::passes {

namespace {

std::string attr_key(const ir::AttrValue& v) {
  switch (v.index()) {
    case 0: return "i" + std::to_string(std::get<int64_t>(v));
    case 1: {
      double d = std::get<double>(v);
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);  // bit pattern: 0.0 and -0.0 stay apart
      return "f" + std::to_string(bits);
    }
    case 2: return "s" + std::to_string(std::get<std::string>(v).size()) + ":" + std::get<std::string>(v);
    default: {
      std::string s = "l";
      for (int64_t x : std::get<std::vector<int64_t>>(v)) s += std::to_string(x) + ",";
      return s;
    }
  }
}

constexpr size_t kInlinePayloadBytes = 4096;

// A description of the expression, used as an ordered-map key: byte-exact but for large
// constants, which also compare their bytes on a match.
std::string expression_key(const ir::Node& n, const std::vector<int32_t>& inputs) {
  std::string key = std::to_string(static_cast<int>(n.op)) + "|" + n.type.to_string() + "|";
  for (int32_t in : inputs) key += std::to_string(in) + ",";
  key += "|";
  for (const auto& [name, value] : n.attrs.items()) key += name + "=" + attr_key(value) + ";";
  // A constant's payload is in the key up to 4 KiB; a larger one (imported weights) by its size and
  // hash, and a match is checked byte for byte before two are merged.
  if (n.op == ir::Op::Constant && n.value.bytes() <= kInlinePayloadBytes)
    key.append(reinterpret_cast<const char*>(n.value.raw()), n.value.bytes());
  else if (n.op == ir::Op::Constant)
    key += "#" + std::to_string(n.value.bytes()) + ":" + hash_to_hex(content_hash64(n.value.raw(), n.value.bytes()));
  return key;
}

}  // namespace

Result<ir::Graph> eliminate_common_subexpressions(const ir::Graph& g) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<int32_t> order, ir::topological_order(g));
  std::vector<int32_t> replace(g.size());
  for (size_t i = 0; i < g.size(); ++i) replace[i] = static_cast<int32_t>(i);
  std::map<std::string, int32_t> seen;
  for (int32_t id : order) {
    const ir::Node& n = g.node(id);
    if (n.op == ir::Op::Input || n.op == ir::Op::Param) continue;
    bool writes = false;  // two writes of state are two effects, never one
    for (size_t i = 0; i < n.inputs.size(); ++i) writes = writes || ir::writes_input(n.op, i);
    if (writes) continue;
    std::vector<int32_t> inputs;
    for (int32_t in : n.inputs) inputs.push_back(replace[static_cast<size_t>(in)]);
    auto [it, inserted] = seen.emplace(expression_key(n, inputs), id);
    // Keep the lowest id of each class so results do not depend on the visiting order.
    if (!inserted && n.op == ir::Op::Constant && !n.value.bitwise_equal(g.node(it->second).value)) continue;  // a hash collision
    if (!inserted) {
      int32_t keep = std::min(it->second, id), drop = std::max(it->second, id);
      replace[static_cast<size_t>(drop)] = keep;
      it->second = keep;
    }
  }
  return rebuild(g, replace);
}

}  // namespace volta::passes
