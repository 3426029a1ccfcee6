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

TEST(GradCheck, Matmul) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      ModelBuilder b;
      Value a = b.param("a", f32(ta ? Shape{4, 3} : Shape{3, 4}), unit());
      Value w = b.param("w", f32(tb ? Shape{5, 4} : Shape{4, 5}), unit());
      expect_grad("matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb),
                  gradcheck(b, b.matmul(a, w, "y", ta, tb)));
    }
  ModelBuilder b;  // batched, with a shared 2-D right operand and a broadcast batch dim
  Value a = b.param("a", f32({2, 1, 3, 4}), unit());
  Value w = b.param("w", f32({3, 4, 2}), unit());
  expect_grad("matmul batched broadcast", gradcheck(b, b.matmul(a, w)));
  ModelBuilder b2;
  Value a2 = b2.param("a", f32({2, 3, 4}), unit());
  Value w2 = b2.param("w", f32({4, 5}), unit());
  expect_grad("matmul batched @ 2-D", gradcheck(b2, b2.matmul(a2, w2)));
  ModelBuilder b3;  // batched @ transposed 2-D: the weight gradient folds the batch into K
  Value a3 = b3.param("a", f32({2, 3, 4}), unit());
  Value w3 = b3.param("w", f32({5, 4}), unit());
  expect_grad("matmul batched @ 2-D^T", gradcheck(b3, b3.matmul(a3, w3, "y", false, true)));
}

TEST(GradCheck, BinaryWithBroadcasting) {
  for (ir::Op op : {ir::Op::Add, ir::Op::Sub, ir::Op::Mul, ir::Op::Div}) {
    for (auto shapes : std::vector<std::pair<Shape, Shape>>{{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1, 3}, {4, 1}}, {{3}, {}}}) {
      ModelBuilder b;
      Value x = b.param("x", f32(shapes.first), unit());
      Value y = b.param("y", f32(shapes.second), unit());
      std::string what = std::string(ir::op_name(op)) + " " + shape_to_string(shapes.first) + " " + shape_to_string(shapes.second);
      expect_grad(what, gradcheck(b, b.op(op, {x, y}), {}, op == ir::Op::Div));
    }
  }
}

TEST(GradCheck, Unary) {
  struct Case { ir::Op op; bool positive; ir::Attrs attrs; const char* label; };
  const std::vector<Case> cases = {
      {ir::Op::Neg, false, {}, "neg"},          {ir::Op::Exp, false, {}, "exp"},
      {ir::Op::Log, true, {}, "log"},           {ir::Op::Sqrt, true, {}, "sqrt"},
      {ir::Op::Tanh, false, {}, "tanh"},        {ir::Op::Relu, false, {}, "relu"},
      {ir::Op::Gelu, false, {}, "gelu"},        {ir::Op::Gelu, false, {{"approximate", std::string("tanh")}}, "gelu tanh"},
      {ir::Op::Silu, false, {}, "silu"},        {ir::Op::Sigmoid, false, {}, "sigmoid"},
  };
  for (const Case& c : cases) {
    ModelBuilder b;
    Value x = b.param("x", f32({3, 5}), unit());
    Bindings values;
    if (c.op == ir::Op::Relu) {  // keep every input away from the kink at 0
      Tensor t = Tensor::from_f32({3, 5}, {-1.5f, 0.7f, 1.2f, -0.3f, 2.0f, 0.4f, -0.8f, 1.0f, -2.0f, 0.25f, 0.9f, -0.6f,
                                             1.7f, -1.1f, 0.5f});
      values.emplace("x", t);
    }
    expect_grad(c.label, gradcheck(b, b.op(c.op, {x}, c.attrs), values, c.positive));
  }
}

TEST(GradCheck, SoftmaxAndLogSoftmaxEachAxis) {
  for (int64_t axis : {0, 1, -1}) {
    ModelBuilder b;
    Value x = b.param("x", f32({3, 4}), unit());
    expect_grad("softmax axis " + std::to_string(axis), gradcheck(b, b.softmax(x, axis)));
    ModelBuilder b2;
    Value x2 = b2.param("x", f32({3, 4}), unit());
    expect_grad("log_softmax axis " + std::to_string(axis), gradcheck(b2, b2.log_softmax(x2, axis)));
  }
}

// softmax with the scale and causal mask of the fused attention form; its rule emits softmax_grad.
TEST(GradCheck, FusedAttentionSoftmax) {
  for (int64_t offset : {0, 2}) {
    ModelBuilder b;
    Value x = b.param("x", f32({2, 5, 6}), unit());
    Value y = b.op(ir::Op::Softmax, {x}, {{"axis", int64_t{-1}}, {"scale", 0.35}, {"causal_offset", offset}});
    expect_grad("softmax scale 0.35 causal offset " + std::to_string(offset), gradcheck(b, y));
  }
}

