// The CPU backend's optimizer kernels: SGD / Adam / AdamW updates and the squared norm for
// gradient clipping, in float on 16-lane vectors. Every element is updated from its own values,
// and the norm is summed per fixed chunk then across chunks in order, so no result depends on
// the thread count. ref_optim.cpp (double per element) is the oracle they are tested against.
#include <algorithm>
#include <cmath>
#include <span>
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
void for_chunks(int64_t n, F&& f, int64_t chunk) {
  parallel_chunks(n, chunk, [&](int64_t b, int64_t e) { f(b, e - b); });
}

// The sum of squares of each tensor of ts: per fixed chunk of it, then its chunks' sums in
// order (in double). The chunks of all the tensors are one task list: a pass per tensor cost the
// training step's 27 gradients a fork and join each, and at 2 threads grad_norm ran hardly faster
// than at 1.
std::vector<double> sums_of_squares(std::span<const TensorRef> ts) {
  std::vector<int64_t> first(ts.size() + 1, 0);  // the tensors' first chunks in the task list
  for (size_t i = 0; i < ts.size(); ++i) first[i + 1] = first[i] + (ts[i].numel() + kChunk - 1) / kChunk;
  std::vector<float> part(static_cast<size_t>(first.back()));
  parallel_for(first.back(), [&](int64_t c) {
    const auto i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), c) - first.begin() - 1);
    const int64_t b = (c - first[i]) * kChunk;
    part[static_cast<size_t>(c)] = squares_chunk(ts[i].as<const float>() + b, std::min(kChunk, ts[i].numel() - b));
  });
  std::vector<double> sums(ts.size(), 0.0);
  for (size_t i = 0; i < ts.size(); ++i)
    for (int64_t c = first[i]; c < first[i + 1]; ++c) sums[i] += part[static_cast<size_t>(c)];
  return sums;
}

}  // namespace

double fast_sum_of_squares(const TensorRef& t) { return sums_of_squares(std::span(&t, 1))[0]; }

// grad_norm_node's arithmetic: the tensors' sums added in input order, in double.
Status fast_grad_norm(const KernelArgs& a) {
  double sq = 0.0;
  for (const double s : sums_of_squares(a.in)) sq += s;
  a.out.as<double>()[0] = std::sqrt(sq);
  return Status::ok();
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
