// Reference max and average pooling over 1 to 3 spatial dims of [N, C, spatial...], and their
// gradients. Spatial dims are padded to three (extent 1, kernel 1) so one loop nest serves all.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

struct PoolGeom {
  int64_t planes = 0;  // N * C
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, k{1, 1, 1}, s{1, 1, 1}, pb{0, 0, 0}, pe{0, 0, 0}, d{1, 1, 1};
  bool count_include_pad = false;
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
};

Result<PoolGeom> geometry(const KernelArgs& a, const Shape& x, const Shape& y) {
  if (x.size() < 3 || x.size() > 5 || y.size() != x.size())
    return internal_error(op_prefix(a.node) + "expects [N, C, spatial...] operands " + ir::node_ref(a.node));
  const size_t sr = x.size() - 2;
  VOLTA_ASSIGN_OR_RETURN(const ir::Window w, ir::window_of(a.node, sr));
  PoolGeom g;
  g.planes = x[0] * x[1];
  g.count_include_pad = w.count_include_pad;
  for (size_t i = 0; i < sr; ++i) {
    g.in[i] = x[i + 2], g.out[i] = y[i + 2], g.k[i] = w.kernel[i], g.s[i] = w.strides[i];
    g.pb[i] = w.pads[i], g.pe[i] = w.pads[i + sr], g.d[i] = w.dilations[i];
  }
  return g;
}

// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

// Taps t in [0, k) of a window starting at `start` with dilation d whose position start + t d
// lies in [first, end): [lo, hi], empty when lo > hi. Found by arithmetic, not by walking the
// kernel: a window of 2^20 taps padded around one element holds one tap.
std::array<int64_t, 2> taps_within(int64_t start, int64_t d, int64_t k, int64_t first, int64_t end) {
  return {std::max<int64_t>(0, -floor_div(start - first, d)), std::min(k - 1, floor_div(end - 1 - start, d))};
}

// Calls f(flat input offset within the plane) for every in-bounds tap of output position o
// (flat within the plane), in row-major kernel order; returns the divisor avg_pool uses.
template <typename F>
int64_t for_each_tap(const PoolGeom& g, int64_t o, F&& f) {
  const int64_t o2 = o % g.out[2], o1 = (o / g.out[2]) % g.out[1], o0 = o / (g.out[2] * g.out[1]);
  const std::array<int64_t, 3> pos{o0, o1, o2};
  int64_t valid = 0, padded = 1;
  std::array<int64_t, 3> lo{}, hi{};  // each dim's first and last in-bounds input position
  for (size_t i = 0; i < 3; ++i) {
    // Taps inside the padded extent [-pb, in + pe) count when count_include_pad is set.
    const int64_t start = pos[i] * g.s[i] - g.pb[i];
    const auto pad = taps_within(start, g.d[i], g.k[i], -g.pb[i], g.in[i] + g.pe[i]);
    padded *= std::max<int64_t>(0, pad[1] - pad[0] + 1);
    const auto in = taps_within(start, g.d[i], g.k[i], 0, g.in[i]);
    lo[i] = start + in[0] * g.d[i];
    hi[i] = start + in[1] * g.d[i];
  }
  for (int64_t t0 = lo[0]; t0 <= hi[0]; t0 += g.d[0])
    for (int64_t t1 = lo[1]; t1 <= hi[1]; t1 += g.d[1])
      for (int64_t t2 = lo[2]; t2 <= hi[2]; t2 += g.d[2]) {
        f((t0 * g.in[1] + t1) * g.in[2] + t2);
        ++valid;
      }
  return g.count_include_pad ? padded : valid;
}

// The first tap holding the window's max (nan wins), or -1 for a window without taps.
int64_t argmax_tap(const PoolGeom& g, const float* plane, int64_t o) {
  int64_t best = -1;
  float v = -std::numeric_limits<float>::infinity();
  for_each_tap(g, o, [&](int64_t i) {
    if (best < 0 || plane[i] > v || (std::isnan(plane[i]) && !std::isnan(v))) best = i, v = plane[i];
  });
  return best;
}

}  // namespace

// The max of each window, or (indices = 1) where it is as a flat index into x.
Status MaxPool(const KernelArgs& a) {
  const bool indices = a.out.type.dtype == DType::i64;
  if (a.in[0].type.dtype != DType::f32) return internal_error(op_prefix(a.node) + "x must be f32 " + ir::node_ref(a.node));
  VOLTA_ASSIGN_OR_RETURN(const PoolGeom g, geometry(a, a.in[0].shape(), a.out.shape()));
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* x = in_f32(a, 0) + p * g.in_size();
    for (int64_t o = 0; o < g.out_size(); ++o) {
      const int64_t i = argmax_tap(g, x, o);
      if (indices) a.out.as<int64_t>()[p * g.out_size() + o] = i < 0 ? -1 : p * g.in_size() + i;
      else out_f32(a)[p * g.out_size() + o] = i < 0 ? -std::numeric_limits<float>::infinity() : x[i];
    }
  }
  return Status::ok();
}

Status AvgPool(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const PoolGeom g, geometry(a, a.in[0].shape(), a.out.shape()));
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* x = in_f32(a, 0) + p * g.in_size();
    float* y = out_f32(a) + p * g.out_size();
    for (int64_t o = 0; o < g.out_size(); ++o) {
      double acc = 0.0;
      const int64_t divisor = for_each_tap(g, o, [&](int64_t i) { acc += x[i]; });
      y[o] = static_cast<float>(acc / static_cast<double>(divisor));  // 0/0 = nan for a window without taps
    }
  }
  return Status::ok();
}

// dy of each window goes to its first max.
Status MaxPoolGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const PoolGeom g, geometry(a, a.in[0].shape(), a.in[1].shape()));
  std::vector<double> acc(static_cast<size_t>(g.in_size()));
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* x = in_f32(a, 0) + p * g.in_size();
    const float* dy = in_f32(a, 1) + p * g.out_size();
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t o = 0; o < g.out_size(); ++o) {
      const int64_t i = argmax_tap(g, x, o);
      if (i >= 0) acc[static_cast<size_t>(i)] += dy[o];
    }
    float* dx = out_f32(a) + p * g.in_size();
    for (size_t i = 0; i < acc.size(); ++i) dx[i] = static_cast<float>(acc[i]);
  }
  return Status::ok();
}

// dy of each window spread evenly over its taps (by avg_pool's divisor).
Status AvgPoolGrad(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const PoolGeom g, geometry(a, a.out.shape(), a.in[0].shape()));
  std::vector<double> acc(static_cast<size_t>(g.in_size()));
  std::vector<int64_t> taps;
  for (int64_t p = 0; p < g.planes; ++p) {
    const float* dy = in_f32(a, 0) + p * g.out_size();
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t o = 0; o < g.out_size(); ++o) {
      taps.clear();
      const int64_t divisor = for_each_tap(g, o, [&](int64_t i) { taps.push_back(i); });
      for (int64_t i : taps) acc[static_cast<size_t>(i)] += static_cast<double>(dy[o]) / static_cast<double>(divisor);
    }
    float* dx = out_f32(a) + p * g.in_size();
    for (size_t i = 0; i < acc.size(); ++i) dx[i] = static_cast<float>(acc[i]);
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
