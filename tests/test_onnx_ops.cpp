// The ops added for ONNX import: finite-difference gradient checks (so imported models can be
// fine-tuned) and the kernel cases the ONNX node tests do not reach.
#include <cmath>

#include "gradcheck.h"
#include "test_util.h"
#include "volta/builder.h"
#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta {
namespace {

using ir::Op;
using test::gradcheck;

constexpr double kMaxRel = 3e-2;

TensorType f32_type(Shape s) { return {DType::f32, std::move(s)}; }
ParamInit unit() { return ParamInit::normal(1.0); }

void expect_grad(const std::string& what, const Result<test::GradCheckResult>& r) {
  ASSERT_TRUE(r.is_ok()) << what << ": " << r.status().message();
  std::printf("gradcheck %-36s max_abs %.2e  max_rel %.2e  (%lld elements)\n", what.c_str(), r->max_abs, r->max_rel,
              static_cast<long long>(r->checked));
  EXPECT_GT(r->checked, 0) << what;
  EXPECT_LT(r->max_rel, kMaxRel) << what << " max_abs " << r->max_abs;
}

// N(0, 1) values kept at least `gap` away from each of `kinks`.
Tensor away_from(Shape s, uint64_t seed, std::vector<float> kinks, float gap = 0.1f) {
  Tensor t = Tensor::zeros(DType::f32, s);
  fill_normal(t, seed, 1, 0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i)
    for (float k : kinks) {
      float& v = t.data<float>()[i];
      if (std::fabs(v - k) < gap) v = k + (v >= k ? gap : -gap) * 2;
    }
  return t;
}

TEST(OnnxOpsGrad, Elementwise) {
  struct Case { Op op; ir::Attrs attrs; std::vector<float> kinks; bool positive; const char* label; };
  const std::vector<Case> cases = {
      {Op::Erf, {}, {}, false, "erf"},
      {Op::Abs, {}, {0.0f}, false, "abs"},
      {Op::LeakyRelu, {{"alpha", 0.2}}, {0.0f}, false, "leaky_relu"},
      {Op::Clip, {{"min", -0.5}, {"max", 0.7}}, {-0.5f, 0.7f}, false, "clip"},
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    Value x = b.param("x", f32_type({3, 5}), unit());
    Bindings values{{"x", away_from({3, 5}, 11, c.kinks, 0.15f)}};
    expect_grad(c.label, gradcheck(b, b.op(c.op, {x}, c.attrs), values));
  }
  ModelBuilder b;  // pow with a broadcast exponent; positive base for d/d exponent
  Value base = b.param("base", f32_type({2, 3}), unit());
  Value e = b.param("e", f32_type({3}), unit());
  expect_grad("pow", gradcheck(b, b.op(Op::Pow, {base, e}), {}, true));
}

TEST(OnnxOpsGrad, GatherAndTrilu) {
  for (int64_t axis : {0, 1, -1}) {
    ModelBuilder b;
    Value x = b.param("x", f32_type({4, 3, 5}), unit());
    Value idx = b.constant("idx", Tensor::from_i64({2, 2}, {0, -1, 2, 0}));  // repeated and negative indices
    expect_grad("gather axis " + std::to_string(axis), gradcheck(b, b.op(Op::Gather, {x, idx}, {{"axis", axis}})));
  }
  for (int64_t upper : {0, 1}) {
    ModelBuilder b;
    Value x = b.param("x", f32_type({2, 3, 4}), unit());
    expect_grad("trilu upper=" + std::to_string(upper),
                gradcheck(b, b.op(Op::Trilu, {x}, {{"upper", upper}, {"k", int64_t{-1}}})));
  }
}

TEST(OnnxOpsGrad, Conv2d) {
  struct Case { Shape x, w; ir::Attrs attrs; bool bias; const char* label; };
  const std::vector<Case> cases = {
      {{1, 2, 5, 5}, {3, 2, 3, 3}, {}, true, "conv2d 3x3"},
      {{2, 2, 7, 6}, {2, 2, 3, 2}, {{"strides", std::vector<int64_t>{2, 1}}, {"pads", std::vector<int64_t>{1, 0, 2, 1}}}, true,
       "conv2d strides pads"},
      {{1, 4, 6, 6}, {4, 2, 2, 2}, {{"dilations", std::vector<int64_t>{2, 1}}, {"groups", int64_t{2}}}, false,
       "conv2d dilations groups"},
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    Value x = b.param("x", f32_type(c.x), unit());
    Value w = b.param("w", f32_type(c.w), unit());
    std::vector<Value> ins = {x, w};
    if (c.bias) ins.push_back(b.param("b", f32_type({c.w[0]}), unit()));
    expect_grad(c.label, gradcheck(b, b.op(Op::Conv2d, ins, c.attrs)));
  }
}

TEST(OnnxOpsGrad, Pools) {
  const ir::Attrs k2{{"kernel", std::vector<int64_t>{2, 2}}};
  const ir::Attrs k3{{"kernel", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                     {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  ir::Attrs k3_ceil = k3, k3_incl = k3;
  k3_ceil.set("ceil_mode", int64_t{1});
  k3_incl.set("count_include_pad", int64_t{1});
  for (const auto& [attrs, label] : std::vector<std::pair<ir::Attrs, std::string>>{
           {k2, "2x2"}, {k3, "3x3 s2 p1"}, {k3_ceil, "3x3 s2 p1 ceil"}, {k3_incl, "3x3 s2 p1 incl-pad"}}) {
    for (Op op : {Op::MaxPool, Op::AvgPool}) {
      if (op == Op::MaxPool && attrs.has("count_include_pad")) continue;
      ModelBuilder b;
      Value x = b.param("x", f32_type({1, 2, 6, 5}), unit());
      // Distinct values 0.1 apart: a finite-difference step never changes which element is the max.
      Tensor v = Tensor::zeros(DType::f32, {1, 2, 6, 5});
      for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = static_cast<float>((i * 37) % 60) * 0.1f - 3.0f;
      expect_grad(std::string(ir::op_name(op)) + " " + label, gradcheck(b, b.op(op, {x}, attrs), {{"x", v}}));
    }
  }
  ModelBuilder b;  // 1-D pooling
  Value x = b.param("x", f32_type({2, 1, 7}), unit());
  expect_grad("avg_pool 1-D", gradcheck(b, b.op(Op::AvgPool, {x}, {{"kernel", std::vector<int64_t>{3}}})));
}

// Runs one node on the reference kernels through the Runtime.
Result<Tensor> run1(Op op, std::vector<Tensor> ins, ir::Attrs attrs) {
  ModelBuilder b;
  std::vector<Value> vs;
  for (size_t i = 0; i < ins.size(); ++i) vs.push_back(b.constant("c" + std::to_string(i), ins[i]));
  b.output(b.op(op, vs, std::move(attrs)));
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, b.build());
  Runtime rt(make_cpu_backend());
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(g));
  VOLTA_ASSIGN_OR_RETURN(auto outs, rt.run(*plan, {}));
  return outs[0];
}

TEST(OnnxOps, CastSaturatesAndTruncates) {
  auto r = run1(Op::Cast, {Tensor::from_f32({5}, {1.9f, -1.9f, NAN, 1e20f, -1e20f})}, {{"to", std::string("i32")}});
  ASSERT_OK(r);
  const int32_t* v = r->data<int32_t>();
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], INT32_MAX);
  EXPECT_EQ(v[4], INT32_MIN);
  EXPECT_ERROR_CONTAINS(run1(Op::Cast, {Tensor::from_f32({1}, {1})}, {{"to", std::string("f64")}}), "attribute 'to' must be a dtype");
}

