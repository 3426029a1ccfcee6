// Finite-difference gradient checks: autograd's gradients vs central differences of the loss,
// both run through the Runtime on the CPU backend.
#pragma once

#include <string>

#include "volta/builder.h"
#include "volta/runtime.h"

namespace volta::test {

struct GradCheckResult {
  double max_abs = 0.0;  // max |autograd - finite difference|
  double max_rel = 0.0;  // max of that over max(|finite difference|, 1e-2)
  int64_t checked = 0;   // number of param elements compared
};

// Appends loss = sum(y * r) with a fixed random r, binds every param from `values` (seeded
// N(0, 1) for those missing; made positive with `positive`), and compares every param's
// gradient element with (L(p + h) - L(p - h)) / 2h.
Result<GradCheckResult> gradcheck(ModelBuilder& b, Value y, Bindings values = {}, bool positive = false);

// The same for a graph whose first output is already the scalar loss; checks at most
// `max_per_param` elements of each param (evenly spaced).
Result<GradCheckResult> gradcheck_graph(const ir::Graph& g, Bindings values, int64_t max_per_param = 1 << 20);

}  // namespace volta::test
