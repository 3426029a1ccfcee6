// Helpers of the IR text format's tests (test_text.cpp, test_text_errors.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "volta/ir.h"
#include "volta/text.h"

namespace volta::ir::text_test {

// The graph of a text that must parse (sourced as "t.vir").
inline Graph parse_ok(const std::string& text) {
  auto g = parse_graph(text, "t.vir");
  EXPECT_TRUE(g.is_ok()) << g.status().to_string() << "\n" << text;
  if (!g.is_ok()) return Graph{};
  return std::move(g).value();
}

// The error message of a text that must fail to parse.
inline std::string parse_fail(const std::string& text) {
  auto g = parse_graph(text, "t.vir");
  EXPECT_FALSE(g.is_ok()) << "parsed unexpectedly:\n" << text;
  if (g.is_ok()) return "";
  EXPECT_EQ(g.status().code(), StatusCode::kParseError) << g.status().to_string();
  return g.status().message();
}

// A parse error whose message starts with `prefix` (the place) and contains `what`.
inline void expect_error(const std::string& text, const std::string& prefix, const std::string& what) {
  std::string msg = parse_fail(text);
  EXPECT_EQ(msg.rfind(prefix, 0), 0u) << "message: " << msg << "\nexpected prefix: " << prefix;
  EXPECT_NE(msg.find(what), std::string::npos) << "message: " << msg << "\nexpected to contain: " << what;
}

}  // namespace volta::ir::text_test