TEST(OnnxOps, GatherRejectsOutOfRangeIndicesAtRunTime) {
  auto r = run1(Op::Gather, {Tensor::from_f32({3}, {1, 2, 3}), Tensor::from_i64({1}, {3})}, {});
  EXPECT_ERROR_CONTAINS(r, "index 3 at flat position 0 is outside [-3, 3)");
}

TEST(OnnxOps, WindowRulesRejectBadGeometry) {
  ModelBuilder b;
  Value x = b.input("x", f32_type({1, 1, 4, 4}));
  b.op(Op::MaxPool, {x}, {{"kernel", std::vector<int64_t>{5, 5}}});
  EXPECT_ERROR_CONTAINS(b.build(), "does not fit input");
  ModelBuilder b2;
  Value x2 = b2.input("x", f32_type({1, 1, 4, 4}));
  b2.op(Op::AvgPool, {x2}, {{"kernel", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{2, 0, 0, 0}}});
  EXPECT_ERROR_CONTAINS(b2.build(), "must be smaller than the window");
  ModelBuilder b3;
  Value x3 = b3.input("x", f32_type({1, 3, 4, 4}));
  Value w3 = b3.input("w", f32_type({2, 2, 3, 3}));
  b3.op(Op::Conv2d, {x3, w3});
  EXPECT_ERROR_CONTAINS(b3.build(), "channels do not fit groups=1");
}

