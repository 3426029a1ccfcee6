// The IR text parser and file loader (parse_graph, load_graph); the printer is text_printer.cpp.
// See include/volta/text.h.
//
// The parser is a single forward scan over the bytes with an explicit cursor (text_lexer.h): no
// recursion, no exceptions, every read bounds-checked. Statements are collected first (with the
// source location of every piece that can be wrong), then names are resolved (forward references
// are allowed), then computed types are inferred in topological order and checked against the
// declared ones.
#include "volta/text.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "io/file.h"
#include "ir/text_internal.h"
#include "ir/text_lexer.h"
#include "volta/verify.h"

namespace volta::ir {
namespace {

using namespace text;

struct Literal {  // a number as written, checked when its type is known
  std::string_view text;
  Loc loc;
};

struct Ref {
  std::string_view name;
  Loc loc;
};

struct Stmt {
  std::string_view name;
  Loc name_loc;
  bool has_type = false;
  TensorType type;
  Loc type_loc;
  Op op = Op::Input;
  Loc op_loc;
  std::vector<Ref> args;
  std::vector<Literal> payload;
  Loc payload_loc;
  Attrs attrs;
};

class Parser : Lexer {
 public:
  Parser(std::string_view text, std::string_view source) : Lexer(text, source) {}

  Result<Graph> run();
  // verify_graph on the parsed graph, its error pointed at the line of the node it names.
  Status verify(const Graph& g) const;

 private:
  // -- grammar --
  Status parse_header();
  Status parse_statement();
  Status parse_return();
  Status parse_type(TensorType& out);
  Status parse_payload(Stmt& st);
  Status parse_attrs(Stmt& st);
  Status parse_attr_value(AttrValue& out);
  Status parse_int(std::string_view tok, Loc at, int64_t& out) const;
  Status finish(Graph& g);
  Status build_constant(const Stmt& st, Node& n) const;