// matmul with its fused epilogue: bias, relu / gelu (the rule recomputes the pre-activation).
TEST(GradCheck, MatmulEpilogue) {
  for (const char* act : {"none", "relu", "gelu"}) {
    for (bool bias : {false, true}) {
      ModelBuilder b;
      std::vector<Value> in = {b.param("a", f32({2, 3, 4}), unit()), b.param("w", f32({4, 5}), unit())};
      if (bias) in.push_back(b.param("bias", f32({5}), unit()));
      Value y = b.op(ir::Op::Matmul, in, {{"activation", std::string(act)}});
      Bindings values;
      if (std::string(act) == "relu") {  // keep the pre-activation away from relu's kink
        Tensor a = Tensor::zeros(DType::f32, {2, 3, 4});
        fill_normal(a, 5, 0, 0.0f, 1.0f);
        values["a"] = a;
      }
      expect_grad(std::string("matmul ") + (bias ? "bias " : "") + act, gradcheck(b, y, values));
    }
  }
}

// attention with one or two key/value blocks: its rule recomputes the probabilities.
TEST(GradCheck, Attention) {
  for (int variant = 0; variant < 3; ++variant) {  // one block, two blocks, two blocks with a prefix
    const bool split = variant > 0;
    ModelBuilder b;
    std::vector<Value> in = {b.param("q", f32({2, 4, 3}), unit()), b.param("k", f32({2, 3, 3}), unit()), b.param("v", f32({2, 3, 5}), unit())};
    if (split) in.push_back(b.param("k2", f32({2, 2, 3}), unit())), in.push_back(b.param("v2", f32({2, 2, 5}), unit()));
    ir::Attrs attrs{{"scale", 0.6}, {"causal_offset", int64_t{1}}};
    if (variant == 2) attrs.set("prefix", int64_t{2});
    Value y = b.op(ir::Op::Attention, in, attrs);
    expect_grad(variant == 0 ? "attention causal" : variant == 1 ? "attention two blocks causal" : "attention prefix of k, v", gradcheck(b, y));
  }
  // Self-attention (q, k, v of one shape): the rule emits the fused attention_grad.
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder b;
    const Shape s = variant == 2 ? Shape{2, 18, 4} : Shape{2, 2, 5, 3};  // 18 rows: several causal blocks
    std::vector<Value> in = {b.param("q", f32(s), unit()), b.param("k", f32(s), unit()), b.param("v", f32(s), unit())};
    ir::Attrs attrs{{"scale", 0.6}};
    if (variant != 1) attrs.set("causal_offset", int64_t{variant == 2 ? 0 : 1});
    Value y = b.op(ir::Op::Attention, in, attrs);
    ModelBuilder c;  // the same attention under a loss, to look at the backward graph
    Value cy = c.op(ir::Op::Attention, {c.param("q", f32(s)), c.param("k", f32(s)), c.param("v", f32(s))}, attrs);
    c.output(c.mse(cy, c.input("target", f32(s))));
    auto g = c.build();
    ASSERT_OK(g);
    auto gg = autograd::build_backward(*g);
    ASSERT_OK(gg);
    EXPECT_EQ(gg->graph.nodes_of(ir::Op::AttentionGrad).size(), 1u);
    expect_grad(variant == 0 ? "self-attention causal" : variant == 1 ? "self-attention" : "self-attention causal, 18 rows",
                gradcheck(b, y));
  }
}

TEST(GradCheck, Norms) {
  ModelBuilder b;
  Value x = b.param("x", f32({2, 3, 6}), unit());
  Value g = b.param("g", f32({6}), unit());
  Value beta = b.param("beta", f32({6}), unit());
  expect_grad("layer_norm (x, gamma, beta)", gradcheck(b, b.layer_norm(x, g, beta)));
  ModelBuilder b2;
  Value x2 = b2.param("x", f32({4, 5}), unit());
  Value g2 = b2.param("g", f32({5}), unit());
  expect_grad("layer_norm (x, gamma)", gradcheck(b2, b2.layer_norm(x2, g2)));
  ModelBuilder b3;
  Value x3 = b3.param("x", f32({4, 5}), unit());
  Value g3 = b3.param("g", f32({5}), unit());
  expect_grad("rms_norm", gradcheck(b3, b3.rms_norm(x3, g3)));
}

TEST(GradCheck, EmbeddingSumsRepeatedIds) {
  ModelBuilder b;
  Value table = b.param("table", f32({5, 3}), unit());
  Value ids = b.input("ids", {DType::i32, {2, 3}});
  Bindings values{{"ids", Tensor::from_i32({2, 3}, {0, 4, 4, 2, 0, 4})}};
  expect_grad("embedding", gradcheck(b, b.embedding(table, ids), values));
}

