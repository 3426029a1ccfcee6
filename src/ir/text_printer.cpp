// The IR text printer (print_graph); the parser is text_parser.cpp. See include/volta/text.h.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "ir/text_internal.h"
#include "volta/text.h"

namespace volta::ir {
namespace text {

int64_t checked_numel(const Shape& shape) {
  if (shape.size() > kMaxRank) return -1;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d == 0) n = 0;
  }
  if (n == 0) return 0;
  for (int64_t d : shape) {
    int64_t next = 0;
    if (__builtin_mul_overflow(n, d, &next) || next > kMaxNumel) return -1;
    n = next;
  }
  return n;
}

}  // namespace text

namespace {

using text::checked_numel;

// Shortest round-trip text that always re-reads as a float literal.
template <typename F>
std::string float_text(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string int_text(int64_t v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string quote_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string attr_value_text(const AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return int_text(*i);
  if (const auto* d = std::get_if<double>(&v)) return float_text(*d);
  if (const auto* s = std::get_if<std::string>(&v)) return quote_string(*s);
  const auto& list = std::get<std::vector<int64_t>>(v);
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ',';
    out += int_text(list[i]);
  }
  out += ']';
  return out;
}

std::string ref_text(const Graph& g, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= g.nodes.size()) return "%<bad id " + std::to_string(id) + ">";
  return "%" + g.nodes[static_cast<size_t>(id)].name;
}

std::string payload_text(const Node& n) {
  const Tensor& t = n.value;
  if (!t.defined()) return "";
  int64_t count = checked_numel(t.shape());
  if (count < 0) return "";
  std::vector<std::string> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    switch (t.dtype()) {
      case DType::f32: items.push_back(float_text(t.data<float>()[i])); break;
      case DType::i32: items.push_back(int_text(t.data<int32_t>()[i])); break;
      case DType::i64: items.push_back(int_text(t.data<int64_t>()[i])); break;
      case DType::f64: items.push_back(float_text(static_cast<float>(t.data<double>()[i]))); break;
      case DType::bf16: items.push_back(float_text(bf16_to_f32(t.data<uint16_t>()[i]))); break;
      case DType::f16: items.push_back(float_text(f16_to_f32(t.data<uint16_t>()[i]))); break;
    }
  }
  if (n.type.shape.empty() && items.size() == 1) return items[0];
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i];
  }
  out += ']';
  return out;
}

}  // namespace

std::string print_graph(const Graph& g) { return print_graph(g, -1); }

std::string print_graph(const Graph& g, int64_t max_constant_values) {
  std::string out = "graph " + g.name + " {\n";
  for (const Node& n : g.nodes) {
    out += "  %" + n.name + ": " + n.type.to_string() + " = " + op_name(n.op) + "(";
    const bool elide = n.op == Op::Constant && max_constant_values >= 0 && n.value.defined() && n.value.numel() > max_constant_values;
    if (elide) {
      out += "...";
    } else if (n.op == Op::Constant) {
      out += payload_text(n);
    } else {
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (i) out += ", ";
        out += ref_text(g, n.inputs[i]);
      }
    }
    out += ")";
    const auto& items = n.attrs.items();
    if (!items.empty()) {
      out += " {";
      bool first = true;
      for (const auto& [key, value] : items) {
        if (!first) out += ", ";
        first = false;
        out += key + "=" + attr_value_text(value);
      }
      out += "}";
    }
    if (elide)
      out += "  # " + std::to_string(n.value.numel()) + " values, hash64 " + hash_to_hex(content_hash64(n.value.raw(), n.value.bytes()));
    out += "\n";
  }
  out += "  return";
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    out += i ? ", " : " ";
    out += ref_text(g, g.outputs[i]);
  }
  out += "\n}\n";
  return out;
}

}  // namespace volta::ir