  std::string graph_name_;
  std::vector<Stmt> stmts_;
  std::unordered_map<std::string_view, size_t> defined_;  // name -> statement index
  bool has_return_ = false;
  Loc return_loc_;
  std::vector<Ref> outputs_;
};

Status Parser::parse_header() {
  skip_blank();
  Loc at = loc();
  std::string_view kw = take_ident();
  if (kw != "graph") {
    pos_ = pos_ - kw.size();
    return error(at, "expected 'graph' but found " + found());
  }
  skip_ws();
  std::string_view name = take_ident();
  if (name.empty()) return expected("a graph name");
  graph_name_ = std::string(name);
  skip_ws();
  VOLTA_RETURN_IF_ERROR(expect_char('{'));
  skip_ws();
  if (!at_eol()) return expected("end of line after '{'");
  return Status::ok();
}

Status Parser::parse_type(TensorType& out) {
  Loc at = loc();
  std::string_view dt = take_ident();
  if (dt.empty()) return expected("a type such as 'f32[2,3]'");
  auto parsed = parse_dtype(dt);
  if (!parsed.is_ok()) return error(at, "unknown dtype " + describe(dt) + " (expected f32, i32 or i64)");
  out.dtype = *parsed;
  out.shape.clear();
  skip_ws();
  VOLTA_RETURN_IF_ERROR(expect_char('['));
  skip_ws();
  if (take(']')) return Status::ok();
  for (;;) {
    skip_ws();
    Loc dim_loc = loc();
    if (!is_digit(peek()) && peek() != '-' && peek() != '+') return expected("a dimension");
    std::string_view tok = take_number();
    bool all_digits = !tok.empty();
    for (char c : tok) all_digits = all_digits && is_digit(c);
    if (!all_digits) return error(dim_loc, "expected a non-negative integer dimension but found " + describe(tok));
    uint64_t d = 0;
    auto r = std::from_chars(tok.data(), tok.data() + tok.size(), d);
    if (r.ec != std::errc() || r.ptr != tok.data() + tok.size() || d > static_cast<uint64_t>(kMaxDim)) {
      return error(dim_loc, "dimension " + describe(tok) + " is too large (the maximum is 2^40)");
    }
    if (out.shape.size() >= kMaxRank) {
      return error(dim_loc, "too many dimensions (the maximum rank is " + std::to_string(kMaxRank) + ")");
    }
    out.shape.push_back(static_cast<int64_t>(d));
    skip_ws();
    VOLTA_ASSIGN_OR_RETURN(const bool more, list_continues(']', "',' or ']' in the shape"));
    if (!more) break;
  }
  if (checked_numel(out.shape) < 0) {
    return error(at, "type " + out.to_string() + " has too many elements (the maximum is 2^60)");
  }
  return Status::ok();
}

Status Parser::parse_int(std::string_view tok, Loc at, int64_t& out) const {
  std::string_view body = tok;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  bool all_digits = !body.empty();
  for (char c : body) all_digits = all_digits && is_digit(c);
  if (!all_digits) return error(at, "expected an integer but found " + describe(tok));
  // from_chars rejects a leading '+'.
  std::string_view digits = (!tok.empty() && tok[0] == '+') ? tok.substr(1) : tok;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) {
    return error(at, "integer " + describe(tok) + " is out of range for a 64-bit integer");
  }
  return Status::ok();
}

Status Parser::parse_attr_value(AttrValue& out) {
  Loc at = loc();
  char c = peek();
  if (at_end() || c == '\n') return expected("an attribute value");
  if (c == '"') {
    ++pos_;
    std::string value;
    for (;;) {
      if (at_end() || s_[pos_] == '\n') return error(at, "unterminated string");
      char ch = s_[pos_];
      if (ch == '"') {
        ++pos_;
        break;
      }
      if (ch == '\\') {
        char next = peek_at(1);
        if (pos_ + 1 < s_.size() && (next == '"' || next == '\\')) {
          value += next;
          pos_ += 2;
          continue;
        }
        Loc esc = loc();
        return error(esc, "unsupported escape in string (only \\\" and \\\\ are allowed)");
      }
      value += ch;
      ++pos_;
    }
    out = std::move(value);
    return Status::ok();
  }
  if (c == '[') {
    ++pos_;
    std::vector<int64_t> list;
    skip_ws();
    if (take(']')) {
      out = std::move(list);
      return Status::ok();
    }
    for (;;) {
      skip_ws();
      Loc item_loc = loc();
      char ic = peek();
      if (at_end() || !(is_digit(ic) || ic == '-' || ic == '+' || ic == '.' || is_ident_start(ic))) {
        return expected("an integer in the list");
      }
      std::string_view tok = take_number();
      int64_t v = 0;
      VOLTA_RETURN_IF_ERROR(parse_int(tok, item_loc, v));
      list.push_back(v);
      skip_ws();
      VOLTA_ASSIGN_OR_RETURN(const bool more, list_continues(']', "',' or ']' in the list"));
      if (!more) break;
    }
    out = std::move(list);
    return Status::ok();
  }
  if (is_digit(c) || c == '-' || c == '+' || c == '.' || is_ident_start(c)) {
    std::string_view tok = take_number();
    bool is_float = false;
    if (!classify_number(tok, is_float)) {
      return error(at, "expected an attribute value (number, string or integer list) but found " + describe(tok));
    }
    if (is_float) {
      double d = 0;
      if (!parse_float_text(tok, d)) return error(at, "number " + describe(tok) + " is out of range for a double");
      out = d;
      return Status::ok();
    }
    int64_t v = 0;
    VOLTA_RETURN_IF_ERROR(parse_int(tok, at, v));
    out = v;
    return Status::ok();
  }
  return expected("an attribute value (number, string or integer list)");
}

Status Parser::parse_attrs(Stmt& st) {
  // The cursor is on '{'.
  ++pos_;
  skip_ws();
  if (take('}')) return Status::ok();
  for (;;) {
    skip_ws();
    Loc key_loc = loc();
    std::string_view key = take_ident();
    if (key.empty()) return expected("an attribute name");
    std::string key_str(key);
    if (!op_allows_attr(st.op, key)) {
      return error(key_loc, "unknown attribute '" + key_str + "' for op '" + op_name(st.op) + "'");
    }
    if (st.attrs.has(key_str)) return error(key_loc, "duplicate attribute '" + key_str + "'");
    skip_ws();
    VOLTA_RETURN_IF_ERROR(expect_char('='));
    skip_ws();
    AttrValue value;
    VOLTA_RETURN_IF_ERROR(parse_attr_value(value));
    st.attrs.set(key_str, std::move(value));
    skip_ws();
    VOLTA_ASSIGN_OR_RETURN(const bool more, list_continues('}', "',' or '}' after the attribute"));
    if (!more) break;
  }
  return Status::ok();
}

Status Parser::parse_payload(Stmt& st) {
  skip_ws();
  st.payload_loc = loc();
  auto is_number_start = [](char ch) {
    return is_digit(ch) || ch == '-' || ch == '+' || ch == '.' || is_ident_start(ch);
  };
  if (take('[')) {
    skip_ws();
    if (take(']')) return Status::ok();
    for (;;) {
      skip_ws();
      Loc item_loc = loc();
      if (at_end() || !is_number_start(peek())) return expected("a number in the constant payload");
      st.payload.push_back({take_number(), item_loc});
      skip_ws();
      VOLTA_ASSIGN_OR_RETURN(const bool more, list_continues(']', "',' or ']' in the constant payload"));
      if (!more) break;
    }
    return Status::ok();
  }
  if (!at_end() && is_number_start(peek())) {
    Loc item_loc = loc();
    st.payload.push_back({take_number(), item_loc});
    return Status::ok();
  }
  return expected("a constant payload (a number or '[...]')");
}

Status Parser::parse_statement() {
  Stmt st;
  st.name_loc = loc();
  ++pos_;  // '%'
  st.name = take_ident();
  if (st.name.empty()) return expected("a value name after '%'");
  if (auto it = defined_.find(st.name); it != defined_.end()) {
    return error(st.name_loc, "'%" + std::string(st.name) + "' is defined twice (first at line " +
                                  std::to_string(stmts_[it->second].name_loc.line) + ")");
  }
  skip_ws();
  if (take(':')) {
    skip_ws();
    st.type_loc = loc();
    st.has_type = true;
    VOLTA_RETURN_IF_ERROR(parse_type(st.type));
    skip_ws();
  }
  VOLTA_RETURN_IF_ERROR(expect_char('='));
  skip_ws();
  st.op_loc = loc();
  std::string_view op_text = take_ident();
  if (op_text.empty()) return expected("an op name");
  auto op = parse_op(op_text);
  if (!op.is_ok()) return error(st.op_loc, "unknown op " + describe(op_text));
  st.op = *op;
  if (is_leaf(st.op) && !st.has_type) {
    return error(st.name_loc, "'%" + std::string(st.name) + "' needs a declared type (" + op_name(st.op) +
                                  " values are not inferred), e.g. '%" + std::string(st.name) + ": f32[4] = " +
                                  op_name(st.op) + "(...)'");
  }
  skip_ws();
  VOLTA_RETURN_IF_ERROR(expect_char('('));
  skip_ws();
  if (st.op == Op::Constant) {
    VOLTA_RETURN_IF_ERROR(parse_payload(st));
    skip_ws();
    VOLTA_RETURN_IF_ERROR(expect_char(')'));
  } else {
    if (!take(')')) {
      for (;;) {
        skip_ws();
        Loc ref_loc = loc();
        if (!take('%')) return expected(st.args.empty() ? "a value reference '%name' or ')'" : "a value reference '%name'");
        std::string_view ref = take_ident();
        if (ref.empty()) return expected("a value name after '%'");
        st.args.push_back({ref, ref_loc});
        skip_ws();
        VOLTA_ASSIGN_OR_RETURN(const bool more, list_continues(')', "',' or ')'"));
        if (!more) break;
      }
    }
    const OpInfo& info = op_info(st.op);
    int64_t n = static_cast<int64_t>(st.args.size());
    if (n < info.min_inputs || n > info.max_inputs) {
      std::string takes = info.min_inputs == info.max_inputs
                              ? std::to_string(info.min_inputs)
                              : std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
      return error(st.op_loc, std::string("op '") + info.name + "' takes " + takes +
                                  (info.max_inputs == 1 ? " input" : " inputs") + " but got " + std::to_string(n));
    }
  }
  skip_ws();
  if (peek() == '{' && !at_end()) VOLTA_RETURN_IF_ERROR(parse_attrs(st));
  defined_.emplace(st.name, stmts_.size());
  stmts_.push_back(std::move(st));
  return Status::ok();
}

Status Parser::parse_return() {
  // The cursor is just past 'return'.
  for (;;) {
    skip_ws();
    Loc ref_loc = loc();
    if (!take('%')) return expected("a value reference '%name'");
    std::string_view ref = take_ident();
    if (ref.empty()) return expected("a value name after '%'");
    outputs_.push_back({ref, ref_loc});
    skip_ws();
    if (take(',')) continue;
    break;
  }
  return Status::ok();
}

Status Parser::build_constant(const Stmt& st, Node& n) const {
  int64_t count = checked_numel(st.type.shape);
  if (count < 0 || static_cast<uint64_t>(count) != st.payload.size()) {
    return error(st.payload_loc, "constant payload has " + std::to_string(st.payload.size()) +
                                     (st.payload.size() == 1 ? " value" : " values") + " but " + st.type.to_string() +
                                     " needs " + std::to_string(count));
  }
  Tensor t = Tensor::zeros(st.type.dtype, st.type.shape);
  for (size_t i = 0; i < st.payload.size(); ++i) {
    const Literal& lit = st.payload[i];
    bool is_float = false;
    if (!classify_number(lit.text, is_float)) {
      return error(lit.loc, "expected a number but found " + describe(lit.text));
    }
    switch (st.type.dtype) {
      case DType::f64:  // the parser never declares f64 (parse_dtype knows f32, i32, i64)
        return error(lit.loc, "f64 constants are not part of the text format");
      case DType::f32:
      case DType::bf16:
      case DType::f16: {  // a half constant is the f32 value rounded to nearest even
        float v = 0;
        if (!parse_float_text(lit.text, v)) {
          return error(lit.loc, "number " + describe(lit.text) + " is out of range for f32");
        }
        if (st.type.dtype == DType::f32) t.data<float>()[i] = v;
        else t.data<uint16_t>()[i] = st.type.dtype == DType::bf16 ? f32_to_bf16(v) : f32_to_f16(v);
        break;
      }
      case DType::i32:
      case DType::i64: {
        const char* dt = dtype_name(st.type.dtype);
        if (is_float) {
          return error(lit.loc, std::string("expected an integer for a ") + dt + " constant but found " +
                                    describe(lit.text));
        }
        int64_t v = 0;
        VOLTA_RETURN_IF_ERROR(parse_int(lit.text, lit.loc, v));
        if (st.type.dtype == DType::i32) {
          if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
            return error(lit.loc, "integer " + describe(lit.text) + " does not fit in i32");
          }
          t.data<int32_t>()[i] = static_cast<int32_t>(v);
        } else {
          t.data<int64_t>()[i] = v;
        }
        break;
      }
    }
  }
  n.value = std::move(t);
  return Status::ok();
}

