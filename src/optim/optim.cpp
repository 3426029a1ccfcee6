#include <cmath>
#include <numbers>
#include <string>

#include "volta/optim.h"

namespace volta::optim {

Result<Kind> parse_kind(std::string_view s) {
  if (s == "sgd") return Kind::Sgd;
  if (s == "adam") return Kind::Adam;
  if (s == "adamw") return Kind::AdamW;
  return invalid_argument("unknown optimizer '" + std::string(s) + "' (expected sgd, adam or adamw)");
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Sgd: return "sgd";
    case Kind::Adam: return "adam";
    case Kind::AdamW: return "adamw";
  }
  return "?";
}

namespace {
Status check(bool ok, const char* field, double v, const char* want) {
  if (ok) return Status::ok();
  return invalid_argument(std::string("optimizer ") + field + " must be " + want + ", got " + number_for_message(v));
}
}  // namespace

Status validate(const OptimizerConfig& c) {
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.lr) && c.lr >= 0, "learning rate", c.lr, "finite and >= 0"));
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.beta1) && c.beta1 >= 0 && c.beta1 < 1, "beta1", c.beta1, "in [0, 1)"));
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.beta2) && c.beta2 >= 0 && c.beta2 < 1, "beta2", c.beta2, "in [0, 1)"));
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.eps) && c.eps > 0, "eps", c.eps, "finite and > 0"));
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1, "momentum", c.momentum, "in [0, 1)"));
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.weight_decay) && c.weight_decay >= 0, "weight decay", c.weight_decay, "finite and >= 0"));
  VOLTA_RETURN_IF_ERROR(check(std::isfinite(c.clip_norm) && c.clip_norm >= 0, "clip norm", c.clip_norm, "finite and >= 0"));
  return Status::ok();
}

int state_slots(const OptimizerConfig& c) {
  if (c.kind == Kind::Sgd) return c.momentum > 0 ? 1 : 0;
  return 2;
}

double Schedule::lr_at(double lr, int64_t step) const {
  if (kind == Kind::Constant) return lr;
  // The nanoGPT convention: warm-up reaches lr * W / (W + 1) at step W - 1.
  if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps + 1);
  if (step > decay_steps) return min_lr;
  const double progress = static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (lr - min_lr);
}

Status validate(const Schedule& s, double lr) {
  if (s.kind == Schedule::Kind::Constant) return Status::ok();
  if (s.warmup_steps < 0) return invalid_argument("schedule warm-up steps must be >= 0, got " + std::to_string(s.warmup_steps));
  if (s.decay_steps <= s.warmup_steps)
    return invalid_argument("schedule decay steps (" + std::to_string(s.decay_steps) + ") must be greater than the warm-up steps (" +
                            std::to_string(s.warmup_steps) + ")");
  if (!std::isfinite(s.min_lr) || s.min_lr < 0 || s.min_lr > lr)
    return invalid_argument("schedule minimum learning rate must be in [0, lr], got " + number_for_message(s.min_lr));
  // lr_at's warm-up multiplies lr by up to warmup_steps + 1 before dividing: a rate whose product
  // overflows would become inf.
  if (!std::isfinite(lr * static_cast<double>(s.warmup_steps + 1)))
    return invalid_argument("learning rate " + number_for_message(lr) + " overflows the warm-up schedule (" +
                            std::to_string(s.warmup_steps) + " steps)");
  return Status::ok();
}

}  // namespace volta::optim
