// The IR text parser's cursor (text_lexer.h).
#include "ir/text_lexer.h"

#include <cstdio>

namespace volta::ir::text {

void Lexer::skip_ws() {
  while (!at_end()) {
    char c = s_[pos_];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++pos_;
    } else if (c == '#') {
      while (!at_end() && s_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

void Lexer::skip_blank() {
  for (;;) {
    skip_ws();
    if (at_end() || s_[pos_] != '\n') return;
    ++pos_;
    ++line_;
    line_start_ = pos_;
  }
}

std::string_view Lexer::take_ident() {
  size_t start = pos_;
  if (!at_end() && is_ident_start(s_[pos_])) {
    ++pos_;
    while (!at_end() && is_ident_char(s_[pos_])) ++pos_;
  }
  return s_.substr(start, pos_ - start);
}

std::string_view Lexer::take_number() {
  size_t start = pos_;
  if (!at_end() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
  bool numeric = !at_end() && (is_digit(s_[pos_]) || s_[pos_] == '.');
  while (!at_end()) {
    char c = s_[pos_];
    if (is_ident_char(c)) {
      ++pos_;
    } else if ((c == '+' || c == '-') && numeric && pos_ > start &&
               (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E')) {
      ++pos_;
    } else {
      break;
    }
  }
  return s_.substr(start, pos_ - start);
}

std::string Lexer::found() const {
  if (at_end()) return "end of input";
  char c = s_[pos_];
  if (c == '\n') return "end of line";
  size_t end = pos_;
  if (is_ident_char(c) || c == '-' || c == '+') {
    ++end;
    while (end < s_.size() && is_ident_char(s_[end])) ++end;
  } else if (c == '%') {
    ++end;
    while (end < s_.size() && is_ident_char(s_[end])) ++end;
  } else {
    ++end;
  }
  return describe(s_.substr(pos_, end - pos_));
}

std::string Lexer::describe(std::string_view tok) {
  std::string out = "'";
  size_t limit = 40;
  for (size_t i = 0; i < tok.size() && i < limit; ++i) {
    unsigned char c = static_cast<unsigned char>(tok[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (tok.size() > limit) out += "...";
  out += "'";
  return out;
}

bool classify_number(std::string_view tok, bool& is_float) {
  std::string_view b = tok;
  if (!b.empty() && (b[0] == '-' || b[0] == '+')) b.remove_prefix(1);
  if (b == "inf" || b == "nan") {
    is_float = true;
    return true;
  }
  size_t i = 0;
  size_t int_digits = 0;
  size_t frac_digits = 0;
  is_float = false;
  while (i < b.size() && is_digit(b[i])) ++i, ++int_digits;
  if (i < b.size() && b[i] == '.') {
    is_float = true;
    ++i;
    while (i < b.size() && is_digit(b[i])) ++i, ++frac_digits;
  }
  if (int_digits + frac_digits == 0) return false;
  if (i < b.size() && (b[i] == 'e' || b[i] == 'E')) {
    is_float = true;
    ++i;
    if (i < b.size() && (b[i] == '+' || b[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < b.size() && is_digit(b[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == b.size();
}

}  // namespace volta::ir::text
