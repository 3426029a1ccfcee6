// The CPU backend's optimizer kernels: SGD / Adam / AdamW updates and the squared norm for
// gradient clipping, in float on 16-lane vectors. Every element is updated from its own values,
// and the norm is summed per fixed chunk then across chunks in order, so no result depends on
// the thread count. ref_optim.cpp (double per element) is the oracle they are tested against.
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace volta::cpu {

namespace {

constexpr int64_t kChunk = 16384;       // elements per task of the norm (its partial sums); a multiple of the lanes
constexpr int64_t kUpdateChunk = 4096;  // per task of the updates, whose elements are independent: a
                                        // 128 x 128 weight is four tasks, not one

// f(begin, length) over fixed chunks of `chunk` elements.
template <typename F>
void for_chunks(int64_t n, F&& f, int64_t chunk = kChunk) {
  parallel_chunks(n, chunk, [&](int64_t b, int64_t e) { f(b, e - b); });
}

}  // namespace

double fast_sum_of_squares(const TensorRef& t) {
  const float* x = t.as<const float>();
  const int64_t n = t.numel();
  std::vector<float> part(static_cast<size_t>((n + kChunk - 1) / kChunk));
  for_chunks(n, [&](int64_t b, int64_t len) { part[static_cast<size_t>(b / kChunk)] = squares_chunk(x + b, len); });
  double s = 0.0;
  for (float v : part) s += v;
  return s;
}

Status fast_optimizer_update(const optim::UpdateStep& u, const TensorRef& param, const TensorRef& grad,
                             std::span<const TensorRef> state) {
  const int64_t n = param.numel();
  if (grad.numel() != n) return internal_error("optimizer: gradient and param sizes differ");
  float* p = param.as<float>();
  const float* g = grad.as<const float>();
  switch (u.kind) {
    case optim::Kind::Sgd: {
      float* buf = state.empty() ? nullptr : state[0].as<float>();
      for_chunks(n, [&](int64_t b, int64_t len) {
        sgd_chunk(static_cast<float>(u.lr), static_cast<float>(u.weight_decay), static_cast<float>(u.momentum),
                  static_cast<float>(u.grad_scale), p + b, g + b, buf ? buf + b : nullptr, len);
      }, kUpdateChunk);
      return Status::ok();
    }
    case optim::Kind::Adam:
    case optim::Kind::AdamW: {
      if (state.size() != 2) return internal_error("optimizer: adam needs two state tensors");
      float* m = state[0].as<float>();
      float* v = state[1].as<float>();
      const bool decoupled = u.kind == optim::Kind::AdamW;
      const AdamCoef k{static_cast<float>(u.lr),
                       static_cast<float>(u.beta1),
                       static_cast<float>(u.beta2),
                       static_cast<float>(1.0 - u.beta1),  // in double: 1 - 0.999f is 1.3e-5 off
                       static_cast<float>(1.0 - u.beta2),
                       static_cast<float>(u.eps),
                       static_cast<float>(decoupled ? 1.0 - u.lr * u.weight_decay : u.weight_decay),
                       static_cast<float>(u.grad_scale),
                       static_cast<float>(1.0 - std::pow(u.beta1, static_cast<double>(u.t))),
                       static_cast<float>(1.0 - std::pow(u.beta2, static_cast<double>(u.t))),
                       decoupled};
      for_chunks(n, [&](int64_t b, int64_t len) { adam_chunk(k, p + b, g + b, m + b, v + b, len); }, kUpdateChunk);
      return Status::ok();
    }
  }
  return internal_error("optimizer: unknown kind");
}

}  // namespace volta::cpu
