// Row kernels of the optimizers (optim.cpp): the Adam / AdamW and SGD updates of a chunk and its
// sum of squares, on 16-lane vectors. Compiled per ISA level (vec_kernels.h).
#include <algorithm>
#include <cmath>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA

namespace volta::cpu::VOLTA_VEC_NS {

using namespace vec;

namespace {

VOLTA_VEC_INLINE Vec vsqrt(Vec v) {
  float l[kLanes];
  store(l, v);
  for (float& x : l) x = __builtin_sqrtf(x);  // becomes one vector sqrt
  return load(l);
}

}  // namespace

void adam_chunk(const AdamCoef& k, float* p, const float* g, float* m, float* v, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t c = std::min(kLanes, n - i);
    Vec w = load_n(p + i, c, 0.0f), d = load_n(g + i, c, 0.0f) * splat(k.scale);
    if (k.decoupled) w *= splat(k.decay);
    else d += splat(k.decay) * w;
    // Each sum's first product is named: it is the one fused with the sum (see vec.h).
    const Vec m_decayed = splat(k.b1) * load_n(m + i, c, 0.0f);
    const Vec mi = m_decayed + splat(k.one_minus_b1) * d;
    const Vec v_decayed = splat(k.b2) * load_n(v + i, c, 0.0f);
    const Vec vi = v_decayed + splat(k.one_minus_b2) * d * d;
    store_n(m + i, mi, c);
    store_n(v + i, vi, c);
    store_n(p + i, w - splat(k.lr) * (mi / splat(k.c1)) / (vsqrt(vi / splat(k.c2)) + splat(k.eps)), c);
  }
}

void sgd_chunk(float lr, float wd, float momentum, float scale, float* p, const float* g, float* buf, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) {
    const int64_t c = std::min(kLanes, n - i);
    const Vec w = load_n(p + i, c, 0.0f);
    const Vec g_scaled = load_n(g + i, c, 0.0f) * splat(scale);  // named: the product fused below
    Vec d = g_scaled + splat(wd) * w;
    if (buf) {
      d = splat(momentum) * load_n(buf + i, c, 0.0f) + d;
      store_n(buf + i, d, c);
    }
    store_n(p + i, w - splat(lr) * d, c);
  }
}

float squares_chunk(const float* x, int64_t n) {
  return sum_lanes(n, [&](int64_t i, int64_t c) VOLTA_VEC_LAMBDA {
    const Vec v = load_n(x + i, c, 0.0f);
    return v * v;
  });
}

}  // namespace volta::cpu::VOLTA_VEC_NS
