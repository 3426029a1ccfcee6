#include <cmath>
#include <cstdio>

#include "gradcheck.h"
#include "test_util.h"
#include "volta/autograd.h"
#include "volta/passes.h"
#include "volta/rng.h"
#include "volta/text.h"
#include "volta/verify.h"

namespace volta {
namespace {

using test::gradcheck;
using test::GradCheckResult;

constexpr double kMaxRel = 3e-2;  // |autograd - fd| / max(|fd|, 1e-2), f32 losses with h = 1e-2

TensorType f32(Shape s) { return {DType::f32, std::move(s)}; }
ParamInit unit() { return ParamInit::normal(1.0); }

// Checks and prints one line of the gradient-check table.
void expect_grad(const std::string& what, const Result<GradCheckResult>& r) {
  ASSERT_TRUE(r.is_ok()) << what << ": " << r.status().message();
  std::printf("gradcheck %-36s max_abs %.2e  max_rel %.2e  (%lld elements)\n", what.c_str(), r->max_abs, r->max_rel,
              static_cast<long long>(r->checked));
  EXPECT_GT(r->checked, 0) << what;
  EXPECT_LT(r->max_rel, kMaxRel) << what << " max_abs " << r->max_abs;
}

// Self-attention (q, k, v of one shape): the rule emits the fused attention_grad. The gradients
// of every op are checked against finite differences by the op-test harness (tests/ops/).
TEST(Autograd, SelfAttentionEmitsOneFusedAttentionGrad) {
  for (int variant = 0; variant < 3; ++variant) {
    const Shape s = variant == 2 ? Shape{2, 18, 4} : Shape{2, 2, 5, 3};
    ir::Attrs attrs{{"scale", 0.6}};
    if (variant != 1) attrs.set("causal_offset", int64_t{variant == 2 ? 0 : 1});
    ModelBuilder c;
    Value cy = c.op(ir::Op::Attention, {c.param("q", f32(s)), c.param("k", f32(s)), c.param("v", f32(s))}, attrs);
    c.output(c.mse(cy, c.input("target", f32(s))));
    auto g = c.build();
    ASSERT_OK(g);
    auto gg = autograd::build_backward(*g);
    ASSERT_OK(gg);
    EXPECT_EQ(gg->graph.nodes_of(ir::Op::AttentionGrad).size(), 1u) << variant;
  }
}

// The bundled transformer block with a next-token loss: every parameter's gradient.
TEST(GradCheck, TransformerBlock) {
  auto fwd = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(fwd);
  ModelBuilder b(*fwd);
  Value targets = b.input("targets", {DType::i32, {2, 16}});
  Value logits{fwd->outputs[0]};
  b.output(b.cross_entropy(logits, targets, "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  g->outputs = {g->outputs.back()};
  auto values = init_params(*g, 3);
  ASSERT_OK(values);
  // Weight matrices 10x the 0.02 init so every path carries signal (norm gains stay 1).
  for (auto& [name, t] : *values)
    if (t.shape().size() == 2)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = t.data<float>()[i] * 10.0f;
  auto in = random_inputs(*g, 3);
  ASSERT_OK(in);
  values->merge(*in);
  expect_grad("gpt block (every param, 24 elements each)", test::gradcheck_graph(*g, *values, 24));
}

// Slices that cut an axis into consecutive pieces (in any order of use) give their gradients
// back as one concat; a gap, an overlap or another reader of the sliced value keeps the zero
// pads and their sum. Both are checked against finite differences.
TEST(Autograd, SlicesCuttingAnAxisGiveOneConcat) {
  struct Case {
    std::vector<std::pair<int64_t, int64_t>> pieces;  // [start, end) along axis 1, in order of use
    bool direct_use;                                   // x also read whole
    bool concat;
  };
  const Case cases[] = {{{{3, 6}, {0, 2}, {2, 3}}, false, true},
                        {{{0, 6}}, false, false},  // one slice of everything: a pad of nothing
                        {{{0, 2}, {3, 6}}, false, false},
                        {{{0, 3}, {2, 6}}, false, false},
                        {{{0, 2}, {2, 6}}, true, false}};
  for (const Case& c : cases) {
    auto model = [&](ModelBuilder& b) {
      Value x = b.param("x", f32({2, 6, 4}), unit());
      Value y;
      for (const auto& [start, end] : c.pieces) {
        Value part = b.reduce_sum(b.tanh(b.slice(x, 1, start, end)), {1});  // [2, 4]
        y = y.valid() ? b.add(b.mul(y, part), part) : part;
      }
      return c.direct_use ? b.add(y, b.reduce_sum(b.exp(x), {1})) : y;
    };
    const std::string what = "slices " + std::to_string(c.pieces.size()) + (c.concat ? " (concat)" : " (pads)");
    ModelBuilder b;
    b.output(b.reduce_sum(model(b), {0, 1}));
    auto g = b.build();
    ASSERT_OK(g);
    auto gg = autograd::build_backward(*g);
    ASSERT_OK(gg);
    EXPECT_EQ(gg->graph.nodes_of(ir::Op::Concat).size(), c.concat ? 1u : 0u) << what;
    EXPECT_EQ(gg->graph.nodes_of(ir::Op::Pad).empty(), c.concat) << what;
    ModelBuilder check;
    const Value y = model(check);
    expect_grad(what, gradcheck(check, y, {}));
  }
}

TEST(Autograd, ForwardGraphIsNeverMutated) {
  auto fwd = ir::load_graph(test::source_path("examples/mlp.vir"));
  ASSERT_OK(fwd);
  fwd->outputs = {fwd->find("loss")};
  const uint64_t before = passes::graph_hash(*fwd);
  const std::string printed = ir::print_graph(*fwd);
  auto gg = autograd::build_backward(*fwd);
  ASSERT_OK(gg);
  EXPECT_EQ(passes::graph_hash(*fwd), before);
  EXPECT_EQ(ir::print_graph(*fwd), printed);
  ASSERT_OK(ir::verify_graph(gg->graph));
  EXPECT_EQ(gg->params, (std::vector<std::string>{"w1", "b1", "w2", "b2"}));
  ASSERT_EQ(gg->graph.outputs.size(), 5u);
  for (size_t i = 0; i < gg->params.size(); ++i) {
    const ir::Node& grad = gg->graph.node(gg->graph.outputs[i + 1]);
    EXPECT_EQ(grad.name, "grad." + gg->params[i]);
    EXPECT_EQ(grad.type, gg->graph.node(gg->graph.find(gg->params[i])).type);
  }
}

TEST(Autograd, NonTrainableParamsGetNoGradient) {
  ModelBuilder b;
  Value x = b.input("x", f32({2, 3}));
  ParamInit frozen = ParamInit::normal(1.0);
  frozen.trainable = false;
  Value w = b.param("w", f32({3, 3}), frozen);
  Value v = b.param("v", f32({3, 3}), unit());
  Value unused = b.param("unused", f32({2}), unit());
  (void)unused;
  b.output(b.mse(b.matmul(b.matmul(x, w), v), b.matmul(x, w), "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  auto gg = autograd::build_backward(*g);
  ASSERT_OK(gg);
  EXPECT_EQ(gg->params, (std::vector<std::string>{"v", "unused"}));
  EXPECT_EQ(gg->graph.find("grad.w"), -1);
  // A param the loss does not depend on gets an explicit zero gradient.
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(gg->graph);
  ASSERT_OK(plan);
  auto values = init_params(*g, 1);
  auto in = random_inputs(*g, 1);
  values->merge(*in);
  auto out = rt.run(**plan, *values);
  ASSERT_OK(out);
  EXPECT_EQ((*out)[2].data<float>()[0], 0.0f);
  EXPECT_EQ((*out)[2].data<float>()[1], 0.0f);
}

TEST(Autograd, LossMustBeAScalar) {
  auto fwd = ir::load_graph(test::source_path("examples/mlp.vir"));
  ASSERT_OK(fwd);
  EXPECT_ERROR_CONTAINS(autograd::build_backward(*fwd), "the loss must be a scalar f32[] but 'logits' is f32[8,3]");
  EXPECT_ERROR_CONTAINS(autograd::build_backward(*fwd, "nope"), "loss 'nope' is not a value");
}

TEST(Autograd, AttentionAndSoftmaxWithARunTimePositionAreAClearError) {
  ModelBuilder b;
  Value q = b.param("q", f32({1, 1, 4}), unit());
  Value kc = b.param("kc", f32({1, 5, 4}), unit());
  Value at = b.input("n", {DType::i32, {1}});
  Value y = b.op(ir::Op::Attention, {q, kc, kc, at}, {}, "att");
  b.output(b.reduce_sum(y, {0, 1, 2}, false, "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  EXPECT_ERROR_CONTAINS(autograd::build_backward(*g), "[attention] has no gradient: its keys' length is a run-time input");
  ModelBuilder s;
  Value x = s.param("x", f32({1, 2, 5}), unit());
  Value p = s.op(ir::Op::Softmax, {x, s.input("n", {DType::i32, {1}})}, {{"causal_offset", int64_t{0}}}, "probs");
  s.output(s.reduce_sum(p, {0, 1, 2}, false, "loss"));
  auto sg = s.build();
  ASSERT_OK(sg);
  EXPECT_ERROR_CONTAINS(autograd::build_backward(*sg), "[softmax] has no gradient: its causal offset is a run-time input");
}

TEST(Autograd, SecondOrderIsAClearError) {
  ModelBuilder b;
  Value x = b.param("x", f32({3}), unit());
  Value dy = b.param("dy", f32({3}), unit());
  Value r = b.op(ir::Op::ReluGrad, {x, dy}, {}, "rg");
  b.output(b.reduce_sum(r, {0}, false, "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  EXPECT_ERROR_CONTAINS(autograd::build_backward(*g), "[relu_grad] has no gradient: second-order gradients are not supported (node 'rg')");
}

}  // namespace
}  // namespace volta
