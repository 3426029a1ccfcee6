// The IR text format's errors: every bad input fails with a message that names its position.
#include <gtest/gtest.h>

#include <string>

#include "text_util.h"
#include "volta/ir.h"
#include "volta/text.h"

namespace volta::ir {
namespace {

using namespace text_test;

// ---- Errors with positions -----------------------------------------------------------------

TEST(TextErrors, MissingEquals) {
  expect_error("graph g {\n  %x: f32[2] input()\n  return %x\n}\n", "t.vir:2:14: ",
               "expected '=' but found 'input'");
}

TEST(TextErrors, MissingCloseParen) {
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = relu(%x\n  return %y\n}\n", "t.vir:3:15: ",
               "expected ',' or ')' but found end of line");
  expect_error("graph g {\n  %x: f32[2] = input(\n  return %x\n}\n", "t.vir:2:22: ",
               "expected a value reference '%name' or ')' but found end of line");
}

TEST(TextErrors, BadDtype) {
  expect_error("graph g {\n  %x: f64[2] = input()\n  return %x\n}\n", "t.vir:2:7: ", "unknown dtype 'f64'");
  expect_error("graph g {\n  %x: [2] = input()\n  return %x\n}\n", "t.vir:2:7: ",
               "expected a type such as 'f32[2,3]' but found '['");
  expect_error("graph g {\n  %x: f32 = input()\n  return %x\n}\n", "t.vir:2:11: ", "expected '[' but found '='");
}

TEST(TextErrors, BadDim) {
  expect_error("graph g {\n  %x: f32[2,-1] = input()\n  return %x\n}\n", "t.vir:2:13: ",
               "expected a non-negative integer dimension but found '-1'");
  expect_error("graph g {\n  %x: f32[2,x] = input()\n  return %x\n}\n", "t.vir:2:13: ",
               "expected a dimension but found 'x'");
  expect_error("graph g {\n  %x: f32[2.5] = input()\n  return %x\n}\n", "t.vir:2:11: ",
               "expected a non-negative integer dimension but found '2.5'");
  expect_error("graph g {\n  %x: f32[2,3 = input()\n  return %x\n}\n", "t.vir:2:15: ",
               "expected ',' or ']' in the shape but found '='");
  expect_error("graph g {\n  %x: f32[99999999999999999999999] = input()\n  return %x\n}\n", "t.vir:2:11: ",
               "is too large");
  expect_error("graph g {\n  %x: f32[1099511627777] = input()\n  return %x\n}\n", "t.vir:2:11: ",
               "is too large (the maximum is 2^40)");
  expect_error("graph g {\n  %x: f32[1099511627776,1099511627776] = input()\n  return %x\n}\n", "t.vir:2:7: ",
               "too many elements");
}

TEST(TextErrors, UnknownOp) {
  expect_error("graph g {\n  %x: f32[2,2] = input()\n  %y = matmull(%x, %x)\n  return %y\n}\n", "t.vir:3:8: ",
               "unknown op 'matmull'");
  expect_error("graph g {\n  %x: f32[2,2] = input()\n  %y = (%x)\n  return %y\n}\n", "t.vir:3:8: ",
               "expected an op name but found '('");
}

TEST(TextErrors, WrongArity) {
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = add(%x)\n  return %y\n}\n", "t.vir:3:8: ",
               "op 'add' takes 2 inputs but got 1");
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = relu(%x, %x)\n  return %y\n}\n", "t.vir:3:8: ",
               "op 'relu' takes 1 input but got 2");
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = layer_norm(%x)\n  return %y\n}\n", "t.vir:3:8: ",
               "op 'layer_norm' takes 2 to 3 inputs but got 1");
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y: f32[2] = input(%x)\n  return %y\n}\n", "t.vir:3:16: ",
               "op 'input' takes 0 inputs but got 1");
}

TEST(TextErrors, UnknownAttribute) {
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = relu(%x) {axis=1}\n  return %y\n}\n", "t.vir:3:18: ",
               "unknown attribute 'axis' for op 'relu'");
  expect_error("graph g {\n  %x: f32[2] = input() {init=\"normal\"}\n  return %x\n}\n", "t.vir:2:25: ",
               "unknown attribute 'init' for op 'input'");
}

TEST(TextErrors, DuplicateAttribute) {
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = softmax(%x) {axis=1, axis=0}\n  return %y\n}\n",
               "t.vir:3:29: ", "duplicate attribute 'axis'");
}

