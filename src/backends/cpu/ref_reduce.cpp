// Reference reductions over a set of axes. Each output element walks its reduced indices in
// row-major order and accumulates in double, so the summation order is fixed.
#include <cmath>
#include <limits>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

enum class Kind { Sum, Mean, Max };

Status reduce(const KernelArgs& a, Kind kind, const std::vector<int64_t>& axes) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const Shape& s = a.in[0].shape();
  std::vector<bool> reduced(s.size(), false);
  for (int64_t ax : axes) {
    VOLTA_ASSIGN_OR_RETURN(const size_t d, normalize_axis(a.node, ax, s.size()));
    reduced[d] = true;
  }
  // Split the input's dims into kept (the output's order) and reduced ones, with their strides.
  const Strides st = contiguous_strides(s);
  Shape kept_shape, red_shape;
  Strides kept_st, red_st;
  for (size_t d = 0; d < s.size(); ++d) {
    (reduced[d] ? red_shape : kept_shape).push_back(s[d]);
    (reduced[d] ? red_st : kept_st).push_back(st[d]);
  }
  const int64_t red_count = count(red_shape);
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  for_each_index(kept_shape, std::array<Strides, 1>{kept_st}, [&](int64_t n, const std::array<int64_t, 1>& base) {
    double acc = kind == Kind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for_each_index(red_shape, std::array<Strides, 1>{red_st}, [&](int64_t, const std::array<int64_t, 1>& off) {
      const double v = x[base[0] + off[0]];
      if (kind != Kind::Max) {
        acc += v;
      } else if (v > acc || std::isnan(v)) {
        acc = v;  // once NaN, stays NaN: nothing compares greater
      }
    });
    if (kind == Kind::Mean) acc /= static_cast<double>(red_count);  // 0/0 = nan for an empty mean
    out[n] = static_cast<float>(acc);
  });
  return Status::ok();
}

}  // namespace

Status ReduceSum(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ReduceSum>(a.node));
  return reduce(a, Kind::Sum, at->axes);
}
Status ReduceMean(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ReduceMean>(a.node));
  return reduce(a, Kind::Mean, at->axes);
}
Status ReduceMax(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ReduceMax>(a.node));
  return reduce(a, Kind::Max, at->axes);
}

}  // namespace volta::cpu::ref
