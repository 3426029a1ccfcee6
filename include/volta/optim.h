// Optimizers, gradient clipping and learning-rate schedules. The update rules run on the
// backend as optimizer_update nodes of the training step's plan; this header fixes their meaning.
//
//   sgd:   g = grad * clip + wd * p;  buf = momentum * buf + g (if momentum > 0);  p -= lr * buf
//   adam:  g = grad * clip + wd * p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//          p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   adamw: p *= 1 - lr * wd (decoupled), then adam with wd = 0
//
// Clipping scales every gradient by min(1, max_norm / (norm + 1e-6)) where norm is the global
// L2 norm of all gradients, summed in double in param order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "volta/status.h"

namespace volta::optim {

enum class Kind : uint8_t { Sgd, Adam, AdamW };
Result<Kind> parse_kind(std::string_view s);  // "sgd" | "adam" | "adamw"
const char* kind_name(Kind k);

struct OptimizerConfig {
  Kind kind = Kind::AdamW;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  double momentum = 0.0;                         // sgd
  double weight_decay = 0.0;
  bool decay_matrices_only = false;  // apply weight decay to params of rank >= 2 only
  double clip_norm = 0.0;            // 0: no clipping
};

// Fails naming the field when a hyper-parameter is not finite or out of range.
Status validate(const OptimizerConfig& c);
// State tensors per param: adam/adamw 2 (m, v); sgd 1 with momentum, else 0.
int state_slots(const OptimizerConfig& c);

// Learning rate at an optimizer step (0-based): constant, or linear warm-up
// lr * (step + 1) / (warmup_steps + 1) for step < warmup_steps, then cosine decay from lr to
// `min_lr` at `decay_steps`, then `min_lr`.
struct Schedule {
  enum class Kind : uint8_t { Constant, WarmupCosine } kind = Kind::Constant;
  int64_t warmup_steps = 0;
  int64_t decay_steps = 0;
  double min_lr = 0.0;
  double lr_at(double lr, int64_t step) const;
};
Status validate(const Schedule& s, double lr);

// One update, as handed to a backend.
struct UpdateStep {
  Kind kind = Kind::AdamW;
  double lr = 0.0, beta1 = 0.0, beta2 = 0.0, eps = 0.0, momentum = 0.0, weight_decay = 0.0;
  int64_t t = 1;            // 1-based step for Adam's bias correction
  double grad_scale = 1.0;  // the clipping factor
};

}  // namespace volta::optim