Status Parser::finish(Graph& g) {
  g.name = graph_name_;
  g.nodes.resize(stmts_.size());
  for (size_t i = 0; i < stmts_.size(); ++i) {
    const Stmt& st = stmts_[i];
    Node& n = g.nodes[i];
    n.id = static_cast<int32_t>(i);
    n.name = std::string(st.name);
    n.op = st.op;
    n.attrs = st.attrs;
    if (st.has_type) n.type = st.type;
    for (const Ref& r : st.args) {
      auto it = defined_.find(r.name);
      if (it == defined_.end()) return error(r.loc, "undefined value '%" + std::string(r.name) + "'");
      n.inputs.push_back(static_cast<int32_t>(it->second));
    }
    if (st.op == Op::Constant) VOLTA_RETURN_IF_ERROR(build_constant(st, n));
  }
  for (const Ref& r : outputs_) {
    auto it = defined_.find(r.name);
    if (it == defined_.end()) return error(r.loc, "undefined value '%" + std::string(r.name) + "'");
    g.outputs.push_back(static_cast<int32_t>(it->second));
  }

  auto order = topological_order(g);
  if (!order.is_ok()) {
    // A cycle: keep the declared types and let verify_graph report it, unless some type
    // cannot be known without inference.
    for (const Stmt& st : stmts_) {
      if (!st.has_type) {
        return error(st.name_loc, "cannot infer the type of '%" + std::string(st.name) +
                                      "': " + order.status().message());
      }
    }
    return Status::ok();
  }
  for (int32_t id : *order) {
    if (id < 0 || static_cast<size_t>(id) >= g.nodes.size()) continue;
    Node& n = g.nodes[static_cast<size_t>(id)];
    if (is_leaf(n.op)) continue;
    const Stmt& st = stmts_[static_cast<size_t>(id)];
    std::vector<TensorType> in_types;
    in_types.reserve(n.inputs.size());
    for (int32_t in : n.inputs) in_types.push_back(g.nodes[static_cast<size_t>(in)].type);
    auto inferred = infer_type(n.op, in_types, n.attrs);
    if (!inferred.is_ok()) return error(st.op_loc, inferred.status().message() + " " + node_ref(n));
    if (st.has_type) {
      if (!(*inferred == st.type)) {
        return error(st.type_loc, "declared " + st.type.to_string() + " but inferred " + inferred->to_string() +
                                      " for %" + n.name + " (" + op_name(n.op) + ")");
      }
    } else if (checked_numel(inferred->shape) < 0) {
      return error(st.op_loc, "inferred type " + inferred->to_string() + " of '%" + n.name +
                                  "' has a negative dim or too many elements (the maximum is 2^60)");
    }
    n.type = *inferred;
  }
  return Status::ok();
}

