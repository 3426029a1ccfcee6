// The CPU backend's softmax, log_softmax and softmax gradient over the last axis, one 16-lane
// row kernel each (vec.h), rows split into fixed tasks. The row kernels also serve the fused
// attention (attention.cpp) and the cross-entropy (loss.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "backends/cpu/vec.h"

namespace volta::cpu {

using namespace vec;

// softmax(scale * x (+ add)) over the first `valid` entries of a row; the others are left out
// (0 for softmax, -inf for log_softmax). No valid entry gives nan, like the reference's 0/0.
// Loads cover whole 16-lane groups of the row where it has them; masked lanes hold -inf, whose
// exp is exactly 0. `add` (an attention mask row, read over its first `valid` entries only)
// comes with scale 1, so x * 1 + add, one FMA, is x + add rounded once, as an add node computes
// it. Returns false when the row held an inf or nan (the scalar path: only such a row can give
// nan probabilities).
VOLTA_ISA_CLONES
bool softmax_row(const float* x, float* y, int64_t C, int64_t valid, float scale, bool as_log, const float* add) {
  const float ninf = -std::numeric_limits<float>::infinity();
  valid = std::min(valid, C);
  if (valid <= 0) {
    std::fill_n(y, C, std::numeric_limits<float>::quiet_NaN());
    return false;
  }
  auto z = [&](int64_t c) VOLTA_VEC_LAMBDA {  // the 16 lanes at c, masked past `valid`
    const int64_t k = std::min(kLanes, C - c);
    const Vec v = add ? load_n(x + c, k, 0.0f) * splat(scale) + load_n(add + c, std::min(k, valid - c), 0.0f)
                      : load_n(x + c, k, 0.0f) * splat(scale);
    return keep_first(v, valid - c, ninf);
  };
  Vec m = splat(ninf);
  for (int64_t c = 0; c < valid; c += kLanes) m = vmax(m, z(c));
  const float mx = hmax(m);
  if (!std::isfinite(mx)) {  // inf or nan in the row: the scalar formula says what it gives
    auto zs = [&](int64_t c) { return static_cast<double>(add ? scale * x[c] + add[c] : scale * x[c]); };
    double sum = 0.0;
    for (int64_t c = 0; c < valid; ++c) sum += std::exp(zs(c) - mx);
    for (int64_t c = 0; c < valid; ++c) {
      const double e = zs(c) - mx;
      y[c] = static_cast<float>(as_log ? e - std::log(sum) : std::exp(e) / sum);
    }
    std::fill(y + valid, y + C, as_log ? ninf : 0.0f);
    return false;
  }
  Vec acc = splat(0.0f);
  for (int64_t c = 0; c < C; c += kLanes) {
    const Vec e = c < valid ? vexp(z(c) - splat(mx)) : splat(0.0f);
    acc += e;
    if (!as_log) store_n(y + c, e, std::min(kLanes, C - c));
  }
  const float sum = hsum(acc);
  // Whole groups up to the row's end, not partial ones up to `valid` (a partial load or store
  // goes through memory lane by lane): the lanes past `valid` get z = -inf, or 0 * inv, and are
  // overwritten below anyway.
  if (as_log) {
    const float shift = mx + std::log(sum);
    for (int64_t c = 0; c < valid; c += kLanes) store_n(y + c, z(c) - splat(shift), std::min(kLanes, C - c));
  } else {
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < valid; c += kLanes) {
      const int64_t k = std::min(kLanes, C - c);
      store_n(y + c, load_n(y + c, k, 0.0f) * splat(inv), k);
    }
  }
  std::fill(y + valid, y + C, as_log ? ninf : 0.0f);  // masked entries stay exact whatever the row holds
  return true;
}

// dx = scale * y * (dy - sum(dy * y)) for one softmax row y.
VOLTA_ISA_CLONES
void softmax_grad_row(const float* y, const float* dy, float* dx, int64_t C, float scale) {
  const float dot =
      sum_lanes(C, [&](int64_t c, int64_t k) VOLTA_VEC_LAMBDA { return load_n(dy + c, k, 0.0f) * load_n(y + c, k, 0.0f); });
  for (int64_t c = 0; c < C; c += kLanes) {
    const int64_t k = std::min(kLanes, C - c);
    store_n(dx + c, splat(scale) * load_n(y + c, k, 0.0f) * (load_n(dy + c, k, 0.0f) - splat(dot)), k);
  }
}

namespace {

// softmax / log_softmax over the last axis, one row at a time , with the
// optional scale and causal mask of a fused attention softmax.
Status softmax(const KernelArgs& a, bool as_log, int64_t axis, double scale, std::optional<int64_t> causal_offset) {
  const bool causal = causal_offset.has_value();
  const Shape& s = a.in[0].shape();
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return as_log ? ref::LogSoftmax(a) : ref::Softmax(a);
  VOLTA_ASSIGN_OR_RETURN(const int64_t offset, ref::softmax_offset(a, s.back(), causal_offset));
  const int64_t C = s.back(), rows = C == 0 ? 0 : a.in[0].numel() / C, R = causal ? s[s.size() - 2] : 1;
  const float* x = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  chunk_rows(rows, C, [&](int64_t r) {
    softmax_row(x + r * C, out + r * C, C, causal ? r % R + offset + 1 : C, static_cast<float>(scale), as_log);
  });
  return Status::ok();
}

}  // namespace

Status softmax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Softmax>(a.node));
  return softmax(a, false, at->axis, at->scale, at->causal_offset);
}

Status log_softmax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LogSoftmax>(a.node));
  return softmax(a, true, at->axis, 1.0, std::nullopt);
}

Status softmax_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::SoftmaxGrad>(a.node));
  const int64_t axis = at->axis;
  const double scale = at->scale;
  const Shape& s = a.in[0].shape();
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return ref::SoftmaxGrad(a);
  const int64_t C = s.back(), rows = C == 0 ? 0 : a.in[0].numel() / C;
  const float* y = a.in[0].as<const float>();
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  chunk_rows(rows, C, [&](int64_t r) { softmax_grad_row(y + r * C, dy + r * C, out + r * C, C, static_cast<float>(scale)); });
  return Status::ok();
}

}  // namespace volta::cpu