TEST(TextErrors, BadAttributeValues) {
  const std::string head = "graph g {\n  %x: f32[2] = input()\n  %y = softmax(%x) {axis=";
  const std::string tail = "}\n  return %y\n}\n";
  expect_error(head + "99999999999999999999" + tail, "t.vir:3:26: ", "out of range");
  expect_error(head + "1e999" + tail, "t.vir:3:26: ", "out of range");
  expect_error(head + "foo" + tail, "t.vir:3:26: ", "but found 'foo'");
  expect_error(head + "1.5.2" + tail, "t.vir:3:26: ", "but found '1.5.2'");
  expect_error(head + "\"abc" + tail, "t.vir:3:26: ", "unterminated string");
  expect_error(head + "\"a\\nb\"" + tail, "t.vir:3:28: ", "unsupported escape");
  expect_error(head + "[1, 2.5]" + tail, "t.vir:3:30: ", "expected an integer but found '2.5'");
  expect_error(head + "[1 2]" + tail, "t.vir:3:29: ", "expected ',' or ']' in the list but found '2'");
  expect_error(head + tail, "t.vir:3:26: ", "expected an attribute value (number, string or integer list) but found '}'");
  expect_error(head + "1 axes=2" + tail, "t.vir:3:28: ", "expected ',' or '}' after the attribute but found 'axes'");
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = softmax(%x) {axis=1\n  return %y\n}\n", "t.vir:3:27: ",
               "expected ',' or '}' after the attribute but found end of line");
}

TEST(TextErrors, UndefinedValue) {
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = relu(%q)\n  return %y\n}\n", "t.vir:3:13: ",
               "undefined value '%q'");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return %x, %nope\n}\n", "t.vir:3:14: ",
               "undefined value '%nope'");
}

TEST(TextErrors, DuplicateDefinition) {
  expect_error("graph g {\n  %x: f32[2] = input()\n\n  %x: f32[2] = input()\n  return %x\n}\n", "t.vir:4:3: ",
               "'%x' is defined twice (first at line 2)");
}

TEST(TextErrors, ConstantPayload) {
  expect_error("graph g {\n  %c: f32[3] = constant([1, 2])\n  return %c\n}\n", "t.vir:2:25: ",
               "constant payload has 2 values but f32[3] needs 3");
  expect_error("graph g {\n  %c: f32[3] = constant(1)\n  return %c\n}\n", "t.vir:2:25: ",
               "constant payload has 1 value but f32[3] needs 3");
  expect_error("graph g {\n  %c: i32[2] = constant([1, 2.5])\n  return %c\n}\n", "t.vir:2:29: ",
               "expected an integer for a i32 constant but found '2.5'");
  expect_error("graph g {\n  %c: i32[] = constant(2147483648)\n  return %c\n}\n", "t.vir:2:24: ",
               "integer '2147483648' does not fit in i32");
  expect_error("graph g {\n  %c: i64[] = constant(9223372036854775808)\n  return %c\n}\n", "t.vir:2:24: ",
               "out of range");
  expect_error("graph g {\n  %c: f32[] = constant(1e39)\n  return %c\n}\n", "t.vir:2:24: ",
               "number '1e39' is out of range for f32");
  expect_error("graph g {\n  %c: f32[] = constant(abc)\n  return %c\n}\n", "t.vir:2:24: ",
               "expected a number but found 'abc'");
  expect_error("graph g {\n  %c: f32[] = constant()\n  return %c\n}\n", "t.vir:2:24: ",
               "expected a constant payload (a number or '[...]') but found ')'");
  expect_error("graph g {\n  %c: f32[2] = constant([1, 2)\n  return %c\n}\n", "t.vir:2:30: ",
               "expected ',' or ']' in the constant payload but found ')'");
  expect_error("graph g {\n  %c: f32[] = constant(%c)\n  return %c\n}\n", "t.vir:2:24: ",
               "expected a constant payload");
}

TEST(TextErrors, LeafWithoutType) {
  expect_error("graph g {\n  %x = input()\n  return %x\n}\n", "t.vir:2:3: ", "'%x' needs a declared type");
  expect_error("graph g {\n  %w = param() {std=0.1}\n  return %w\n}\n", "t.vir:2:3: ", "'%w' needs a declared type");
  expect_error("graph g {\n  %c = constant(1)\n  return %c\n}\n", "t.vir:2:3: ", "'%c' needs a declared type");
}

