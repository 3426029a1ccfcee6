// Sums and scans the other kernels share (reduce.cpp, attention.cpp, optim.cpp): column sums,
// row sums, all-finite and all-zero tests, on 16-lane vectors. Compiled per ISA level
// (vec_kernels.h).
#include <algorithm>
#include <cstring>

#include "backends/cpu/vec_kernels.h"
#include "backends/cpu/vec.h"  // last: it turns on this build's ISA

namespace volta::cpu::VOLTA_VEC_NS {

using namespace vec;

// out[j] = sum over r of x[r * ld + j], j < n (n <= a few hundred), r in order.
void column_sums(const float* x, int64_t ld, int64_t rows, float* out, int64_t n) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const int64_t k = std::min(kLanes, n - j);
    Vec acc = splat(0.0f);
    for (int64_t r = 0; r < rows; ++r) acc += load_n(x + r * ld + j, k, 0.0f);
    store_n(out + j, acc, k);
  }
}

float row_sum(const float* x, int64_t n) {
  return sum_lanes(n, [&](int64_t i, int64_t k) VOLTA_VEC_LAMBDA { return load_n(x + i, k, 0.0f); });
}

// Whole vectors, no early exit: v - v is 0 for a finite v and nan for an inf or nan, and the
// lanes where it is not 0 are or-ed into a mask (summed, they were one chain of float adds).
bool all_finite_rows(const float* x, int64_t rows, int64_t cols, int64_t rs) {
  IVec bad = splat(0.0f) != splat(0.0f);
  for (int64_t r = 0; r < rows; ++r, x += rs)
    for (int64_t i = 0; i < cols; i += kLanes) {
      const Vec v = load_n(x + i, std::min(kLanes, cols - i), 0.0f);
      bad = bad | (v - v != splat(0.0f));
    }
  for (int64_t l = 0; l < kLanes; ++l)
    if (bad[l] != 0) return false;
  return true;
}

// An integer test of the bits, so it vectorises (no float compares, no early exit).
bool all_zero(const float* x, int64_t n) {
  uint32_t bits = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    bits |= u & 0x7fffffffu;  // +0 and -0 alike
  }
  return bits == 0;
}

}  // namespace volta::cpu::VOLTA_VEC_NS
