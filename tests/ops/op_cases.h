// The op-test harness's sample cases: for every op of the op table, the shapes, dtypes,
// attributes and input data that exercise its kernels (fast paths and fallbacks), with the
// error each backend may have against the reference kernel. op_cases() is one switch over
// every op with no default, so an op added to ops.def without cases fails to compile.
#pragma once

#include <string>
#include <vector>

#include "volta/ir.h"
#include "volta/tensor.h"

namespace volta::test {

// How an input's data is made (always from a fixed seed).
enum class Fill {
  Normal,    // N(0, 2); N(0, 1) in gradient checks
  Positive,  // |N(0, 1)| + 0.5: the domain of log, sqrt, a divisor, a variance
  Distinct,  // a permutation of evenly spaced values away from 0 and +-0.5 (no ties near kinks)
  Ids,       // integers in [0, bound): ids, targets, indices, conditions
  Value,     // every element `value`: a position, a step, a learning rate
  Rotary,    // a rope table [P, D/2] (rope_table, theta 10000): cos, or sin when `value` is 1
  Mask,      // an additive attention mask: 0, -1.5 or -inf from the seed, its first row all -inf
};

// Whether a fill draws float data (Normal, Positive, Distinct): what nan/inf runs replace and
// gradient checks differentiate.
constexpr bool is_random_float(Fill f) { return f == Fill::Normal || f == Fill::Positive || f == Fill::Distinct; }

struct CaseInput {
  TensorType type;
  Fill fill = Fill::Normal;
  double value = 0;  // Ids: the bound; Value: the value
};

struct OpCase {
  ir::Op op = ir::Op::Input;
  std::vector<CaseInput> inputs;
  ir::Attrs attrs;
  double tol = 0;          // max |backend - reference| / (1 + |reference|) per element
  bool specials = true;    // also run with nan, +-inf, +-0 in the float inputs
  std::string no_grad;     // a differentiable op's case without finite differences: why
  std::string feature;     // a backend feature the case needs (Capabilities::features), or none
  std::string label() const;  // "op f32[2,3], i32[4] {attrs}"
};

// Every case of `op`; empty for the leaves (input, param, constant), which are bound, not run.
std::vector<OpCase> op_cases(ir::Op op);

// The input tensors of a case. `specials` replaces Normal, Positive and Distinct data by a
// cycle of nan, +-inf, +-0 and ordinary values; `std` scales Normal data.
std::vector<Tensor> make_inputs(const OpCase& c, uint64_t seed, bool specials, float std = 2.0f);

}  // namespace volta::test
