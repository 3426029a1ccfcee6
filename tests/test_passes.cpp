#include <cmath>
#include <limits>
#include <optional>

#include "backends/cpu/matmul.h"
#include "model/tinylm.h"
#include "test_util.h"
#include "volta/autograd.h"
#include "volta/backend.h"
#include "volta/builder.h"
#include "volta/passes.h"
#include "volta/rng.h"
#include "volta/runtime.h"
#include "volta/text.h"
#include "volta/verify.h"

namespace volta {
namespace {

using test::parse_ir;

// Runs one pass, verifies its result and compares the printed IR with `expected`.
void expect_pass(Result<ir::Graph> (*pass)(const ir::Graph&), const std::string& before, const std::string& expected) {
  ir::Graph g = parse_ir(before);
  ASSERT_OK(ir::verify_graph(g));
  std::string printed_before = ir::print_graph(g);
  auto out = pass(g);
  ASSERT_OK(out);
  ASSERT_OK(ir::verify_graph(*out));
  EXPECT_EQ(ir::print_graph(*out), expected);
  EXPECT_EQ(ir::print_graph(g), printed_before) << "a pass must not change its input";
}

TEST(Passes, DeadCodeEliminationDropsUnusedButKeepsInputsAndParams) {
  expect_pass(passes::eliminate_dead_code, R"(graph g {
  %x: f32[4] = input()
  %unused_in: f32[2] = input()
  %w: f32[4] = param()
  %dead: f32[4] = exp(%x)
  %y: f32[4] = relu(%x)
  return %y
})",
              "graph g {\n"
              "  %x: f32[4] = input()\n"
              "  %unused_in: f32[2] = input()\n"
              "  %w: f32[4] = param()\n"
              "  %y: f32[4] = relu(%x)\n"
              "  return %y\n"
              "}\n");
}

TEST(Passes, CommonSubexpressionsMergeIntoTheFirst) {
  expect_pass(passes::eliminate_common_subexpressions, R"(graph g {
  %x: f32[4] = input()
  %a: f32[4] = exp(%x)
  %b: f32[4] = exp(%x)
  %c: f32[4] = add(%a, %x)
  %d: f32[4] = add(%b, %x)
  %s: f32[4] = softmax(%x) {axis=0}
  %t: f32[4] = softmax(%x) {axis=-1}
  %e: f32[4] = mul(%c, %d)
  %f: f32[4] = mul(%e, %s)
  %g: f32[4] = mul(%f, %t)
  return %g
})",
              "graph g {\n"
              "  %x: f32[4] = input()\n"
              "  %a: f32[4] = exp(%x)\n"
              "  %c: f32[4] = add(%a, %x)\n"
              "  %s: f32[4] = softmax(%x) {axis=0}\n"
              "  %t: f32[4] = softmax(%x) {axis=-1}\n"
              "  %e: f32[4] = mul(%c, %c)\n"
              "  %f: f32[4] = mul(%e, %s)\n"
              "  %g: f32[4] = mul(%f, %t)\n"
              "  return %g\n"
              "}\n");
}

TEST(Passes, CseNeverMergesInputsOrParamsButMergesEqualConstants) {
  expect_pass(passes::eliminate_common_subexpressions, R"(graph g {
  %x: f32[2] = input()
  %y: f32[2] = input()
  %w: f32[2] = param()
  %v: f32[2] = param()
  %c1: f32[2] = constant([1.0, 2.0])
  %c2: f32[2] = constant([1.0, 2.0])
  %c3: f32[2] = constant([1.0, 3.0])
  %a: f32[2] = add(%x, %y)
  %b: f32[2] = add(%w, %v)
  %d: f32[2] = add(%c1, %c2)
  %e: f32[2] = add(%d, %c3)
  %f: f32[2] = add(%a, %b)
  %h: f32[2] = add(%f, %e)
  return %h
})",
              "graph g {\n"
              "  %x: f32[2] = input()\n"
              "  %y: f32[2] = input()\n"
              "  %w: f32[2] = param()\n"
              "  %v: f32[2] = param()\n"
              "  %c1: f32[2] = constant([1.0, 2.0])\n"
              "  %c3: f32[2] = constant([1.0, 3.0])\n"
              "  %a: f32[2] = add(%x, %y)\n"
              "  %b: f32[2] = add(%w, %v)\n"
              "  %d: f32[2] = add(%c1, %c1)\n"
              "  %e: f32[2] = add(%d, %c3)\n"
              "  %f: f32[2] = add(%a, %b)\n"
              "  %h: f32[2] = add(%f, %e)\n"
              "  return %h\n"
              "}\n");
}

