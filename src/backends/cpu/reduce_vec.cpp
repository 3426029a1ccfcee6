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

// Whole vectors, no early exit: v - v is 0 for a finite v and nan for an inf or nan, summed
// into two chains (rows in pairs), so a nan or inf anywhere leaves a nan lane. (A mask or-ed
// lane by lane went through the stack on every vector in the x86-64-v3 build: a store and a
// reload in the loop's chain, about 5% of a training step's attention gradient.)
bool all_finite_rows(const float* x, int64_t rows, int64_t cols, int64_t rs) {
  Vec even = splat(0.0f), odd = splat(0.0f);
  const auto row = [&](const float* p, Vec& acc) VOLTA_VEC_LAMBDA {
    for (int64_t i = 0; i < cols; i += kLanes) {
      const Vec v = load_n(p + i, std::min(kLanes, cols - i), 0.0f);
      acc += v - v;
    }
  };
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2, x += 2 * rs) row(x, even), row(x + rs, odd);
  if (r < rows) row(x, even);
  const Vec all = even + odd;
  for (int64_t l = 0; l < kLanes; ++l)
    if (all[l] != 0.0f) return false;  // nan != 0
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
