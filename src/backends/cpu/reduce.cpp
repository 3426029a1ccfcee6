// The CPU backend's reduce_sum over one contiguous range of axes, which uses the 16-lane sums
// of reduce_vec.cpp that the other kernels share too.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

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
