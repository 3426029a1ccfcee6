// The IR text format, which is also the model DSL and the golden-snapshot format.
//
//   # two-layer MLP
//   graph mlp {
//     %x: f32[8,4] = input()
//     %w1: f32[4,16] = param() {init="normal", std=0.5}
//     %h: f32[8,16] = matmul(%x, %w1)
//     %two: f32[] = constant(2)
//     %y = mul(%h, %two)           # the type may be omitted on computed values
//     return %y
//   }
//
// print_graph always writes every type, so print -> parse -> print is the identity.
#pragma once

#include <string>
#include <string_view>

#include "volta/ir.h"

namespace volta::ir {

std::string print_graph(const Graph& g);
// For display (`volta inspect`): constants with more than `max_constant_values` elements are
// shown as `constant(...)` with their element count and content hash; not parseable.
std::string print_graph(const Graph& g, int64_t max_constant_values);

// Errors name "<source>:<line>:<col>". Values may be used before their definition
// (so the verifier, not the parser, reports cycles). Declared types of computed values
// are checked against the inferred ones.
Result<Graph> parse_graph(std::string_view text, std::string_view source = "<input>");

// Reads, parses and verifies a file; a missing or unreadable file is a clear error, and a
// verify error (a cycle, a bad param attribute) names the line of its node.
Result<Graph> load_graph(const std::string& path);

}  // namespace volta::ir