TEST(Passes, FoldConstantsEvaluatesConstantSubgraphs) {
  expect_pass(passes::fold_constants, R"(graph g {
  %x: f32[2] = input()
  %four: f32[] = constant(4.0)
  %one: f32[] = constant(1.0)
  %r: f32[] = sqrt(%four)
  %half: f32[] = div(%one, %r)
  %y: f32[2] = mul(%x, %half)
  return %y
})",
              "graph g {\n"
              "  %x: f32[2] = input()\n"
              "  %four: f32[] = constant(4.0)\n"
              "  %one: f32[] = constant(1.0)\n"
              "  %r: f32[] = constant(2.0)\n"
              "  %half: f32[] = constant(0.5)\n"
              "  %y: f32[2] = mul(%x, %half)\n"
              "  return %y\n"
              "}\n");
}

TEST(Passes, FoldConstantsLeavesLargeResultsAlone) {
  // [300,1] + [1,300] broadcasts to 90000 elements, above kMaxFoldElements.
  std::string values;
  for (int i = 0; i < 300; ++i) values += (i ? ", " : "") + std::to_string(i) + ".0";
  ir::Graph g = parse_ir("graph g {\n  %a: f32[300,1] = constant([" + values + "])\n  %b: f32[1,300] = constant([" + values +
                      "])\n  %c: f32[300,300] = add(%a, %b)\n  return %c\n}\n");
  static_assert(300 * 300 > passes::kMaxFoldElements);
  auto out = passes::fold_constants(g);
  ASSERT_OK(out);
  EXPECT_EQ(out->node(2).op, ir::Op::Add);
}

TEST(Passes, FoldingReportsKernelErrorsWithTheNode) {
  ir::Graph g = parse_ir(R"(graph g {
  %table: f32[2,2] = constant([1.0, 2.0, 3.0, 4.0])
  %ids: i32[1] = constant([5])
  %e: f32[1,2] = embedding(%table, %ids)
  return %e
})");
  EXPECT_ERROR_CONTAINS(passes::fold_constants(g), "'e'");
}

TEST(Passes, PipelineIsListedOnceAndSwitchable) {
  std::vector<std::string> names;
  for (const auto& p : passes::pipeline()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fold_constants", "eliminate_common_subexpressions", "fuse_attention_softmax",
                                             "fuse_attention", "fuse_attention_keys_transposed", "fuse_cache_attention",
                                             "fuse_attention_training", "fuse_attention_heads", "fuse_matmul_epilogue", "fuse_matmul_residual", "store_gelu_grad",
                                             "store_attention_probs", "fuse_norm_param_grad", "fuse_matmul_layout",
                                             "fuse_elementwise", "eliminate_dead_code", "pack_matmul_weights"}));
  passes::PipelineOptions opts;
  EXPECT_EQ(passes::pipeline_signature(opts),
            "fold_constants,eliminate_common_subexpressions,fuse_attention_softmax,fuse_attention,"
            "fuse_attention_keys_transposed,fuse_cache_attention,fuse_attention_training,"
            "fuse_attention_heads,fuse_matmul_epilogue,fuse_matmul_residual,store_gelu_grad,store_attention_probs,"
            "fuse_norm_param_grad,fuse_matmul_layout,"
            "fuse_elementwise,"
            "eliminate_dead_code,pack_matmul_weights");
  opts.disabled = {"eliminate_dead_code", "fuse_attention_softmax", "fuse_attention", "fuse_attention_keys_transposed",
                   "fuse_cache_attention", "fuse_attention_training",
                   "fuse_attention_heads", "fuse_matmul_epilogue", "fuse_matmul_residual", "store_gelu_grad",
                   "store_attention_probs", "fuse_norm_param_grad", "fuse_matmul_layout", "fuse_elementwise", "pack_matmul_weights"};
  EXPECT_EQ(passes::pipeline_signature(opts), "fold_constants,eliminate_common_subexpressions");
  opts.disabled = {"no_such_pass"};
  EXPECT_ERROR_CONTAINS(passes::run_pipeline(parse_ir("graph g {\n %x: f32[1] = input()\n return %x\n}\n"), opts),
                        "unknown pass 'no_such_pass'");
}

