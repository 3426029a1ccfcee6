// Reference optimizer updates (semantics in include/volta/optim.h). Each element is computed
// in double from its own values only, so results do not depend on how work is split.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace volta::cpu {

namespace {
// Every element is updated from its own values only: chunks on any threads give the same bits.
template <typename F>
void for_chunks(int64_t n, F&& f) {
  constexpr int64_t kChunk = 8192;
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
    for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) f(i);
  });
}
}  // namespace

double sum_of_squares(const TensorRef& t) {
  const float* x = t.as<const float>();
  double s = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

Status optimizer_update(const optim::UpdateStep& u, const TensorRef& param, const TensorRef& grad,
                        std::span<const TensorRef> state) {
  const int64_t n = param.numel();
  if (grad.numel() != n) return internal_error("optimizer: gradient and param sizes differ");
  float* p = param.as<float>();
  const float* g = grad.as<const float>();
  switch (u.kind) {
    case optim::Kind::Sgd: {
      float* buf = state.empty() ? nullptr : state[0].as<float>();
      for_chunks(n, [&](int64_t i) {
        double d = static_cast<double>(g[i]) * u.grad_scale + u.weight_decay * p[i];
        if (buf) {
          d = u.momentum * buf[i] + d;
          buf[i] = static_cast<float>(d);
        }
        p[i] = static_cast<float>(p[i] - u.lr * d);
      });
      return Status::ok();
    }
    case optim::Kind::Adam:
    case optim::Kind::AdamW: {
      if (state.size() != 2) return internal_error("optimizer: adam needs two state tensors");
      float* m = state[0].as<float>();
      float* v = state[1].as<float>();
      const bool decoupled = u.kind == optim::Kind::AdamW;
      const double c1 = 1.0 - std::pow(u.beta1, static_cast<double>(u.t));
      const double c2 = 1.0 - std::pow(u.beta2, static_cast<double>(u.t));
      for_chunks(n, [&](int64_t i) {
        double w = p[i];
        double d = static_cast<double>(g[i]) * u.grad_scale;
        if (decoupled) w *= 1.0 - u.lr * u.weight_decay;
        else d += u.weight_decay * w;
        const double mi = u.beta1 * m[i] + (1.0 - u.beta1) * d;
        const double vi = u.beta2 * v[i] + (1.0 - u.beta2) * d * d;
        m[i] = static_cast<float>(mi);
        v[i] = static_cast<float>(vi);
        p[i] = static_cast<float>(w - u.lr * (mi / c1) / (std::sqrt(vi / c2) + u.eps));
      });
      return Status::ok();
    }
  }
  return internal_error("optimizer: unknown kind");
}

}  // namespace volta::cpu