TEST(TextErrors, DeclaredTypeMismatch) {
  expect_error(
      "graph g {\n  %x: f32[8,4] = input()\n  %w: f32[4,16] = param()\n  %h: f32[8,8] = matmul(%x, %w)\n"
      "  return %h\n}\n",
      "t.vir:4:7: ", "declared f32[8,8] but inferred f32[8,16] for %h (matmul)");
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y: i32[2] = relu(%x)\n  return %y\n}\n", "t.vir:3:7: ",
               "declared i32[2] but inferred f32[2] for %y (relu)");
}

TEST(TextErrors, InferenceFailureNamesTheNode) {
  expect_error("graph g {\n  %x: f32[2,3] = input()\n  %h = matmul(%x, %x)\n  return %h\n}\n", "t.vir:3:8: ",
               "[matmul]");
  expect_error("graph g {\n  %x: f32[2,3] = input()\n  %h = matmul(%x, %x)\n  return %h\n}\n", "t.vir:3:8: ",
               "(node 'h')");
}

TEST(TextErrors, Return) {
  expect_error("graph g {\n  %x: f32[2] = input()\n}\n", "t.vir:3:1: ", "missing 'return' statement");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return %x\n  return %x\n}\n", "t.vir:4:3: ",
               "second 'return' statement (the first is at line 3)");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return\n}\n", "t.vir:3:9: ",
               "expected a value reference '%name' but found end of line");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return %x,\n}\n", "t.vir:3:13: ",
               "expected a value reference '%name' but found end of line");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return %x %x\n}\n", "t.vir:3:13: ",
               "expected end of line but found '%x'");
}

TEST(TextErrors, Structure) {
  expect_error("", "t.vir:1:1: ", "expected 'graph' but found end of input");
  expect_error("  # only a comment\n\n", "t.vir:3:1: ", "expected 'graph' but found end of input");
  expect_error("graf g {\n}\n", "t.vir:1:1: ", "expected 'graph' but found 'graf'");
  expect_error("graph {\n}\n", "t.vir:1:7: ", "expected a graph name but found '{'");
  expect_error("graph g\n", "t.vir:1:8: ", "expected '{' but found end of line");
  expect_error("graph g { %x: f32[2] = input()\n", "t.vir:1:11: ", "expected end of line after '{' but found '%x'");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return %x\n", "t.vir:4:1: ",
               "expected '}' closing graph 'g' but found end of input");
  expect_error("graph g {\n  %x: f32[2] = input()\n  return %x\n}\ngraph h {\n", "t.vir:5:1: ",
               "expected end of input after '}' but found 'graph'");
  expect_error("graph g {\n  x: f32[2] = input()\n  return %x\n}\n", "t.vir:2:3: ",
               "expected a statement ('%name = op(...)', 'return' or '}') but found 'x'");
  expect_error("graph g {\n  %: f32[2] = input()\n  return %x\n}\n", "t.vir:2:4: ",
               "expected a value name after '%' but found ':'");
  expect_error("graph g {\n  %x: f32[2] = input() extra\n  return %x\n}\n", "t.vir:2:24: ",
               "expected end of line but found 'extra'");
  expect_error("graph g {\n  %x: f32[2] = input()\n  %y = add(%x, 3)\n  return %y\n}\n", "t.vir:3:16: ",
               "expected a value reference '%name' but found '3'");
}

TEST(TextErrors, OddBytes) {
  std::string nul = std::string("graph g {\n  %x: f32[2] = input()") + '\0' + "\n  return %x\n}\n";
  expect_error(nul, "t.vir:2:23: ", "expected end of line but found '\\x00'");
  expect_error("graph g {\n  %\xc3\xa9: f32[2] = input()\n  return %x\n}\n", "t.vir:2:4: ",
               "expected a value name after '%' but found '\\xc3'");
  expect_error("graph g {\n\x01\n}\n", "t.vir:2:1: ", "but found '\\x01'");
}

TEST(TextErrors, SourceNameIsUsed) {
  auto g = parse_graph("graph g {\n  %y = nope()\n  return %y\n}\n", "model.vir");
  ASSERT_FALSE(g.is_ok());
  EXPECT_EQ(g.status().message(), "model.vir:2:8: unknown op 'nope'");
  auto d = parse_graph("");
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().message().rfind("<input>:1:1: ", 0), 0u) << d.status().message();
}

}  // namespace
}  // namespace volta::ir
