// attention with an additive mask (the form ONNX import writes for the exported scaled
// dot-product attention): the bits of the chain it stands for, on every matmul ISA at 1 and 2
// threads, and the refusals of the forms it does not combine with.
#include <cmath>
#include <limits>

#include "backends/cpu/matmul.h"
#include "test_util.h"
#include "volta/autograd.h"
#include "volta/builder.h"
#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta {
namespace {

// A mask with finite biases, masked keys and, in its first row, every key masked.
Tensor mask_values(const Shape& s) {
  Tensor m = Tensor::zeros(DType::f32, s);
  const int64_t S = s.back();
  for (int64_t i = 0; i < m.numel(); ++i)
    m.data<float>()[i] = i < S || i % 5 == 2 ? -std::numeric_limits<float>::infinity() : i % 3 == 0 ? -1.25f : 0.0f;
  return m;
}

struct MaskCase {
  Shape q, k, v, mask;
  float scale;
  bool zero_nan;
};

// attention(q, k, v, mask) or the chain matmul(q, kᵀ) * scale + mask -> softmax (-> nan to 0) -> @ v.
ir::Graph masked_attention(const MaskCase& c, bool fused) {
  ModelBuilder b("masked");
  Value q = b.input("q", {DType::f32, c.q}), k = b.input("k", {DType::f32, c.k}), v = b.input("v", {DType::f32, c.v});
  Value m = b.input("mask", {DType::f32, c.mask});
  if (fused) {
    ir::Attrs at{{"scale", static_cast<double>(c.scale)}};
    if (c.zero_nan) at.set("zero_nan_probs", int64_t{1});
    b.output(b.op(ir::Op::Attention, {q, k, v, m}, at, "y"));
  } else {
    Value p = b.softmax(b.add(b.mul(b.matmul(q, k, "scores", false, true), b.scalar(c.scale)), m), -1);
    if (c.zero_nan) p = b.where(b.sub(b.scalar(1.0f), b.op(ir::Op::Equal, {p, p})), b.scalar(0.0f), p);
    b.output(b.matmul(p, v, "y"));
  }
  auto g = b.build();
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : ir::Graph{};
}

TEST(AttentionMask, HasTheBitsOfTheChainItStandsFor) {
  const std::vector<MaskCase> cases = {
      {{2, 3, 12, 16}, {2, 3, 20, 16}, {2, 3, 20, 8}, {2, 1, 12, 20}, 0.25f, true},  // many rows: GEMM path
      {{2, 3, 12, 16}, {2, 3, 20, 16}, {2, 3, 20, 8}, {2, 1, 12, 20}, 0.3f, false},  // fully masked row: nan
      {{1, 4, 3, 24}, {1, 4, 33, 24}, {1, 4, 33, 5}, {1, 1, 1, 33}, 0.17f, true},    // few rows: row path
      {{3, 9, 8}, {3, 9, 8}, {3, 9, 8}, {9, 9}, 1.0f, true},
  };
  for (const MaskCase& c : cases) {
    Bindings in;
    for (const auto& [name, s] : std::vector<std::pair<std::string, Shape>>{{"q", c.q}, {"k", c.k}, {"v", c.v}}) {
      Tensor t = Tensor::zeros(DType::f32, s);
      fill_normal(t, 11, name[0], 0.0f, 1.5f);
      in[name] = t;
    }
    in["mask"] = mask_values(c.mask);
    Tensor first;
    test::for_each_cpu_config([&](cpu::MatmulIsa isa, int threads) {
      for (bool fused : {true, false}) {
        Runtime rt(make_cpu_backend());
        auto plan = rt.compile(masked_attention(c, fused));
        ASSERT_OK(plan);
        auto out = rt.run(**plan, in);
        ASSERT_OK(out);
        if (!first.defined()) first = (*out)[0];
        EXPECT_TRUE(first.bitwise_equal((*out)[0]))
            << c.q.size() << "-d q, isa " << cpu::matmul_isa_name(isa) << " fused " << fused << " threads " << threads;
      }
    });
    ASSERT_TRUE(first.defined());
    // The fully masked first row: zeros with the guard, nan without.
    const float y0 = first.data<float>()[0];
    EXPECT_TRUE(c.zero_nan ? y0 == 0.0f : std::isnan(y0)) << y0;
  }
}

TEST(AttentionMask, ShapesAndFormsItDoesNotTakeAreErrors) {
  auto build = [](Shape mask, ir::Attrs at) {
    ModelBuilder b("bad");
    Value q = b.input("q", {DType::f32, {2, 3, 4, 8}}), k = b.input("k", {DType::f32, {2, 3, 6, 8}});
    Value v = b.input("v", {DType::f32, {2, 3, 6, 8}}), m = b.input("mask", {DType::f32, std::move(mask)});
    b.output(b.op(ir::Op::Attention, {q, k, v, m}, std::move(at)));
    return b.build();
  };
  EXPECT_TRUE(build({2, 1, 4, 6}, {}).is_ok());
  EXPECT_TRUE(build({6}, {}).is_ok());
  EXPECT_ERROR_CONTAINS(build({2, 1, 4, 5}, {}), "does not broadcast to the scores f32[2,3,4,6]");
  EXPECT_ERROR_CONTAINS(build({2, 2, 4, 6}, {}), "does not broadcast");
  EXPECT_ERROR_CONTAINS(build({1, 2, 1, 4, 6}, {}), "does not broadcast");
  EXPECT_ERROR_CONTAINS(build({2, 1, 4, 6}, {{"prefix", int64_t{3}}}), "prefix and a mask input");
  EXPECT_ERROR_CONTAINS(build({2, 1, 4, 6}, {{"zero_nan_probs", int64_t{2}}}), "zero_nan_probs must be 0 or 1");
  // No gradient rule: autograd names the node and why.
  ModelBuilder b("grad");
  Value q = b.param("q", {DType::f32, {1, 2, 4, 8}}, ParamInit::normal(1.0));
  Value k = b.input("k", {DType::f32, {1, 2, 4, 8}}), v = b.input("v", {DType::f32, {1, 2, 4, 8}});
  Value y = b.op(ir::Op::Attention, {q, k, v, b.input("mask", {DType::f32, {4, 4}})}, {}, "att");
  b.output(b.reduce_sum(y, {0, 1, 2, 3}, false));
  auto g = b.build();
  ASSERT_OK(g);
  EXPECT_ERROR_CONTAINS(autograd::build_backward(*g), "additive mask");
}

}  // namespace
}  // namespace volta
