// The unary ops' maps over n floats (elementwise.cpp's vector_unary, which the unfused ops and
// fused_elementwise share) and the attention's row scaling. Compiled per ISA level
// (vec_kernels.h).
#include <cmath>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA
#include "backends/cpu/vec_math.h"

namespace volta::cpu::VOLTA_VEC_NS {

using namespace vec;

// The unary ops with vector math (vec_math.h), as maps over n floats: one function per op, which
// the unfused op's kernel and fused_elementwise's steps both call.
#define VOLTA_VEC_MATH_MAP(name, f)                                        \
  void name(const float* x, float* y, int64_t n) {                         \
    map(x, y, n, 0.0f, [](Vec v) VOLTA_VEC_LAMBDA { return math::f(v); }); \
  }
VOLTA_VEC_MATH_MAP(map_exp, exp)
VOLTA_VEC_MATH_MAP(map_log, log)
VOLTA_VEC_MATH_MAP(map_tanh, tanh)
VOLTA_VEC_MATH_MAP(map_sigmoid, sigmoid)
VOLTA_VEC_MATH_MAP(map_silu, silu)
VOLTA_VEC_MATH_MAP(map_erf, erf)
#undef VOLTA_VEC_MATH_MAP

// Exact ops: f32 sqrt, negation and |x| are the double evaluation rounded once (sqrt: a double
// square root rounded to f32 is the correctly rounded f32 one).
void map_sqrt(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);
}
void map_neg(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
}
void map_abs(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::fabs(x[i]);
}

// y = x * y and y = x + y in place (a matmul's epilogue: a stored gelu' times the product, a
// bias or a residual added to it): one rounding an element, so the same bits at every ISA level.
void mul_into(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * y[i];
}
void add_into(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] + y[i];
}

// The product is stored by a call of its own, so the attention's mask add cannot join it in one
// FMA (-ffp-contract=fast): scale * s and then + mask round twice, as mul and add do.
void scale_row(float* x, int64_t n, float scale) {
  for (int64_t j = 0; j < n; ++j) x[j] *= scale;
}

}  // namespace volta::cpu::VOLTA_VEC_NS
