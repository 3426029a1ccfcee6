// Training on the one execution path: the forward graph and its autograd backward are planned
// together as one graph (outputs: loss, then each trainable param's gradient), run by the
// Runtime, and followed by the optimizer update on the same backend.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "volta/optim.h"
#include "volta/runtime.h"

namespace volta::train {

struct TrainingOptions {
  std::string loss;  // a scalar value of the forward graph; empty: its first output
  optim::OptimizerConfig optimizer;
  optim::Schedule schedule;
  CompileOptions compile;
};

struct TrainingPlan {
  std::shared_ptr<const plan::ExecutionPlan> step;  // forward + backward
  std::vector<std::string> params;                  // trainable params; gradient i is output i + 1
  std::vector<bool> decay;                          // weight decay applies to params[i]
  std::vector<TensorType> param_types;
  TrainingOptions options;
};

// Everything a run needs to continue bit for bit: params, optimizer state, the number of
// completed steps, and the data seed (batches are drawn by (seed, step), so the pair is the
// whole RNG state).
struct TrainState {
  Bindings params;
  std::map<std::string, std::vector<Tensor>> slots;  // optimizer state per param (adam: m, v)
  int64_t step = 0;
  uint64_t seed = 0;

  TrainState clone() const;  // deep copy
  bool bitwise_equal(const TrainState& other) const;
};

struct StepStats {
  double loss = 0.0;
  double grad_norm = 0.0;  // before clipping
  double lr = 0.0;
};

// Builds the backward graph, compiles forward + backward into one plan with gradient and
// optimizer-state bytes in its memory report.
Result<TrainingPlan> compile_training(Runtime& rt, const ir::Graph& forward, const TrainingOptions& opts);

// Params from `params` (every trainable param of the plan must be present, with its type),
// zeroed optimizer state, step 0.
Result<TrainState> init_state(const TrainingPlan& tp, Bindings params, uint64_t seed);

// One step: forward + backward on `batch` (the graph's inputs, plus any non-trainable params),
// global-norm clipping, the scheduled learning rate, the optimizer update in param order.
Result<StepStats> train_step(Runtime& rt, const TrainingPlan& tp, const Bindings& batch, TrainState& state);

}  // namespace volta::train
