// The CPU backend's reduce_sum over one contiguous range of axes, and the 16-lane sums and
// scans the other kernels share (column sums, row sums, all-finite and all-zero tests).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "backends/cpu/vec.h"

namespace volta::cpu {

using namespace vec;

// out[j] = sum over r of x[r * ld + j], j < n (n <= a few hundred), r in order.
VOLTA_ISA_CLONES
void column_sums(const float* x, int64_t ld, int64_t rows, float* out, int64_t n) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const int64_t k = std::min(kLanes, n - j);
    Vec acc = splat(0.0f);
    for (int64_t r = 0; r < rows; ++r) acc += load_n(x + r * ld + j, k, 0.0f);
    store_n(out + j, acc, k);
  }
}

VOLTA_ISA_CLONES
float row_sum(const float* x, int64_t n) {
  return sum_lanes(n, [&](int64_t i, int64_t k) VOLTA_VEC_LAMBDA { return load_n(x + i, k, 0.0f); });
}

// Whole vectors, no early exit: v - v is 0 for a finite v and nan for an inf or nan.
VOLTA_ISA_CLONES
bool all_finite_rows(const float* x, int64_t rows, int64_t cols, int64_t rs) {
  vec::Vec acc = vec::splat(0.0f);
  for (int64_t r = 0; r < rows; ++r, x += rs)
    for (int64_t i = 0; i < cols; i += vec::kLanes) {
      const vec::Vec v = vec::load_n(x + i, std::min(vec::kLanes, cols - i), 0.0f);
      acc += v - v;
    }
  for (int64_t l = 0; l < vec::kLanes; ++l)
    if (acc[l] != 0.0f) return false;
  return true;
}

// An integer test of the bits, so it vectorises (no float compares, no early exit).
VOLTA_ISA_CLONES
bool all_zero(const float* x, int64_t n) {
  uint32_t bits = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, sizeof u);
    bits |= u & 0x7fffffffu;  // +0 and -0 alike
  }
  return bits == 0;
}

// reduce_sum whose reduced axes form one contiguous range: x viewed as [outer, R, inner].
// Each output is summed over r in index order (in 16-lane groups of outputs, or in lanes along
// a contiguous row when inner is 1); tasks are fixed by the shape.
Status reduce_sum(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ReduceSum>(a.node));
  const std::vector<int64_t>& axes = at->axes;
  if (a.in[0].type.dtype != DType::f32) return ref::ReduceSum(a);
  const Shape& s = a.in[0].shape();
  std::vector<bool> red(s.size(), false);
  for (int64_t ax : axes) red[static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(s.size()) : ax)] = true;
  size_t first = s.size(), last = 0;
  for (size_t d = 0; d < s.size(); ++d)
    if (red[d]) first = std::min(first, d), last = d;
  if (first == s.size()) return ref::ReduceSum(a);  // nothing reduced: a copy
  for (size_t d = first; d <= last; ++d)
    if (!red[d]) return ref::ReduceSum(a);  // not one contiguous range
  const int64_t outer = ref::dims_product(s, 0, first), R = ref::dims_product(s, first, last + 1),
                inner = ref::dims_product(s, last + 1, s.size());
  const float* x = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  if (inner == 1) {
    chunk_rows(outer, R, [&](int64_t o) { out[o] = row_sum(x + o * R, R); });
    return Status::ok();
  }
  // Output columns per task: a [rows, 128] sum (a norm's or bias's gradient) is two tasks, not one.
  constexpr int64_t kCols = 64;
  const int64_t col_tasks = (inner + kCols - 1) / kCols;
  parallel_for(outer * col_tasks, [&](int64_t t) {
    const int64_t o = t / col_tasks, j0 = (t % col_tasks) * kCols;
    column_sums(x + o * R * inner + j0, inner, R, out + o * inner + j0, std::min(kCols, inner - j0));
  });
  return Status::ok();
}

}  // namespace volta::cpu
