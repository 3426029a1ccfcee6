// The CPU backend's vector row kernels (*_vec.cpp on vec.h's 16-lane vectors), and how each CPU
// gets the build of them for its ISA level.
//
// Every *_vec.cpp is compiled three times (CMakeLists.txt): for x86-64-v4 (AVX-512) into
// namespace v4, x86-64-v3 (AVX2, FMA) into v3 and baseline x86-64 into base (only base where the
// compiler is not GCC on x86-64). vec_dispatch.cpp defines the functions below in volta::cpu and
// forwards each call to the build the CPU runs best, chosen once. The v4 and v3 builds contract
// the same multiply-adds into FMA and give the same bits; the baseline build has no FMA.
#pragma once

#include <cstdint>

namespace volta::cpu {

// Adam / AdamW coefficients of one update (optim.cpp fills them): decay is 1 - lr * wd for AdamW
// (decoupled) or wd; c1, c2 the bias corrections; scale the gradient's.
struct AdamCoef {
  float lr, b1, b2, one_minus_b1, one_minus_b2, eps, decay, scale, c1, c2;
  bool decoupled;
};

constexpr int64_t kParamGradCols = 64;  // columns per task of norm_param_grad's sums
constexpr int64_t kParamGradRows = 32;  // rows of products per call of unit_norm_products

// X(return type, name, (parameters), (arguments)) for each kernel; the families' files say what
// each computes.
#define VOLTA_VEC_KERNELS(X)                                                                                          \
  /* activation_vec.cpp */                                                                                            \
  X(void, gelu_erf, (const float* x, float* y, int64_t n), (x, y, n))                                                 \
  X(void, gelu_erf_grad, (const float* x, const float* dy, float* out, int64_t n), (x, dy, out, n))                   \
  X(void, gelu_erf_and_grad, (const float* x, float* y, float* d, int64_t n), (x, y, d, n))                           \
  X(void, swiglu_rows, (const float* x, const float* dy, float* out, int64_t rows, int64_t F), (x, dy, out, rows, F)) \
  X(void, silu_grad_elems, (const float* x, const float* dy, float* out, int64_t n), (x, dy, out, n))                 \
  /* softmax_vec.cpp */                                                                                               \
  X(bool, softmax_rows, (const float* x, float* y, int64_t ld, int64_t rows, int64_t C, int64_t valid, int64_t valid_step, \
    float scale, bool as_log, const float* add, int64_t add_ld), (x, y, ld, rows, C, valid, valid_step, scale, as_log, add, add_ld)) \
  X(void, softmax_grad_rows, (const float* y, const float* dy, float* dx, int64_t ld, int64_t rows, int64_t C, float scale), \
    (y, dy, dx, ld, rows, C, scale))                                                                                  \
  /* norm_vec.cpp */                                                                                                  \
  X(void, norm_rows, (const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t D, float eps, \
    bool center), (x, gamma, beta, y, rows, D, eps, center))                                                          \
  X(void, norm_grad_rows, (const float* x, const float* gamma, const float* dy, float* dx, int64_t rows, int64_t D,   \
    float eps, bool center), (x, gamma, dy, dx, rows, D, eps, center))                                                \
  X(void, norm_moments, (const float* x, int64_t rows, int64_t D, float eps, bool center, float* m),                  \
    (x, rows, D, eps, center, m))                                                                                     \
  X(void, norm_param_sums, (const float* x, const float* dy, const float* moments, int64_t rows, int64_t D, int64_t n, float* out), \
    (x, dy, moments, rows, D, n, out))                                                                                \
  /* optim_vec.cpp */                                                                                                 \
  X(void, adam_chunk, (const AdamCoef& k, float* p, const float* g, float* m, float* v, int64_t n), (k, p, g, m, v, n)) \
  X(void, sgd_chunk, (float lr, float wd, float momentum, float scale, float* p, const float* g, float* buf, int64_t n), \
    (lr, wd, momentum, scale, p, g, buf, n))                                                                          \
  X(float, squares_chunk, (const float* x, int64_t n), (x, n))                                                        \
  /* reduce_vec.cpp */                                                                                                \
  X(void, column_sums, (const float* x, int64_t ld, int64_t rows, float* out, int64_t n), (x, ld, rows, out, n))     \
  X(float, row_sum, (const float* x, int64_t n), (x, n))                                                              \
  X(bool, all_finite_rows, (const float* x, int64_t rows, int64_t cols, int64_t rs), (x, rows, cols, rs))            \
  X(bool, all_zero, (const float* x, int64_t n), (x, n))                                                              \
  /* elementwise_vec.cpp */                                                                                           \
  X(void, map_exp, (const float* x, float* y, int64_t n), (x, y, n))                                                  \
  X(void, map_log, (const float* x, float* y, int64_t n), (x, y, n))                                                  \
  X(void, map_tanh, (const float* x, float* y, int64_t n), (x, y, n))                                                 \
  X(void, map_sigmoid, (const float* x, float* y, int64_t n), (x, y, n))                                              \
  X(void, map_silu, (const float* x, float* y, int64_t n), (x, y, n))                                                 \
  X(void, map_erf, (const float* x, float* y, int64_t n), (x, y, n))                                                  \
  X(void, map_sqrt, (const float* x, float* y, int64_t n), (x, y, n))                                                 \
  X(void, map_neg, (const float* x, float* y, int64_t n), (x, y, n))                                                  \
  X(void, map_abs, (const float* x, float* y, int64_t n), (x, y, n))                                                  \
  X(void, mul_into, (const float* x, float* y, int64_t n), (x, y, n))                                                 \
  X(void, add_into, (const float* x, float* y, int64_t n), (x, y, n))                                                 \
  X(void, scale_row, (float* x, int64_t n, float scale), (x, n, scale))

#define VOLTA_VEC_DECLARE(ret, name, params, args) ret name params;
VOLTA_VEC_KERNELS(VOLTA_VEC_DECLARE)  // the dispatched entry points
namespace v4 {
VOLTA_VEC_KERNELS(VOLTA_VEC_DECLARE)
}
namespace v3 {
VOLTA_VEC_KERNELS(VOLTA_VEC_DECLARE)
}
namespace base {
VOLTA_VEC_KERNELS(VOLTA_VEC_DECLARE)
}
#undef VOLTA_VEC_DECLARE

// The build the dispatched functions call: "v4", "v3" or "base".
const char* vec_kernels_isa();

}  // namespace volta::cpu
