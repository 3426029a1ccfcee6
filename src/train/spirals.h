// The "mlp-spirals" recipe: a two-layer MLP classifier on a seeded synthetic spiral data set,
// the smallest end-to-end training job.
#pragma once

#include <string>

#include "train/trainer.h"

namespace volta::train {

struct SpiralsConfig {
  int64_t classes = 3;
  int64_t points_per_class = 200;
  int64_t hidden = 64;
  int64_t batch = 64;
  std::string loss = "ce";  // "ce": cross-entropy on class ids; "mse": squared error on one-hot targets
};

struct SpiralData {
  Tensor x;        // f32 [N, 2]
  Tensor labels;   // i32 [N]
  Tensor one_hot;  // f32 [N, classes]
};

Status validate(const SpiralsConfig& c);
// Arm k of the spiral holds class k; points carry N(0, 0.2) angular noise from the seed.
SpiralData make_spirals(const SpiralsConfig& c, uint64_t seed);
// x [batch, 2] -> relu(x W1 + b1) W2 + b2 = logits [batch, classes]; outputs: loss, logits.
Result<ir::Graph> build_spirals_mlp(const SpiralsConfig& c, int64_t batch);
// The batch for optimizer step `step`: `c.batch` points drawn with replacement by (seed, step).
Bindings spirals_batch(const SpiralsConfig& c, const SpiralData& d, uint64_t seed, int64_t step);

// The recipe as a Trainer's task: the data set drawn from `seed`, batches by (seed, step).
class SpiralsTask : public Task {
 public:
  static Result<std::unique_ptr<SpiralsTask>> create(const SpiralsConfig& c, uint64_t seed);

  const ir::Graph& forward() const override { return forward_; }
  int64_t batch_tokens() const override { return c_.batch; }
  Bindings batch(uint64_t seed, int64_t completed) const override { return spirals_batch(c_, data_, seed, completed); }

  struct Score {
    double loss = 0.0;
    double accuracy = 0.0;  // share of points whose largest logit is their label
  };
  // The whole data set through the same model at batch N, with the params held by `params`.
  Result<Score> score(Runtime& rt, State& params) const;
  const SpiralData& data() const { return data_; }

 private:
  SpiralsTask(const SpiralsConfig& c, SpiralData d, ir::Graph g) : c_(c), data_(std::move(d)), forward_(std::move(g)) {}
  SpiralsConfig c_;
  SpiralData data_;
  ir::Graph forward_;
};

}  // namespace volta::train
