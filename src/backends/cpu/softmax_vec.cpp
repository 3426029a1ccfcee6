// Row kernels of softmax, log_softmax and the softmax gradient (softmax.cpp, and through it the
// fused attention and the cross-entropy), on 16-lane vectors. Compiled per ISA level
// (vec_kernels.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA

namespace volta::cpu::VOLTA_VEC_NS {

using namespace vec;

namespace {

// softmax(scale * x (+ add)) over the first `valid` entries of a row; the others are left out
// (0 for softmax, -inf for log_softmax). No valid entry gives nan, like the reference's 0/0.
// Loads cover whole 16-lane groups of the row where it has them; masked lanes hold -inf, whose
// exp is exactly 0. `add` (an attention mask row, read over its first `valid` entries only)
// comes with scale 1, so x * 1 + add, one FMA, is x + add rounded once, as an add node computes
// it. Returns false when the row held an inf or nan (the scalar path: only such a row can give
// nan probabilities).
VOLTA_VEC_INLINE bool softmax_row(const float* x, float* y, int64_t C, int64_t valid, float scale, bool as_log,
                                  const float* add) {
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
    const Vec e = c < valid ? vexp(z(c) - splat(mx)) : splat(0.0f);  // z <= mx
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
VOLTA_VEC_INLINE void softmax_grad_row(const float* y, const float* dy, float* dx, int64_t C, float scale) {
  const float dot =
      sum_lanes(C, [&](int64_t c, int64_t k) VOLTA_VEC_LAMBDA { return load_n(dy + c, k, 0.0f) * load_n(y + c, k, 0.0f); });
  for (int64_t c = 0; c < C; c += kLanes) {
    const int64_t k = std::min(kLanes, C - c);
    store_n(dx + c, splat(scale) * load_n(y + c, k, 0.0f) * (load_n(dy + c, k, 0.0f) - splat(dot)), k);
  }
}

}  // namespace

// A caller's rows in one call: an attention group's score rows are 16 to 64 keys, and a call
// through the ISA dispatch per row cost about a tenth of the fused attention's time. (Running
// several rows' chains interleaved, as the norms do, measured no faster: the exps' arithmetic
// bounds these rows, not their chains' latency.)
bool softmax_rows(const float* x, float* y, int64_t ld, int64_t rows, int64_t C, int64_t valid, int64_t valid_step,
                  float scale, bool as_log, const float* add, int64_t add_ld) {
  bool finite = true;
  for (int64_t i = 0; i < rows; ++i)
    finite &= softmax_row(x + i * ld, y + i * ld, C, valid + i * valid_step, scale, as_log, add ? add + i * add_ld : nullptr);
  return finite;
}

void softmax_grad_rows(const float* y, const float* dy, float* dx, int64_t ld, int64_t rows, int64_t C, float scale) {
  for (int64_t i = 0; i < rows; ++i) softmax_grad_row(y + i * ld, dy + i * ld, dx + i * ld, C, scale);
}

}  // namespace volta::cpu::VOLTA_VEC_NS
