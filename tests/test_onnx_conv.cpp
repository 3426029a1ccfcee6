// ONNX Conv with 1 and 3 spatial dims (lowered to conv2d at import: 1-D over a height of 1, 3-D
// with the depth taps folded into the channels) against a direct N-D convolution in double, with
// groups, strides, asymmetric pads, dilations, bias and auto_pad.
#include <cmath>
#include <string>
#include <vector>

#include "onnx_maker.h"
#include "test_util.h"
#include "volta/onnx.h"
#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta {
namespace {

using test::ModelMaker;

void set_ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

struct ConvCase {
  Shape x, w;
  std::vector<int64_t> strides, pads, dil;  // pads: begins then ends
  int64_t group = 1;
  bool bias = true;
  std::string auto_pad;  // empty: explicit pads
};

// y[n, m, o...] = b[m] + sum over c in m's group and the kernel of x[n, c, o * s + k * d - p] w[m, c, k]
// (in double; taps outside x read 0).
Tensor direct_conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvCase& c, const Shape& out) {
  const size_t sr = c.x.size() - 2;
  const int64_t cg = c.x[1] / c.group, mg = c.w[0] / c.group;
  Tensor y = Tensor::zeros(DType::f32, out);
  auto numel = [](const Shape& s, size_t from) {
    int64_t n = 1;
    for (size_t i = from; i < s.size(); ++i) n *= s[i];
    return n;
  };
  const int64_t opix = numel(out, 2), kpix = numel(c.w, 2), xpix = numel(c.x, 2);
  for (int64_t n = 0; n < out[0]; ++n)
    for (int64_t m = 0; m < out[1]; ++m)
      for (int64_t o = 0; o < opix; ++o) {
        double acc = b ? b->data<float>()[m] : 0.0;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t k = 0; k < kpix; ++k) {
            int64_t orem = o, krem = k, xoff = 0, xstride = 1;
            bool inside = true;
            for (size_t d = sr; d-- > 0;) {
              const int64_t od = orem % out[d + 2], kd = krem % c.w[d + 2];
              orem /= out[d + 2];
              krem /= c.w[d + 2];
              const int64_t xi = od * c.strides[d] + kd * c.dil[d] - c.pads[d];
              inside = inside && xi >= 0 && xi < c.x[d + 2];
              xoff += xi * xstride;
              xstride *= c.x[d + 2];
            }
            if (!inside) continue;
            const int64_t cin = (m / mg) * cg + ci;
            acc += static_cast<double>(x.data<float>()[(n * c.x[1] + cin) * xpix + xoff]) *
                   static_cast<double>(w.data<float>()[(m * cg + ci) * kpix + k]);
          }
        y.data<float>()[(n * out[1] + m) * opix + o] = static_cast<float>(acc);
      }
  return y;
}

TEST(OnnxConv, OneAndThreeSpatialDimsMatchADirectConvolution) {
  if (!onnx::available()) GTEST_SKIP();
  const std::vector<ConvCase> cases = {
      {{2, 4, 11}, {6, 2, 3}, {2}, {1, 2}, {2}, 2, true, ""},
      {{2, 4, 5, 6, 7}, {6, 2, 2, 3, 2}, {2, 1, 2}, {1, 0, 1, 0, 1, 1}, {2, 1, 1}, 2, true, ""},
      {{1, 3, 4, 4, 5}, {2, 3, 3, 3, 3}, {1, 1, 1}, {}, {1, 1, 1}, 1, false, "SAME_UPPER"},
      {{1, 2, 9}, {3, 2, 4}, {3}, {}, {1}, 1, false, "SAME_LOWER"},
  };
  uint64_t seed = 1;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE("X " + shape_to_string(c.x) + " W " + shape_to_string(c.w));
    ModelMaker mm(13);
    mm.input("x", c.x).input("w", c.w);
    std::vector<std::string> ins = {"x", "w"};
    if (c.bias) mm.input("b", {c.w[0]}), ins.push_back("b");
    auto* n = mm.node("Conv", ins, {"y"}, "conv");
    set_ints(n, "strides", c.strides);
    set_ints(n, "dilations", c.dil);
    test::set_int(n, "group", c.group);
    if (c.auto_pad.empty()) set_ints(n, "pads", c.pads);
    else {
      auto* a = n->add_attribute();
      a->set_name("auto_pad");
      a->set_type(::onnx::AttributeProto::STRING);
      a->set_s(c.auto_pad);
    }
    // The output shape: from explicit pads, or SAME's ceil(in / stride).
    ConvCase full = c;
    const size_t sr = c.x.size() - 2;
    Shape out = {c.x[0], c.w[0]};
    if (!c.auto_pad.empty()) full.pads.assign(2 * sr, 0);
    for (size_t d = 0; d < sr; ++d) {
      if (!c.auto_pad.empty()) {
        const int64_t o = (c.x[d + 2] + c.strides[d] - 1) / c.strides[d];
        const int64_t total = std::max<int64_t>(0, (o - 1) * c.strides[d] + (c.w[d + 2] - 1) * c.dil[d] + 1 - c.x[d + 2]);
        full.pads[d] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        full.pads[d + sr] = total - full.pads[d];
      }
      out.push_back((c.x[d + 2] + full.pads[d] + full.pads[d + sr] - (c.w[d + 2] - 1) * c.dil[d] - 1) / c.strides[d] + 1);
    }
    mm.output("y", out);
    auto m = onnx::import_model(mm.bytes(), "conv.onnx");
    ASSERT_OK(m);
    Tensor x = Tensor::zeros(DType::f32, c.x), w = Tensor::zeros(DType::f32, c.w), b = Tensor::zeros(DType::f32, {c.w[0]});
    fill_normal(x, seed++, 0, 0.0f, 1.0f);
    fill_normal(w, seed++, 0, 0.0f, 1.0f);
    fill_normal(b, seed++, 0, 0.0f, 1.0f);
    Bindings bind = {{"x", x}, {"w", w}};
    if (c.bias) bind["b"] = b;
    Runtime rt(make_cpu_backend());
    auto plan = rt.compile(m->graph);
    ASSERT_OK(plan);
    auto y = rt.run(**plan, bind);
    ASSERT_OK(y);
    const Tensor want = direct_conv(x, w, c.bias ? &b : nullptr, full, out);
    ASSERT_EQ((*y)[0].shape(), want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR((*y)[0].data<float>()[i], want.data<float>()[i], 1e-5 * (1 + std::fabs(want.data<float>()[i]))) << "element " << i;
  }
}

TEST(OnnxConv, OtherRanksAreRefused) {
  if (!onnx::available()) GTEST_SKIP();
  ModelMaker mm(13);
  mm.input("x", {1, 2, 3, 3, 3, 3}).input("w", {1, 2, 1, 1, 1, 1}).output("y", {1, 1, 3, 3, 3, 3});
  mm.node("Conv", {"x", "w"}, {"y"}, "conv");
  EXPECT_ERROR_CONTAINS(onnx::import_model(mm.bytes(), "c.onnx"), "Conv node 'conv' (opset 13): Conv with 1, 2 or 3 spatial dims is supported");
}

}  // namespace
}  // namespace volta
