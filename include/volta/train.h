// Training on the one execution path: one plan is the whole step (forward, autograd backward,
// the global gradient norm, clipping and the optimizer update of every param), run by the
// Runtime on state that lives on its backend (a TrainSession's State): params, optimizer
// moments and the step counter are read and written there in place, gradients are planned
// temporaries that never leave the backend, and only the batch and the learning rate go in.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "volta/optim.h"
#include "volta/runtime.h"
#include "volta/state.h"

namespace volta::train {

struct TrainingOptions {
  std::string loss;  // a scalar value of the forward graph; empty: its first output
  optim::OptimizerConfig optimizer;
  optim::Schedule schedule;
  CompileOptions compile;
};

// The names the step's state has in a State (and in checkpoints): optimizer slot k of `param`
// ("optim.m.<param>", "optim.v.<param>"; SGD's momentum buffer is slot 0) and the counter of
// completed steps. The learning rate of a step is the f64[] input kLearningRate.
std::string slot_name(int slot, const std::string& param);
inline constexpr const char* kStepCounter = "optim.step";
inline constexpr const char* kLearningRate = "optim.lr";

struct TrainingPlan {
  // Outputs: the loss (f32[]), the global gradient norm before clipping (f64[]), the new step
  // count (i64[]). Between the backward and grad_norm is where a data-parallel all-reduce of the
  // gradients would go.
  std::shared_ptr<const plan::ExecutionPlan> step;
  std::vector<std::string> params;      // trainable params, in update order
  std::vector<std::string> frozen;      // the forward's other params (bound from the state, never updated)
  std::vector<bool> decay;              // weight decay applies to params[i]
  std::vector<TensorType> param_types;  // of params[i]
  TrainingOptions options;
};

// A host snapshot of everything a run needs to continue bit for bit (what a checkpoint holds):
// params, optimizer state, the number of completed steps, and the data seed (batches are drawn
// by (seed, step), so the pair is the whole RNG state).
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

// Builds the whole training step for `forward` (its loss: opts.loss, else its first output)
// and compiles it; the memory report lists params, gradients and optimizer state by class.
Result<TrainingPlan> compile_training(Runtime& rt, const ir::Graph& forward, const TrainingOptions& opts);

// A snapshot at step 0: `params` (every param of the plan, with its type) and zeroed optimizer
// state.
Result<TrainState> init_state(const TrainingPlan& tp, Bindings params, uint64_t seed);

// The training state resident on a runtime's backend and the steps that update it. The runtime
// and the plan must outlive the session.
class TrainSession {
 public:
  // Uploads a snapshot: its params, optimizer slots and step. Missing or mistyped tensors are
  // errors naming the tensor.
  static Result<TrainSession> start(Runtime& rt, const TrainingPlan& tp, const TrainState& snapshot);

  // One step on `batch` (the forward graph's inputs): the scheduled learning rate goes in, the
  // loss and gradient norm come out; everything else stays on the backend.
  Result<StepStats> step(const Bindings& batch);

  // Host copies of the state (checkpoint saving reads it from the backend).
  Result<TrainState> snapshot() const;
  int64_t steps() const { return steps_; }  // completed steps
  uint64_t seed() const { return seed_; }
  State& state() { return *state_; }
  const State& state() const { return *state_; }
  const TrainingPlan& plan() const { return *tp_; }

 private:
  TrainSession(Runtime& rt, const TrainingPlan& tp, std::unique_ptr<State> state, int64_t steps, uint64_t seed)
      : rt_(&rt), tp_(&tp), state_(std::move(state)), steps_(steps), seed_(seed) {}
  Runtime* rt_;
  const TrainingPlan* tp_;
  std::unique_ptr<State> state_;
  int64_t steps_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace volta::train