TEST(Passes, WholePipelineOnTheExamplesVerifiesAfterEachPassAndIsDeterministic) {
  for (const char* file : {"examples/gpt_block.vir", "examples/mlp.vir"}) {
    auto g = ir::load_graph(test::source_path(file));
    ASSERT_OK(g);
    passes::PipelineOptions opts;
    opts.verify_each = true;
    std::vector<std::string> dumped;
    opts.dump_after = "fold_constants";
    opts.dump = [&](const std::string& pass, const ir::Graph&) { dumped.push_back(pass); };
    auto a = passes::run_pipeline(*g, opts);
    auto b = passes::run_pipeline(*g, opts);
    ASSERT_OK(a);
    ASSERT_OK(b);
    EXPECT_EQ(ir::print_graph(*a), ir::print_graph(*b));
    EXPECT_EQ(dumped, (std::vector<std::string>{"fold_constants", "fold_constants"}));
    EXPECT_LE(a->size(), g->size());
  }
}

TEST(Passes, FuseAttentionSoftmaxFoldsScaleAndMaskIntoTheSoftmax) {
  const std::string attention = R"(graph g {
  %x: f32[2,4,4] = input()
  %c: f32[] = constant(0.5)
  %s: f32[2,4,4] = mul(%x, %c)
  %m: f32[2,4,4] = causal_mask(%s) {offset=1}
  %p: f32[2,4,4] = softmax(%m) {axis=-1}
  return %p
}
)";
  auto g = passes::fuse_attention_softmax(parse_ir(attention));
  ASSERT_OK(g);
  ASSERT_OK(ir::verify_graph(*g));
  auto clean = passes::eliminate_dead_code(*g);
  ASSERT_OK(clean);
  EXPECT_EQ(clean->nodes_of(ir::Op::CausalMask).size(), 0u);
  EXPECT_EQ(clean->nodes_of(ir::Op::Mul).size(), 0u);
  const ir::Node& p = clean->node(clean->outputs[0]);
  EXPECT_EQ(p.op, ir::Op::Softmax);
  EXPECT_EQ(*p.attrs.get_float("scale", 1.0), 0.5);
  EXPECT_EQ(*p.attrs.get_int("causal_offset", -9), 1);
  EXPECT_EQ(clean->node(p.inputs[0]).name, "x");

  // Not folded: a finite mask value (probabilities would not be exactly 0), or an intermediate
  // value that something else reads.
  const std::string mask = "%m: f32[2,4,4] = causal_mask(%s) {offset=1}";
  for (const std::string& other : {std::string("%m: f32[2,4,4] = causal_mask(%s) {offset=1, value=-1000.0}"),
                                   mask + "\n  %t: f32[2,4,4] = exp(%s)"}) {
    std::string text = attention;
    text.replace(text.find(mask), mask.size(), other);
    if (other.find("exp") != std::string::npos) text.replace(text.find("return %p"), 9, "return %p, %t");
    auto kept = passes::fuse_attention_softmax(parse_ir(text));
    ASSERT_OK(kept);
    EXPECT_EQ(ir::print_graph(*kept), ir::print_graph(parse_ir(text))) << other;
  }
}

