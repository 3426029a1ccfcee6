// The Runtime is the only way to execute: verify -> passes -> plan (cached) -> backend.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "volta/backend.h"
#include "volta/passes.h"
#include "volta/plan.h"

namespace volta {

struct CompileOptions {
  passes::PipelineOptions pipeline;
  plan::PlanOptions plan;
};

// Named tensors for the graph's inputs and params.
using Bindings = std::map<std::string, Tensor>;

class Runtime {
 public:
  explicit Runtime(std::unique_ptr<Backend> backend);
  static Result<Runtime> create(DeviceKind kind, const ir::Graph* g = nullptr);

  Backend& backend() { return *backend_; }
  plan::PlanCache& cache() { return *cache_; }

  // verify_graph, the pass pipeline and planning, cached by (hash, shapes, backend, flags).
  // Fails if the backend lacks a kernel for any op, naming op, node and backend.
  Result<std::shared_ptr<const plan::ExecutionPlan>> compile(const ir::Graph& g, const CompileOptions& opts = {});

  // Runs a plan. Every input and param must be bound with exactly its declared type.
  // Returns the outputs in graph order as host tensors.
  Result<std::vector<Tensor>> run(const plan::ExecutionPlan& p, const Bindings& bindings);

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<plan::PlanCache> cache_;
  std::shared_ptr<std::byte> arena_;  // reused across runs, grown when a plan needs more
  size_t arena_bytes_ = 0;
};

// Seeded parameter values from each param's init attributes (stream = the param's name).
Result<Bindings> init_params(const ir::Graph& g, uint64_t seed);
// Seeded random values for every input: f32 ~ N(0, 1); integers uniform in [0, bound) where
// bound is the smallest row count / class count among the input's uses (2 when none).
Result<Bindings> random_inputs(const ir::Graph& g, uint64_t seed);

}  // namespace volta
