// The CPU backend's transpose: permutations that keep the last axis copy whole rows in fixed
// tasks; others go to the reference kernel.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

// Transposes that keep the last axis in place copy whole rows.
Status transpose(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Transpose>(a.node));
  const std::vector<int64_t>& perm = at->perm;
  const Shape& s = a.in[0].shape();
  const size_t r = s.size();
  if (r < 2 || perm.back() != static_cast<int64_t>(r) - 1) return ref::Transpose(a);
  const size_t es = dtype_size(a.out.type.dtype);
  const int64_t inner = s.back();
  const Shape& os = a.out.shape();
  const Shape outer(os.begin(), os.end() - 1);
  const ref::Strides in_st = ref::contiguous_strides(s);
  ref::Strides st(outer.size());
  for (size_t d = 0; d < outer.size(); ++d) st[d] = in_st[static_cast<size_t>(perm[d])];
  const int64_t rows = ref::count(outer);
  const std::byte* x = a.in[0].data;
  std::byte* y = a.out.data;
  parallel_for((rows + 255) / 256, [&](int64_t t) {
    for (int64_t row = t * 256; row < std::min(rows, (t + 1) * 256); ++row) {
      int64_t rem = row, off = 0;
      for (size_t d = outer.size(); d-- > 0;) {
        off += (rem % outer[d]) * st[d];
        rem /= outer[d];
      }
      std::memcpy(y + static_cast<size_t>(row * inner) * es, x + static_cast<size_t>(off) * es, static_cast<size_t>(inner) * es);
    }
  });
  return Status::ok();
}

}  // namespace volta::cpu
