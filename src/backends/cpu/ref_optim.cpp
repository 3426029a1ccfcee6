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

// sqrt of the per-gradient sums of squares added in input order, in double.
Status grad_norm_node(const KernelArgs& a, SumOfSquaresFn sum_of_squares) {
  double sq = 0.0;
  for (const TensorRef& g : a.in) sq += sum_of_squares(g);
  a.out.as<double>()[0] = std::sqrt(sq);
  return Status::ok();
}

// The node's scalars become an UpdateStep: the scheduled lr, Adam's t = step + 1, and the
// clipping factor clip / (norm + 1e-6) when the norm is above clip.
Status optimizer_update_node(const KernelArgs& a, OptimizerUpdateFn update) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::OptimizerUpdate>(a.node));
  VOLTA_ASSIGN_OR_RETURN(const optim::Kind kind, optim::parse_kind(at->kind));
  optim::UpdateStep u;
  u.kind = kind;
  u.beta1 = at->beta1, u.beta2 = at->beta2, u.eps = at->eps, u.momentum = at->momentum, u.weight_decay = at->weight_decay;
  const double clip = at->clip;
  const double norm = a.in[2].as<const double>()[0];
  u.lr = a.in[3].as<const double>()[0];
  u.t = a.in[4].as<const int64_t>()[0] + 1;
  u.grad_scale = clip > 0 && norm > clip ? clip / (norm + 1e-6) : 1.0;
  VOLTA_RETURN_IF_ERROR(update(u, a.in[0], a.in[1], a.in.subspan(5)));
  a.out.as<float>()[0] = 0.0f;
  return Status::ok();
}

namespace ref {
Status GradNorm(const KernelArgs& a) { return grad_norm_node(a, sum_of_squares); }
Status OptimizerUpdate(const KernelArgs& a) { return optimizer_update_node(a, optimizer_update); }
Status Increment(const KernelArgs& a) {
  int64_t* counter = a.in[0].as<int64_t>();  // state, written in place (ir::writes_input)
  *counter += 1;
  a.out.as<int64_t>()[0] = *counter;
  return Status::ok();
}
}  // namespace ref

}  // namespace volta::cpu
