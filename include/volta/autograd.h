// Reverse-mode autograd on the IR. The forward graph is never changed: build_backward returns
// a new graph holding a copy of the forward computation followed by the backward one, written
// in ordinary IR ops, so the same passes, planner, runtime and backends run it.
#pragma once

#include <string>
#include <vector>

#include "volta/builder.h"
#include "volta/ir.h"

namespace volta::autograd {

struct GradientGraph {
  ir::Graph graph;                  // outputs: [loss, d loss / d params[0], d loss / d params[1], ...]
  std::vector<std::string> params;  // trainable params, in id order
};

// `loss` names a scalar f32 value of `forward` (empty: the first output). Gradients are built
// for every param whose `trainable` attribute is not 0; params the loss does not depend on get
// a zero gradient. Fails naming the op when a needed op has no gradient rule.
Result<GradientGraph> build_backward(const ir::Graph& forward, const std::string& loss = "");

// The gradient rule of one op, in IR ops: the contributions of `dy` (the gradient of node `n`'s
// value `y`) to each of its inputs, one entry per input, Value{} where the input gets none.
// Defined beside the op table (src/autograd/grad_rules.cpp): a `switch` over every op.
Result<std::vector<Value>> grad_rule(ModelBuilder& b, const ir::Node& n, Value y, Value dy);

// Sums `g` over the axes along which a value of `shape` was broadcast to g's shape.
Value sum_to(ModelBuilder& b, Value g, const Shape& shape);

}  // namespace volta::autograd
