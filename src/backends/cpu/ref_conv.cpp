// Reference 2-D convolution (NCHW, weights [M, C/groups, kH, kW]) and its two gradients.
// Every output sums its products in double in (c, kh, kw) order; the gradients accumulate in
// double in a fixed loop order and round once.
#include <vector>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {
namespace {

// The geometry shared by the three kernels, from x's and w's shapes and the window attributes.
struct ConvGeom {
  int64_t N, C, H, W;   // x
  int64_t M, Cg, KH, KW;  // w; Cg = C / groups
  int64_t OH, OW;         // y
  int64_t groups, Mg;     // Mg = M / groups
  ir::Window win;
  // Input row/column read by output (oh, ow) at kernel tap (kh, kw); may be outside [0, H) x [0, W).
  int64_t ih(int64_t oh, int64_t kh) const { return oh * win.strides[0] - win.pads[0] + kh * win.dilations[0]; }
  int64_t iw(int64_t ow, int64_t kw) const { return ow * win.strides[1] - win.pads[1] + kw * win.dilations[1]; }
  // f(x index, w index) for every tap of output (n, m, oh, ow) that reads inside x, in (c, kh, kw)
  // order: the order the forward sums in.
  template <typename F>
  void for_each_tap(int64_t n, int64_t m, int64_t oh, int64_t ow, F f) const {
    const int64_t c0 = (m / Mg) * Cg;  // first input channel of m's group
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t h = ih(oh, kh);
        if (h < 0 || h >= H) continue;
        for (int64_t kw = 0; kw < KW; ++kw) {
          const int64_t w = iw(ow, kw);
          if (w < 0 || w >= W) continue;
          f(((n * C + c0 + c) * H + h) * W + w, ((m * Cg + c) * KH + kh) * KW + kw);
        }
      }
  }
};

Result<ConvGeom> geometry(const KernelArgs& a, const Shape& x, const Shape& w, const Shape& y) {
  if (x.size() != 4 || w.size() != 4 || y.size() != 4)
    return internal_error(op_prefix(a.node) + "expects rank-4 operands " + ir::node_ref(a.node));
  ConvGeom g;
  const std::vector<int64_t> kernel = {w[2], w[3]};
  VOLTA_ASSIGN_OR_RETURN(g.win, ir::window_of(a.node, 2, &kernel));
  g.N = x[0], g.C = x[1], g.H = x[2], g.W = x[3];
  g.M = w[0], g.Cg = w[1], g.KH = w[2], g.KW = w[3];
  g.OH = y[2], g.OW = y[3];
  g.groups = g.win.groups;
  g.Mg = g.M / g.groups;
  return g;
}

}  // namespace

Status Conv2d(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const ConvGeom g, geometry(a, a.in[0].shape(), a.in[1].shape(), a.out.shape()));
  const float* x = in_f32(a, 0);
  const float* w = in_f32(a, 1);
  const float* bias = a.in.size() == 3 ? in_f32(a, 2) : nullptr;
  float* y = out_f32(a);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double acc = 0.0;
          g.for_each_tap(n, m, oh, ow, [&](int64_t xi, int64_t wi) { acc += static_cast<double>(x[xi]) * w[wi]; });
          if (bias) acc += bias[m];
          y[((n * g.M + m) * g.OH + oh) * g.OW + ow] = static_cast<float>(acc);
        }
  return Status::ok();
}

// dx[n, c, ih, iw] = sum of dy[n, m, oh, ow] * w[m, c', kh, kw] over the taps that read it.
Status Conv2dGradInput(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const ConvGeom g, geometry(a, a.out.shape(), a.in[0].shape(), a.in[1].shape()));
  const float* w = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  std::vector<double> dx(static_cast<size_t>(a.out.numel()), 0.0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t m = 0; m < g.M; ++m)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const double d = dy[((n * g.M + m) * g.OH + oh) * g.OW + ow];
          g.for_each_tap(n, m, oh, ow, [&](int64_t xi, int64_t wi) { dx[static_cast<size_t>(xi)] += d * w[wi]; });
        }
  float* out = out_f32(a);
  for (size_t i = 0; i < dx.size(); ++i) out[i] = static_cast<float>(dx[i]);
  return Status::ok();
}

// dw[m, c, kh, kw] = sum over n, oh, ow of dy[n, m, oh, ow] * x[n, c0 + c, ih, iw].
Status Conv2dGradWeight(const KernelArgs& a) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  VOLTA_ASSIGN_OR_RETURN(const ConvGeom g, geometry(a, a.in[0].shape(), a.out.shape(), a.in[1].shape()));
  const float* x = in_f32(a, 0);
  const float* dy = in_f32(a, 1);
  float* dw = out_f32(a);
  for (int64_t m = 0; m < g.M; ++m) {
    const int64_t c0 = (m / g.Mg) * g.Cg;
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw) {
          double acc = 0.0;
          for (int64_t n = 0; n < g.N; ++n)
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              const int64_t ih = g.ih(oh, kh);
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t iw = g.iw(ow, kw);
                if (iw < 0 || iw >= g.W) continue;
                acc += static_cast<double>(dy[((n * g.M + m) * g.OH + oh) * g.OW + ow]) *
                       x[((n * g.C + c0 + c) * g.H + ih) * g.W + iw];
              }
            }
          dw[((m * g.Cg + c) * g.KH + kh) * g.KW + kw] = static_cast<float>(acc);
        }
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref
