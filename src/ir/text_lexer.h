// The IR text parser's cursor (text_parser.cpp): characters, identifiers and number tokens with
// their line and column, error messages that name the place, and the number-token checks. Every
// read is bounds-checked.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>

#include "volta/status.h"

namespace volta::ir::text {

inline bool is_ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c) || c == '.'; }

struct Loc {
  int64_t line = 1;
  int64_t col = 1;
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view source) : s_(text), source_(source) {}

 protected:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  char peek_at(size_t off) const { return pos_ + off < s_.size() ? s_[pos_ + off] : '\0'; }
  Loc loc() const { return {line_, static_cast<int64_t>(pos_ - line_start_) + 1}; }
  // Spaces, tabs, carriage returns and comments; never crosses a newline.
  void skip_ws();
  // Whitespace, comments and newlines.
  void skip_blank();
  bool at_eol() const { return at_end() || s_[pos_] == '\n'; }
  // An identifier, [A-Za-z_][A-Za-z0-9_.]*, or "" when none starts here.
  std::string_view take_ident();
  // A number-like run: [-+]?[A-Za-z0-9_.]* with a sign allowed after e/E in numeric runs.
  std::string_view take_number();
  // What the cursor sits on, for "but found X".
  std::string found() const;
  // tok quoted for a message: bytes outside printable ASCII escaped, cut after 40.
  static std::string describe(std::string_view tok);

  // "<source>:<line>:<col>:", how every error names its place.
  std::string where(Loc at) const {
    return std::string(source_) + ":" + std::to_string(at.line) + ":" + std::to_string(at.col) + ":";
  }
  Status error(Loc at, const std::string& msg) const { return parse_error(where(at) + " " + msg); }
  Status expected(const std::string& what) const { return error(loc(), "expected " + what + " but found " + found()); }
  // After a list item: ',' (true: another item follows) or `close` (false: the list ended), each
  // consumed; anything else is "expected <what>".
  Result<bool> list_continues(char close, const char* what) {
    if (take(',')) return true;
    if (take(close)) return false;
    return expected(what);
  }
  // Consumes `c` when it is next.
  bool take(char c) {
    if (peek() != c || at_end()) return false;
    ++pos_;
    return true;
  }
  Status expect_char(char c) { return take(c) ? Status::ok() : expected(std::string("'") + c + "'"); }

  std::string_view s_;
  std::string_view source_;
  size_t pos_ = 0;
  int64_t line_ = 1;
  size_t line_start_ = 0;
};

// Classifies a number token. Returns false when it is not a well-formed number.
// is_float: contains '.', an exponent, or is inf/nan.
bool classify_number(std::string_view tok, bool& is_float);

// A float token (already classified) as F; false when it does not convert.
template <typename F>
inline bool parse_float_text(std::string_view tok, F& out) {
  bool negative = false;
  std::string_view b = tok;
  if (!b.empty() && (b[0] == '-' || b[0] == '+')) {
    negative = b[0] == '-';
    b.remove_prefix(1);
  }
  if (b == "inf") {
    out = negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return true;
  }
  if (b == "nan") {
    out = std::numeric_limits<F>::quiet_NaN();
    return true;
  }
  F v{};
  auto r = std::from_chars(b.data(), b.data() + b.size(), v);
  if (r.ec != std::errc() || r.ptr != b.data() + b.size()) return false;
  out = negative ? -v : v;
  return true;
}

}  // namespace volta::ir::text