TEST(GradCheck, LayoutOps) {
  {
    ModelBuilder b;
    Value x = b.param("x", f32({2, 3, 4}), unit());
    expect_grad("reshape", gradcheck(b, b.reshape(x, {4, -1})));
  }
  {
    ModelBuilder b;
    Value x = b.param("x", f32({2, 3, 4}), unit());
    expect_grad("transpose", gradcheck(b, b.transpose(x, {1, 2, 0})));
  }
  for (int64_t axis : {0, 1, 2}) {
    ModelBuilder b;
    Value x = b.param("x", f32({3, 4, 5}), unit());
    expect_grad("slice axis " + std::to_string(axis), gradcheck(b, b.slice(x, axis, 1, -1)));
  }
  for (int64_t axis : {0, 1}) {
    ModelBuilder b;
    Value x = b.param("x", f32({2, 3}), unit());
    Value y = b.param("y", f32({2, 3}), unit());
    expect_grad("concat axis " + std::to_string(axis), gradcheck(b, b.concat({x, y, x}, axis)));
  }
  {
    ModelBuilder b;
    Value x = b.param("x", f32({3, 1}), unit());
    expect_grad("broadcast", gradcheck(b, b.op(ir::Op::Broadcast, {x}, {{"shape", Shape{2, 3, 4}}})));
  }
  {
    ModelBuilder b;
    Value x = b.param("x", f32({2, 3}), unit());
    expect_grad("pad", gradcheck(b, b.op(ir::Op::Pad, {x}, {{"axis", int64_t{1}}, {"before", int64_t{2}}, {"after", int64_t{1}}})));
  }
}

TEST(GradCheck, ReductionsOverEachAxis) {
  for (ir::Op op : {ir::Op::ReduceSum, ir::Op::ReduceMean, ir::Op::ReduceMax})
    for (auto axes : std::vector<std::vector<int64_t>>{{0}, {1}, {2}, {0, 2}, {-1}})
      for (int64_t keep : {0, 1}) {
        ModelBuilder b;
        Value x = b.param("x", f32({2, 3, 4}), unit());
        std::string what = std::string(ir::op_name(op)) + " axes " + shape_to_string(axes) + " keep " + std::to_string(keep);
        expect_grad(what, gradcheck(b, b.op(op, {x}, {{"axes", axes}, {"keepdims", keep}})));
      }
}

TEST(GradCheck, WhereAndCausalMask) {
  ModelBuilder b;
  Value c = b.input("c", {DType::i32, {2, 3}});
  Value x = b.param("x", f32({2, 3}), unit());
  Value y = b.param("y", f32({3}), unit());
  expect_grad("where", gradcheck(b, b.where(c, x, y), {{"c", Tensor::from_i32({2, 3}, {1, 0, 1, 0, 0, 1})}}));
  ModelBuilder b2;
  Value s = b2.param("s", f32({2, 4, 4}), unit());
  // softmax after the mask, as in attention, so -inf never reaches the loss
  expect_grad("causal_mask + softmax", gradcheck(b2, b2.softmax(b2.causal_mask(s))));
  ModelBuilder b3;
  Value s3 = b3.param("s", f32({3, 4}), unit());
  expect_grad("causal_mask offset 1 value 0", gradcheck(b3, b3.op(ir::Op::CausalMask, {s3}, {{"offset", int64_t{1}}, {"value", 0.0}})));
}

TEST(GradCheck, Losses) {
  ModelBuilder b;
  Value logits = b.param("logits", f32({2, 3, 5}), unit());
  Value t = b.input("t", {DType::i32, {2, 3}});
  b.output(b.cross_entropy(logits, t, "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  Tensor l = Tensor::zeros(DType::f32, {2, 3, 5});
  fill_normal(l, 1, 2, 0.0f, 2.0f);
  expect_grad("cross_entropy", test::gradcheck_graph(*g, {{"t", Tensor::from_i32({2, 3}, {0, 4, 2, 2, 1, 3})}, {"logits", l}}));

  ModelBuilder bi;
  Value li = bi.param("logits", f32({4, 3}), unit());
  Value ti = bi.input("t", {DType::i64, {4}});
  bi.output(bi.cross_entropy(li, ti, -1, "loss"));
  auto gi = bi.build();
  ASSERT_OK(gi);
  Tensor l2 = Tensor::zeros(DType::f32, {4, 3});
  fill_normal(l2, 3, 4, 0.0f, 1.0f);
  expect_grad("cross_entropy ignore_index",
              test::gradcheck_graph(*gi, {{"t", Tensor::from_i64({4}, {2, -1, 0, -1})}, {"logits", l2}}));

  ModelBuilder bm;
  Value a = bm.param("a", f32({3, 4}), unit());
  Value c = bm.param("c", f32({3, 4}), unit());
  bm.output(bm.mse(a, c, "loss"));
  auto gm = bm.build();
  ASSERT_OK(gm);
  Tensor ta = Tensor::zeros(DType::f32, {3, 4}), tc = Tensor::zeros(DType::f32, {3, 4});
  fill_normal(ta, 5, 1, 0.0f, 1.0f);
  fill_normal(tc, 5, 2, 0.0f, 1.0f);
  expect_grad("mse", test::gradcheck_graph(*gm, {{"a", ta}, {"c", tc}}));
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
