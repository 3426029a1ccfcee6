// The program of a fused_elementwise node (written by the fuse_elementwise pass): steps run in
// order, each one elementwise op on operands that are the node's inputs (x0, x1, ...) or earlier
// steps' results (t0, t1, ...); the last step is the node's value. Text form, the `program`
// attribute: "mul x0 x1; exp t0; add t1 x2".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "volta/ir.h"

namespace volta::ir {

// The ops a program may use are those of categories Unary and Binary in ops.def
// (ir::elementwise_arity, volta/op_id.h).

struct ElementwiseStep {
  Op op;
  int32_t a = -1, b = -1;  // operand: < inputs: input a; else the result of step a - inputs
};

struct ElementwiseProgram {
  int32_t inputs = 0;
  std::vector<ElementwiseStep> steps;
};

constexpr size_t kMaxElementwiseSteps = 64;

// Parses and checks a program over `inputs` inputs: known fusable ops, their arity, operands in
// range (a step reads only inputs and earlier steps), 1 to kMaxElementwiseSteps steps.
Result<ElementwiseProgram> parse_elementwise_program(const std::string& text, int32_t inputs);
std::string print_elementwise_program(const ElementwiseProgram& p);

}  // namespace volta::ir