// The fused training graph computes the loss and every gradient of the unfused one.
TEST(Passes, FusedAttentionTrainingGraphMatchesTheUnfusedGraph) {
  auto fwd = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(fwd);
  ModelBuilder b(*fwd);
  Value targets = b.input("targets", {DType::i32, {2, 16}});
  b.output(b.cross_entropy(Value{fwd->outputs[0]}, targets, "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  g->outputs = {g->outputs.back()};
  auto gg = autograd::build_backward(*g);
  ASSERT_OK(gg);
  auto values = test::seeded_values(gg->graph, 5);
  ASSERT_OK(values);
  std::vector<std::vector<Tensor>> outs;
  for (bool fuse : {true, false}) {
    Runtime rt(make_cpu_backend());
    CompileOptions opts;
    if (!fuse) opts.pipeline.disabled = {"fuse_attention_softmax"};
    auto plan = rt.compile(gg->graph, opts);
    ASSERT_OK(plan);
    size_t masks = 0;
    for (const ir::Node& n : (*plan)->graph.nodes) masks += n.op == ir::Op::CausalMask;
    EXPECT_EQ(masks, fuse ? 0u : 2u) << "fuse " << fuse;  // one forward, one backward
    auto out = rt.run(**plan, *values);
    ASSERT_OK(out);
    outs.push_back(*out);
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t i = 0; i < outs[0].size(); ++i)
    for (int64_t e = 0; e < outs[0][i].numel(); ++e)
      ASSERT_NEAR(outs[0][i].data<float>()[e], outs[1][i].data<float>()[e], 1e-5 * (1 + std::fabs(outs[1][i].data<float>()[e])))
          << "output " << i << " element " << e;
}

TEST(Passes, GraphHashIdentifiesGraphAndPipeline) {
  ir::Graph g = parse_ir("graph g {\n %x: f32[2] = input()\n %y: f32[2] = exp(%x)\n return %y\n}\n");
  ir::Graph same = parse_ir("graph g {\n  %x: f32[2] = input()   # same graph, other spacing\n  %y = exp(%x)\n  return %y\n}\n");
  ir::Graph other = parse_ir("graph g {\n %x: f32[2] = input()\n %y: f32[2] = log(%x)\n return %y\n}\n");
  EXPECT_EQ(passes::graph_hash(g, "a"), passes::graph_hash(same, "a"));
  EXPECT_NE(passes::graph_hash(g, "a"), passes::graph_hash(other, "a"));
  EXPECT_NE(passes::graph_hash(g, "a"), passes::graph_hash(g, "b"));
}

// attention(q, k, v[, k2, v2]) gives the same bits as the matmul -> fused softmax -> matmul (with
// concats) it replaces, for every matmul ISA and thread count.
TEST(Passes, FusedAttentionHasTheBitsOfTheUnfusedGraph) {
  struct Shapes { Shape q, k, v, k2, v2; int64_t offset, prefix; };
  const std::vector<Shapes> cases = {
      {{1, 4, 1, 32}, {1, 4, 9, 32}, {1, 4, 9, 32}, {1, 4, 1, 32}, {1, 4, 1, 32}, 9, 0},  // decode step
      {{1, 4, 1, 32}, {1, 4, 16, 32}, {1, 4, 16, 32}, {1, 4, 1, 32}, {1, 4, 1, 32}, 9, 9},  // cache read in place
      {{2, 3, 11, 8}, {2, 3, 4, 8}, {2, 3, 4, 21}, {2, 3, 11, 8}, {2, 3, 11, 21}, 4, 0},
      {{2, 3, 11, 8}, {}, {}, {2, 3, 11, 8}, {2, 3, 11, 21}, 0, 0},  // no concat: three inputs
  };
  for (const Shapes& c : cases) {
    ModelBuilder b("attn");
    Value q = b.input("q", {DType::f32, c.q});
    Value k = b.input("k2", {DType::f32, c.k2}), v = b.input("v2", {DType::f32, c.v2});
    if (!c.k.empty()) {
      Value k0 = b.input("k", {DType::f32, c.k}), v0 = b.input("v", {DType::f32, c.v});
      if (c.prefix) k0 = b.slice(k0, 2, 0, c.prefix), v0 = b.slice(v0, 2, 0, c.prefix);
      k = b.concat({k0, k}, 2);
      v = b.concat({v0, v}, 2);
    }
    Value s = b.mul(b.matmul(q, k, "scores", false, true), b.scalar(0.35f));
    b.output(b.matmul(b.softmax(b.causal_mask(s, c.offset), -1), v, "y"));
    auto g = b.build();
    ASSERT_OK(g);
    auto in = random_inputs(*g, 3);
    ASSERT_OK(in);
    Tensor first;
    test::for_each_cpu_config([&](cpu::MatmulIsa isa, int threads) {
      for (bool fuse : {true, false}) {
        Runtime rt(make_cpu_backend());
        CompileOptions opts;
        if (!fuse) opts.pipeline.disabled = {"fuse_attention"};
        auto plan = rt.compile(*g, opts);
        ASSERT_OK(plan);
        size_t attention = 0, concats = 0, slices = 0;
        for (const ir::Node& n : (*plan)->graph.nodes)
          attention += n.op == ir::Op::Attention, concats += n.op == ir::Op::Concat, slices += n.op == ir::Op::Slice;
        EXPECT_EQ(attention, fuse ? 1u : 0u);
        EXPECT_EQ(concats, fuse || c.k.empty() ? 0u : 2u);
        EXPECT_EQ(slices, fuse || !c.prefix ? 0u : 2u);
        auto out = rt.run(**plan, *in);
        ASSERT_OK(out);
        if (!first.defined()) first = (*out)[0];
        EXPECT_TRUE(first.bitwise_equal((*out)[0])) << "isa " << cpu::matmul_isa_name(isa) << " fuse " << fuse << " threads " << threads;
      }
    });
  }
}

// The TinyLM inference graphs fuse every layer's attention (the decode step reading its cache in
// place); the training graph fuses its forward and backward into attention + attention_grad
// from 128 keys on.
TEST(Passes, TinyLMGraphsFuseAttentionWhereNothingElseReadsIt) {
  model::TinyLMConfig c;
  auto count = [](const ir::Graph& g, ir::Op op) {
    size_t n = 0;
    for (const ir::Node& x : g.nodes) n += x.op == op;
    return n;
  };
  auto decode = model::build_tinylm_decode(c, 1);
  ASSERT_OK(decode);
  passes::PipelineOptions unfused_writes;
  unfused_writes.disabled = {"fuse_cache_attention"};
  auto d = passes::run_pipeline(*decode, unfused_writes);
  ASSERT_OK(d);
  EXPECT_EQ(count(*d, ir::Op::Attention), static_cast<size_t>(c.layers));
  EXPECT_EQ(count(*d, ir::Op::Softmax), 0u);
  EXPECT_EQ(count(*d, ir::Op::CacheWrite), static_cast<size_t>(2 * c.layers));
  for (const ir::Node& n : d->nodes)
    if (n.op == ir::Op::Attention) {  // the written caches, read in place up to the run-time position
      ASSERT_EQ(n.inputs.size(), 4u);
      EXPECT_EQ(d->node(n.inputs[1]).op, ir::Op::CacheWrite);
      EXPECT_EQ(d->node(n.inputs[2]).op, ir::Op::CacheWrite);
      EXPECT_EQ(d->node(n.inputs[3]).name, "position");
    }
  // The whole pipeline folds the two writes into the attention that reads them.
  d = passes::run_pipeline(*decode, {});
  ASSERT_OK(d);
  EXPECT_EQ(count(*d, ir::Op::CacheAttention), static_cast<size_t>(c.layers));
  EXPECT_EQ(count(*d, ir::Op::Attention), 0u);
  EXPECT_EQ(count(*d, ir::Op::CacheWrite), 0u);
  int64_t layer = 0;
  for (const ir::Node& n : d->nodes)
    if (n.op == ir::Op::CacheAttention) {  // q, the layer's caches (params), its new k and v rows, the position
      ASSERT_EQ(n.inputs.size(), 6u);
      EXPECT_EQ(d->node(n.inputs[1]).name, "cache.k." + std::to_string(layer));
      EXPECT_EQ(d->node(n.inputs[2]).name, "cache.v." + std::to_string(layer));
      EXPECT_EQ(d->node(n.inputs[1]).op, ir::Op::Param);
      EXPECT_EQ(d->node(n.inputs[5]).name, "position");
      EXPECT_EQ(n.attrs.items().size(), 2u);  // scale and causal_offset
      ++layer;
    }
  auto prefill = model::build_tinylm_prefill(c, 2, 7);
  ASSERT_OK(prefill);
  auto p = passes::run_pipeline(*prefill, {});
  ASSERT_OK(p);
  EXPECT_EQ(count(*p, ir::Op::Attention), static_cast<size_t>(c.layers));
  EXPECT_EQ(count(*p, ir::Op::Softmax), 0u);
  auto loss = model::build_tinylm_loss(c, 2, 7);
  ASSERT_OK(loss);
  auto train = autograd::build_backward(*loss);
  ASSERT_OK(train);
  auto t = passes::run_pipeline(train->graph, {});
  ASSERT_OK(t);
  EXPECT_EQ(count(*t, ir::Op::Attention), 0u);  // 7 keys: keeping the probabilities is cheaper
  c.context = 128;
  auto long_loss = model::build_tinylm_loss(c, 1, 128);
  ASSERT_OK(long_loss);
  auto long_train = autograd::build_backward(*long_loss);
  ASSERT_OK(long_train);
  auto lt = passes::run_pipeline(long_train->graph, {});
  ASSERT_OK(lt);
  EXPECT_EQ(count(*lt, ir::Op::Attention), static_cast<size_t>(c.layers));  // the training form
  EXPECT_EQ(count(*lt, ir::Op::AttentionGrad), static_cast<size_t>(c.layers));
  EXPECT_EQ(count(*lt, ir::Op::Softmax), 0u);
  EXPECT_EQ(count(*lt, ir::Op::SoftmaxGrad), 0u);
  passes::PipelineOptions unfused;
  unfused.disabled = {"fuse_attention_training"};
  auto u = passes::run_pipeline(long_train->graph, unfused);
  ASSERT_OK(u);
  EXPECT_EQ(count(*u, ir::Op::Attention), 0u);  // fuse_attention leaves it: p has three readers
}

// attention + attention_grad (fuse_attention_training) give the loss and the gradients of the
// unfused forward and backward bit for bit, for every matmul ISA and 1 and 2 threads, with and
// without a causal mask, and with a non-finite value (where skipping masked terms would not be
// exact, so the kernel computes them all).
TEST(Passes, FusedTrainingAttentionHasTheBitsOfTheUnfusedGraph) {
  struct Case { Shape shape; std::optional<int64_t> offset; float scale; bool inf; };
  const std::vector<Case> cases = {
      {{1, 2, 128, 16}, 0, 0.25f, false}, {{2, 133, 8}, 5, 0.5f, false}, {{1, 130, 5}, std::nullopt, 1.0f, false},
      {{1, 128, 8}, 0, 0.35f, true},
  };
  for (const Case& c : cases) {
    ModelBuilder b("attn_train");
    const TensorType t{DType::f32, c.shape};
    Value q = b.param("q", t), k = b.param("k", t), v = b.param("v", t);
    // (fuse_attention_softmax folds a scale into the softmax together with a causal mask only.)
    Value s = b.matmul(q, k, "scores", false, true);
    if (c.scale != 1.0f) s = b.mul(s, b.scalar(c.scale));
    if (c.offset) s = b.causal_mask(s, *c.offset);
    b.output(b.mse(b.matmul(b.softmax(s, -1), v, "y"), b.input("target", t), "loss"));
    auto g = b.build();
    ASSERT_OK(g);
    auto gg = autograd::build_backward(*g);
    ASSERT_OK(gg);
    auto values = test::seeded_values(gg->graph, 7);
    ASSERT_OK(values);
    for (auto& [name, value] : *values) {  // O(1) values: the softmax is not one-hot
      if (name == "target") continue;
      fill_normal(value, 11, name.size(), 0.0f, 1.0f);
      if (c.inf && name == "v") value.data<float>()[5 * c.shape.back() + 1] = std::numeric_limits<float>::infinity();
    }
    std::vector<Tensor> first;
    test::for_each_cpu_config([&](cpu::MatmulIsa isa, int threads) {
      for (bool fuse : {true, false}) {
        Runtime rt(make_cpu_backend());
        CompileOptions opts;
        if (!fuse) opts.pipeline.disabled = {"fuse_attention_training"};
        auto plan = rt.compile(gg->graph, opts);
        ASSERT_OK(plan);
        size_t grads = 0;
        for (const ir::Node& n : (*plan)->graph.nodes) grads += n.op == ir::Op::AttentionGrad;
        EXPECT_EQ(grads, fuse ? 1u : 0u) << shape_to_string(c.shape);
        auto out = rt.run(**plan, *values);
        ASSERT_OK(out);
        if (first.empty()) first = *out;
        ASSERT_EQ(out->size(), 4u);  // loss, dq, dk, dv
        for (size_t i = 0; i < out->size(); ++i)
          EXPECT_TRUE(first[i].bitwise_equal((*out)[i])) << shape_to_string(c.shape) << " output " << i << " isa "
                                                          << cpu::matmul_isa_name(isa) << " fuse " << fuse << " threads " << threads;
      }
    });
    ASSERT_FALSE(first.empty());
    if (c.inf) {
      EXPECT_TRUE(std::isnan(first[0].data<float>()[0]));  // the inf reached the loss
    }
  }
}

// Self-attention on the head splits of a packed projection x [B, T, 3 H D]: y [B, T, H D] or,
// with `train`, the training graph of mse(y, target). The scores are scaled only together with a
// causal mask (fuse_attention_softmax folds a scale into the softmax with the mask only).
Result<ir::Graph> packed_attention(int64_t B, int64_t T, int64_t H, int64_t D, std::optional<int64_t> offset, float scale,
                                   bool train) {
  const int64_t C = H * D;
  ModelBuilder b("packed_attention");
  Value x = b.param("x", TensorType{DType::f32, {B, T, 3 * C}});
  auto heads = [&](int64_t part) {
    return b.transpose(b.reshape(b.slice(x, 2, part * C, (part + 1) * C), {B, T, H, D}), {0, 2, 1, 3});
  };
  Value s = b.matmul(heads(0), heads(1), "scores", false, true);
  if (offset) s = b.causal_mask(b.mul(s, b.scalar(scale)), *offset);
  Value y = b.reshape(b.transpose(b.matmul(b.softmax(s, -1), heads(2), "y"), {0, 2, 1, 3}), {B, T, C});
  b.output(train ? b.mse(y, b.input("target", TensorType{DType::f32, {B, T, C}}), "loss") : y);
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, b.build());
  if (!train) return g;
  VOLTA_ASSIGN_OR_RETURN(auto gg, autograd::build_backward(g));
  return gg.graph;
}

// fuse_attention_heads: attention reading a packed q/k/v projection through its strides and
// writing the merged heads (and attention_grad writing the projection's gradient) gives the bits
// of the slices, head transposes, merge and concat it replaces, for every matmul ISA and 1 and 2
// threads: the training form (from kMinPackedKeys keys) and the inference form, whose few query
// rows take the kernel's per-row path.
TEST(Passes, PackedHeadsAttentionHasTheBitsOfTheSplitHeads) {
  struct Case { int64_t B, T, H, D; bool train; float scale; };
  const std::vector<Case> cases = {{2, 64, 2, 8, true, 0.3f}, {1, 70, 3, 5, true, 0.5f}, {2, 5, 4, 8, false, 0.35f},
                                   {1, 20, 2, 16, false, 0.25f}};
  for (const Case& c : cases) {
    auto built = packed_attention(c.B, c.T, c.H, c.D, 0, c.scale, c.train);
    ASSERT_OK(built);
    const ir::Graph& g = *built;
    auto values = test::seeded_values(g, 5);
    ASSERT_OK(values);
    for (auto& [name, value] : *values) fill_normal(value, 13, name.size(), 0.0f, 1.0f);
    std::vector<Tensor> first;
    test::for_each_cpu_config([&](cpu::MatmulIsa isa, int threads) {
      for (bool packed : {true, false}) {
        Runtime rt(make_cpu_backend());
        CompileOptions opts;
        if (!packed) opts.pipeline.disabled = {"fuse_attention_heads"};
        auto plan = rt.compile(g, opts);
        ASSERT_OK(plan);
        size_t found = 0, copies = 0;
        const ir::Graph& pg = (*plan)->graph;
        for (const ir::Node& n : pg.nodes) {
          found += n.attrs.has("packed_heads");
          // (the views of an attention's output and stored probabilities are no copies)
          const bool view = n.op == ir::Op::Slice && pg.node(n.inputs[0]).op == ir::Op::Attention;
          copies += (n.op == ir::Op::Slice && !view) || n.op == ir::Op::Transpose || n.op == ir::Op::Concat;
        }
        EXPECT_EQ(found, packed ? (c.train ? 2u : 1u) : 0u) << c.T;
        if (packed) {
          EXPECT_EQ(copies, 0u) << c.T;
        }
        auto out = rt.run(**plan, *values);
        ASSERT_OK(out);
        if (first.empty()) first = *out;
        ASSERT_EQ(out->size(), c.train ? 2u : 1u);  // (loss, dx) or y
        for (size_t i = 0; i < out->size(); ++i)
          EXPECT_TRUE(first[i].bitwise_equal((*out)[i])) << "T " << c.T << " output " << i << " isa "
                                                          << cpu::matmul_isa_name(isa) << " packed " << packed
                                                          << " threads " << threads;
      }
    });
    ASSERT_FALSE(first.empty());
  }
}

// store_attention_probs: the forward keeps the probabilities (attention {store_probs}) and the
// gradient reads them, with the bits of the recomputing kernels for every matmul ISA at 1 and 2
// threads: packed heads and plain, causal or not, and a non-finite value (no masked term
// skipped). Past kMaxKeys keys, and without a gradient, the graph keeps recomputing.
TEST(Passes, StoredAttentionProbsHaveTheBitsOfTheRecomputedOnes) {
  struct Case { int64_t B, T, H, D; std::optional<int64_t> offset; bool packed, inf, train = true; };
  const std::vector<Case> cases = {{2, 64, 2, 8, 0, true, false},        {1, 130, 2, 5, std::nullopt, false, false},
                                   {1, 128, 1, 8, 3, false, true},       {1, 257, 1, 4, 0, false, false},
                                   {2, 64, 2, 8, 0, true, false, false}};
  for (const Case& c : cases) {
    const int64_t C = c.H * c.D;
    auto built = packed_attention(c.B, c.T, c.H, c.D, c.offset, 0.3f, c.train);
    ASSERT_OK(built);
    const ir::Graph& g = *built;
    auto values = test::seeded_values(g, 5);
    ASSERT_OK(values);
    for (auto& [name, value] : *values) fill_normal(value, 17, name.size(), 0.0f, 1.0f);
    if (c.inf) values->at("x").data<float>()[5 * 3 * C + 2 * C + 1] = std::numeric_limits<float>::infinity();  // in v
    const size_t want = c.train && c.T <= 256 ? 1 : 0;
    std::vector<Tensor> first;
    test::for_each_cpu_config([&](cpu::MatmulIsa isa, int threads) {
      for (bool store : {true, false}) {
        Runtime rt(make_cpu_backend());
        CompileOptions opts;
        if (!store) opts.pipeline.disabled.insert("store_attention_probs");
        if (!c.packed) opts.pipeline.disabled.insert("fuse_attention_heads");
        auto plan = rt.compile(g, opts);
        ASSERT_OK(plan);
        size_t stores = 0, reads = 0;
        for (const ir::Node& n : (*plan)->graph.nodes) {
          stores += n.op == ir::Op::Attention && n.attrs.get_int("store_probs", 0).value() == 1;
          reads += n.op == ir::Op::AttentionGrad && n.inputs.size() == 5;
        }
        EXPECT_EQ(stores, store ? want : 0u) << c.T;
        EXPECT_EQ(reads, store ? want : 0u) << c.T;
        auto out = rt.run(**plan, *values);
        ASSERT_OK(out);
        if (first.empty()) first = *out;
        for (size_t i = 0; i < out->size(); ++i)
          EXPECT_TRUE(first[i].bitwise_equal((*out)[i])) << "T " << c.T << " output " << i << " isa "
                                                          << cpu::matmul_isa_name(isa) << " store " << store
                                                          << " threads " << threads;
      }
    });
    ASSERT_FALSE(first.empty());
    if (c.inf) {
      EXPECT_TRUE(std::isnan(first[0].data<float>()[0]));  // the inf reached the loss
    }
  }
}

}  // namespace
}  // namespace volta
