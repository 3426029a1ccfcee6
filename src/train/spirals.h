// The "mlp-spirals" recipe: a two-layer MLP classifier on a seeded synthetic spiral data set,
// the smallest end-to-end training job.
#pragma once

#include <string>

#include "volta/runtime.h"

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

}  // namespace volta::train