Status Parser::verify(const Graph& g) const {
  Status valid = verify_graph(g);
  if (valid.is_ok()) return valid;
  // Point at the line of the node the error names.
  auto it = defined_.find(node_named_in(valid.message()));
  const std::string at = it != defined_.end() ? where(stmts_[it->second].name_loc) : std::string(source_) + ":";
  return Status(valid.code(), at + " " + valid.message());
}

Result<Graph> Parser::run() {
  VOLTA_RETURN_IF_ERROR(parse_header());
  for (;;) {
    skip_blank();
    if (at_end()) return expected("'}' closing graph '" + graph_name_ + "'");
    char c = s_[pos_];
    Loc stmt_loc = loc();
    if (c == '}') {
      if (!has_return_) return error(stmt_loc, "missing 'return' statement in graph '" + graph_name_ + "'");
      ++pos_;
      break;
    }
    if (c == '%') {
      VOLTA_RETURN_IF_ERROR(parse_statement());
    } else {
      std::string_view word = take_ident();
      if (word != "return") {
        pos_ -= word.size();
        return expected("a statement ('%name = op(...)', 'return' or '}')");
      }
      if (has_return_) {
        return error(stmt_loc, "second 'return' statement (the first is at line " +
                                   std::to_string(return_loc_.line) + ")");
      }
      has_return_ = true;
      return_loc_ = stmt_loc;
      VOLTA_RETURN_IF_ERROR(parse_return());
    }
    skip_ws();
    if (!at_eol()) return expected("end of line");
  }
  skip_blank();
  if (!at_end()) return expected("end of input after '}'");
  Graph g;
  VOLTA_RETURN_IF_ERROR(finish(g));
  return g;
}
}  // namespace

Result<Graph> parse_graph(std::string_view text, std::string_view source) {
  Parser p(text, source);
  return p.run();
}

Result<Graph> load_graph(const std::string& path) {
  VOLTA_ASSIGN_OR_RETURN(std::string text, io::read_file(path, {uint64_t{1} << 30, ""}));
  VOLTA_RETURN_IF_ERROR(io::expect_kind(text, io::FileKind::IrText, path));
  Parser p(text, path);
  VOLTA_ASSIGN_OR_RETURN(Graph g, p.run());
  VOLTA_RETURN_IF_ERROR(p.verify(g));
  return g;
}

}  // namespace volta::ir