// A window's taps inside x are found by arithmetic: a kernel of 2^20 padded around one element
// holds one tap per window (walking every tap took 2^40 steps). Dilated, padded and ceil-mode
// windows keep their values and divisors.
TEST(OnnxOps, PoolWindowsHoldOnlyTheirTaps) {
  const int64_t k = int64_t{1} << 20;
  for (Op op : {Op::MaxPool, Op::AvgPool})
    for (int64_t include : {0, 1}) {
      if (op == Op::MaxPool && include) continue;
      ir::Attrs attrs{{"kernel", std::vector<int64_t>{k}}, {"pads", std::vector<int64_t>{k - 1, k - 1}}};
      if (include) attrs.set("count_include_pad", int64_t{1});
      auto r = run1(op, {Tensor::from_f32({1, 1, 1}, {2.5f})}, attrs);
      ASSERT_OK(r);
      ASSERT_EQ(r->shape(), (Shape{1, 1, k}));
      const float want = include ? 2.5f / static_cast<float>(k) : 2.5f;  // every tap lies inside the padded extent
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(r->data<float>()[i], want) << ir::op_name(op) << " window " << i;
    }
  const Tensor x = Tensor::from_f32({1, 1, 5}, {1, 2, 3, 4, 5});
  // Taps o - 1 and o + 1 of windows o = 0..4; -1 and 5 are padding.
  auto mx = run1(Op::MaxPool, {x}, {{"kernel", std::vector<int64_t>{2}}, {"dilations", std::vector<int64_t>{2}},
                                    {"pads", std::vector<int64_t>{1, 1}}});
  ASSERT_OK(mx);
  EXPECT_EQ(std::vector<float>(mx->data<float>(), mx->data<float>() + 5), (std::vector<float>{2, 3, 4, 5, 4}));
  // Windows [-2, 1], [0, 3] and, with ceil_mode, [2, 5]: x ends at 4, the padding at -2 (none
  // at the end), so the last window's fourth tap counts in neither divisor.
  for (int64_t include : {0, 1}) {
    auto av = run1(Op::AvgPool, {x}, {{"kernel", std::vector<int64_t>{4}}, {"strides", std::vector<int64_t>{2}},
                                      {"pads", std::vector<int64_t>{2, 0}}, {"ceil_mode", int64_t{1}},
                                      {"count_include_pad", include}});
    ASSERT_OK(av);
    const std::vector<float> want = include ? std::vector<float>{3.0f / 4, 10.0f / 4, 12.0f / 3}
                                            : std::vector<float>{3.0f / 2, 10.0f / 4, 12.0f / 3};
    EXPECT_EQ(std::vector<float>(av->data<float>(), av->data<float>() + av->numel()), want) << "count_include_pad " << include;
  }
}

}  // namespace
}  // namespace volta
