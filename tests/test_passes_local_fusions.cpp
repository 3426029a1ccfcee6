// The local fusions: the matmul epilogue (bias, activation, gelu_grad), the norms' parameter
// gradients and trees of elementwise ops, each bitwise against the unfused graph.
#include <cmath>
#include <limits>
#include <functional>
#include <optional>
#include <set>

#include "backends/cpu/matmul.h"
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

// Runs g with the whole pipeline and without `passes`, on every matmul ISA at 1 and 2 threads:
// check(plan's graph, fused) looks at each plan, and every run's outputs must have the bits of
// the first.
void expect_fusion_keeps_bits(const ir::Graph& g, const Bindings& values, const std::set<std::string>& passes,
                              const std::function<void(const ir::Graph&, bool)>& check, const std::string& what) {
  std::vector<Tensor> first;
  test::for_each_cpu_config([&](cpu::MatmulIsa isa, int threads) {
    for (bool fuse : {true, false}) {
      Runtime rt(make_cpu_backend());
      CompileOptions opts;
      if (!fuse) opts.pipeline.disabled = passes;
      auto plan = rt.compile(g, opts);
      ASSERT_OK(plan);
      check((*plan)->graph, fuse);
      auto out = rt.run(**plan, values);
      ASSERT_OK(out);
      if (first.empty()) first = *out;
      for (size_t i = 0; i < out->size(); ++i)
        EXPECT_TRUE(first[i].bitwise_equal((*out)[i])) << what << ": output " << i << " isa " << cpu::matmul_isa_name(isa)
                                                       << " fuse " << fuse << " threads " << threads;
    }
  });
}

// The matmul epilogue (bias, relu / gelu) has the bits of the unfused add and activation, for
// every matmul ISA and thread count; a pre-activation read elsewhere (gelu_grad) stays.
TEST(Passes, FusedMatmulEpilogueHasTheBitsOfTheUnfusedGraph) {
  struct Case { bool bias; const char* act; bool transpose_b; Shape x; Shape bias_shape = {40}; };
  const std::vector<Case> cases = {
      {true, "", false, {3, 5, 24}},      {true, "gelu", false, {3, 5, 24}}, {false, "relu", true, {7, 24}},
      {true, "relu", true, {2, 3, 4, 24}}, {false, "gelu", false, {1, 24}},
      {true, "gelu", false, {6, 24}, {1, 40}},  // ONNX Gemm's [1, N] bias: reshaped (a view) and fused
  };
  for (const Case& c : cases) {
    ModelBuilder b("epilogue");
    Value x = b.input("x", {DType::f32, c.x});
    Value w = b.param("w", {DType::f32, c.transpose_b ? Shape{40, 24} : Shape{24, 40}}, ParamInit::normal(0.3));
    Value y = b.matmul(x, w, "mm", false, c.transpose_b);
    if (c.bias) y = b.add(y, b.param("bias", {DType::f32, c.bias_shape}, ParamInit::normal(0.5)), "biased");
    if (std::string(c.act) == "relu") y = b.op(ir::Op::Relu, {y});
    if (std::string(c.act) == "gelu") y = b.gelu(y);
    b.output(y);
    auto g = b.build();
    ASSERT_OK(g);
    auto values = test::seeded_values(*g, 4);
    ASSERT_OK(values);
    expect_fusion_keeps_bits(
        *g, *values, {"fuse_matmul_epilogue", "fuse_elementwise"},
        [&](const ir::Graph& plan, bool fuse) {
          size_t nodes = 0;
          for (const ir::Node& n : plan.nodes) nodes += !ir::is_leaf(n.op) && n.op != ir::Op::Reshape;
          EXPECT_EQ(nodes, fuse ? 1u : 1u + c.bias + (c.act[0] != 0)) << c.act;
        },
        std::string("bias ") + (c.bias ? "1" : "0") + " act '" + c.act + "'");
  }
  // Training: gelu_grad reads the pre-activation, so only the bias folds.
  ModelBuilder b("train");
  Value x = b.input("x", {DType::f32, {6, 8}});
  Value h = b.gelu(b.add(b.matmul(x, b.param("w", {DType::f32, {8, 5}}), "mm"), b.param("bias", {DType::f32, {5}})));
  b.output(b.mse(h, b.input("t", {DType::f32, {6, 5}})));
  auto g = b.build();
  ASSERT_OK(g);
  auto train = autograd::build_backward(*g);
  ASSERT_OK(train);
  auto t = passes::run_pipeline(train->graph, {});
  ASSERT_OK(t);
  size_t with_bias = 0, with_act = 0;
  for (const ir::Node& n : t->nodes)
    if (n.op == ir::Op::Matmul) with_bias += n.inputs.size() == 3, with_act += n.attrs.has("activation");
  EXPECT_EQ(with_bias, 1u);
  EXPECT_EQ(with_act, 0u);
}

// A residual add folds into the matmul whose sum it is, either side of the add, after a bias
// and activation, with the bits of the unfused add on every ISA and thread count (decode-sized,
// packed-path and batched products); it does not fold into a matmul read elsewhere too, nor
// take a broadcast r; autograd refuses a residual matmul and the text IR checks its r.
TEST(Passes, ResidualAddsFoldIntoTheMatmulWithTheBitsOfTheAdd) {
  struct Case { Shape x; bool bias; bool gelu; bool matmul_first; };
  const std::vector<Case> cases = {{{3, 24}, false, false, false}, {{2, 50, 24}, true, false, true},
                                   {{70, 24}, true, true, false},   {{1, 24}, true, false, false}};
  for (const Case& c : cases) {
    ModelBuilder b("residual");
    Value x = b.input("x", {DType::f32, c.x});
    Shape rs = c.x;
    rs.back() = 40;
    Value r = b.input("r", {DType::f32, rs});
    Value y = b.matmul(x, b.param("w", {DType::f32, {24, 40}}, ParamInit::normal(0.3)), "mm");
    if (c.bias) y = b.add(y, b.param("bias", {DType::f32, {40}}, ParamInit::normal(0.5)), "biased");
    if (c.gelu) y = b.gelu(y);
    y = c.matmul_first ? b.add(y, r, "sum") : b.add(r, y, "sum");
    b.output(y);
    auto g = b.build();
    ASSERT_OK(g);
    auto values = test::seeded_values(*g, 5);
    ASSERT_OK(values);
    expect_fusion_keeps_bits(
        *g, *values, {"fuse_matmul_residual"},
        [&](const ir::Graph& plan, bool fuse) {
          size_t adds = 0, residual = 0;
          for (const ir::Node& n : plan.nodes) adds += n.op == ir::Op::Add, residual += n.attrs.has("residual");
          EXPECT_EQ(adds, fuse ? 0u : 1u);
          EXPECT_EQ(residual, fuse ? 1u : 0u);
        },
        "residual x " + shape_to_string(c.x));
  }
  // Not when the product is also read elsewhere, nor with a broadcast r.
  const ir::Graph kept = parse_ir(R"(graph g {
  %x: f32[4,8] = input()
  %w: f32[8,6] = param()
  %r: f32[4,6] = input()
  %row: f32[6] = input()
  %mm: f32[4,6] = matmul(%x, %w)
  %sum: f32[4,6] = add(%r, %mm)
  %mm2: f32[4,6] = matmul(%x, %w)
  %b: f32[4,6] = add(%mm2, %row)
  %both: f32[4,6] = add(%sum, %mm)
  return %both, %b
})");
  auto t = passes::fuse_matmul_residual(kept);
  ASSERT_OK(t);
  for (const ir::Node& n : t->nodes) EXPECT_FALSE(n.attrs.has("residual")) << n.name;
  // Autograd refuses it; the shape rule checks r.
  const ir::Graph fused = parse_ir(R"(graph g {
  %x: f32[4,8] = input()
  %w: f32[8,6] = param()
  %r: f32[4,6] = input()
  %y: f32[4,6] = matmul(%x, %w, %r) {residual=1}
  %loss: f32[] = reduce_sum(%y) {axes=[0, 1]}
  return %loss
})");
  EXPECT_ERROR_CONTAINS(autograd::build_backward(fused), "residual epilogue");
  const TensorType a{DType::f32, {4, 8}}, w{DType::f32, {8, 6}}, r{DType::f32, {4, 6}}, bias{DType::f32, {6}};
  ir::Attrs res;
  res.set("residual", int64_t{1});
  ASSERT_OK(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a, w, bias, r}, res));
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a, w, bias}, res), "residual r must be f32[4,6]");
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a, w}, res), "needs r");
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a, w, bias, r}, ir::Attrs{}), "needs residual = 1");
  res.set("residual", int64_t{2});
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a, w, r}, res), "must be 0 or 1");
}

// gelu_grad(x, matmul(a, b)) folds into the matmul (activation gelu_grad, x its third input)
// with the bits of the unfused pair, on every ISA, thread count and product path (the packed
// tasks, a small-M product, a batch of products); in a training graph it is the MLP's backward.
TEST(Passes, GeluGradFoldsIntoTheMatmulThatMakesItsGradient) {
  struct Case {
    Shape a, b;
    bool transpose_b;
  };
  const std::vector<Case> cases = {{{3, 50, 24}, {40, 24}, true}, {{2, 24}, {24, 40}, false}, {{4, 30, 16}, {4, 16, 70}, false}};
  for (const Case& c : cases) {
    ModelBuilder b("gelu_grad");
    Value a = b.input("a", {DType::f32, c.a});
    Value w = b.input("w", {DType::f32, c.b});
    Value dy = b.matmul(a, w, "dy", false, c.transpose_b);
    Value x = b.input("x", b.type(dy));
    b.output(b.op(ir::Op::GeluGrad, {x, dy}, {}, "dx"));
    auto g = b.build();
    ASSERT_OK(g);
    auto values = random_inputs(*g, 5);
    ASSERT_OK(values);
    expect_fusion_keeps_bits(
        *g, *values, {"fuse_matmul_epilogue"},
        [&](const ir::Graph& plan, bool fuse) {
          const auto matmuls = plan.nodes_of(ir::Op::Matmul);
          ASSERT_EQ(matmuls.size(), 1u);
          EXPECT_EQ(plan.nodes_of(ir::Op::GeluGrad).size(), fuse ? 0u : 1u);
          EXPECT_EQ(plan.node(matmuls[0]).attrs.get_string("activation", "none").value(), fuse ? "gelu_grad" : "none");
        },
        "gelu_grad of " + shape_to_string(c.a));
  }
  // The MLP's backward: d hidden comes from a matmul whose one reader is gelu_grad.
  ModelBuilder b("mlp");
  Value x = b.input("x", {DType::f32, {6, 8}});
  Value h = b.gelu(b.matmul(x, b.param("w1", {DType::f32, {8, 16}}), "mm1"));
  Value y = b.matmul(h, b.param("w2", {DType::f32, {16, 5}}), "mm2");
  b.output(b.mse(y, b.input("t", {DType::f32, {6, 5}})));
  auto g = b.build();
  ASSERT_OK(g);
  auto train = autograd::build_backward(*g);
  ASSERT_OK(train);
  passes::PipelineOptions recompute;  // (store_gelu_grad would make it a mul by the stored gelu')
  recompute.disabled = {"store_gelu_grad"};
  auto t = passes::run_pipeline(train->graph, recompute);
  ASSERT_OK(t);
  EXPECT_TRUE(t->nodes_of(ir::Op::GeluGrad).empty()) << ir::print_graph(*t);
  size_t folded = 0;
  for (const ir::Node& n : t->nodes)
    folded += n.op == ir::Op::Matmul && n.attrs.get_string("activation", "none").value() == "gelu_grad";
  EXPECT_EQ(folded, 1u);
  // A gelu_grad epilogue whose third input is not x of the result's type is an error.
  auto bad = ir::parse_graph(R"(graph g {
  %a: f32[4,8] = input()
  %w: f32[8,3] = input()
  %x: f32[3] = input()
  %y = matmul(%a, %w, %x) {activation="gelu_grad"}
  return %y
})",
                             "test");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("activation gelu_grad needs x f32[4,3] as the third input, got f32[3]"), std::string::npos)
      << bad.status().message();
}

// store_gelu_grad: the MLP's gelu becomes gelu_and_grad, and its gradient (the d hidden
// product's epilogue, or a gelu_grad op of its own) a mul by the stored derivative, with the bits
// of the recomputing graph on every ISA and thread count; a pre-activation read elsewhere stays.
TEST(Passes, StoredGeluGradHasTheBitsOfTheRecomputedOne) {
  const auto count = [](const ir::Graph& g, const std::string& act) {
    size_t n = 0;
    for (const ir::Node& m : g.nodes) n += m.op == ir::Op::Matmul && m.attrs.get_string("activation", "none").value() == act;
    return n;
  };
  {  // the MLP's backward: many tasks and a ragged edge
    ModelBuilder b("mlp");
    Value x = b.input("x", {DType::f32, {3, 50, 24}});
    Value h = b.gelu(b.matmul(x, b.param("w1", {DType::f32, {24, 70}}, ParamInit::normal(0.5)), "mm1"));
    Value y = b.matmul(h, b.param("w2", {DType::f32, {70, 5}}, ParamInit::normal(0.5)), "mm2");
    b.output(b.mse(y, b.input("t", {DType::f32, {3, 50, 5}})));
    auto g = b.build();
    ASSERT_OK(g);
    auto train = autograd::build_backward(*g);
    ASSERT_OK(train);
    auto values = test::seeded_values(train->graph, 7);
    ASSERT_OK(values);
    expect_fusion_keeps_bits(
        train->graph, *values, {"store_gelu_grad"},
        [&](const ir::Graph& plan, bool fuse) {
          EXPECT_EQ(plan.nodes_of(ir::Op::GeluAndGrad).size(), fuse ? 1u : 0u);
          EXPECT_EQ(plan.nodes_of(ir::Op::Gelu).size(), fuse ? 0u : 1u);
          EXPECT_EQ(count(plan, "mul"), fuse ? 1u : 0u);
          EXPECT_EQ(count(plan, "gelu_grad"), fuse ? 0u : 1u);
        },
        "the MLP's gelu");
  }
  {  // a gelu_grad op (its dy no product's) becomes mul(d, dy)
    ModelBuilder b("op");
    Value h = b.input("h", {DType::f32, {7, 333}});
    Value dy = b.input("dy", {DType::f32, {7, 333}});
    b.output(b.gelu(h));
    b.output(b.op(ir::Op::GeluGrad, {h, dy}, {}, "dh"));
    auto g = b.build();
    ASSERT_OK(g);
    auto values = random_inputs(*g, 8);
    ASSERT_OK(values);
    expect_fusion_keeps_bits(
        *g, *values, {"store_gelu_grad"},
        [&](const ir::Graph& plan, bool fuse) {
          EXPECT_EQ(plan.nodes_of(ir::Op::GeluAndGrad).size(), fuse ? 1u : 0u);
          EXPECT_EQ(plan.nodes_of(ir::Op::GeluGrad).size(), fuse ? 0u : 1u);
        },
        "a gelu_grad op");
  }
  // h read by anything else (here also an output), the tanh form, or no gradient: untouched.
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder b("kept");
    Value h = b.input("h", {DType::f32, {4, 16}});
    b.output(b.gelu(h, "y", variant == 1));
    const ir::Attrs form = variant == 1 ? ir::Attrs{{"approximate", std::string("tanh")}} : ir::Attrs{};
    if (variant != 2) b.output(b.op(ir::Op::GeluGrad, {h, b.input("dy", {DType::f32, {4, 16}})}, form, "dh"));
    if (variant == 0) b.output(b.op(ir::Op::Neg, {h}, {}, "other"));
    auto g = b.build();
    ASSERT_OK(g);
    auto t = passes::store_gelu_grad(*g);
    ASSERT_OK(t);
    EXPECT_TRUE(t->nodes_of(ir::Op::GeluAndGrad).empty()) << variant << "\n" << ir::print_graph(*t);
  }
}

// A norm's parameter gradients (layer_norm with and without beta, rms_norm) fold into one
// norm_param_grad with the bits of the unfused nodes, at 1 and 2 threads.
TEST(Passes, NormParamGradsFoldWithTheBitsOfTheUnfusedNodes) {
  for (int variant = 0; variant < 3; ++variant) {
    ModelBuilder b("norm");
    const Shape s = variant == 2 ? Shape{5, 70} : Shape{3, 50, 40};
    const int64_t D = s.back();
    Value x = b.input("x", {DType::f32, s});
    Value gamma = b.param("gamma", {DType::f32, {D}}, ParamInit::normal(1.0));
    Value y = variant == 0   ? b.layer_norm(x, gamma, b.param("beta", {DType::f32, {D}}, ParamInit::normal(1.0)))
              : variant == 1 ? b.layer_norm(x, gamma)
                             : b.rms_norm(x, gamma);
    b.output(b.mse(y, b.input("t", {DType::f32, s})));
    auto g = b.build();
    ASSERT_OK(g);
    auto train = autograd::build_backward(*g);
    ASSERT_OK(train);
    auto values = test::seeded_values(train->graph, 6);
    ASSERT_OK(values);
    expect_fusion_keeps_bits(
        train->graph, *values, {"fuse_norm_param_grad"},
        [&](const ir::Graph& plan, bool fuse) {
          EXPECT_EQ(plan.nodes_of(ir::Op::NormParamGrad).size(), fuse ? 1u : 0u) << variant;
          EXPECT_EQ(plan.nodes_of(ir::Op::ReduceSum).size(), fuse ? 0u : variant == 0 ? 2u : 1u) << variant;
        },
        "norm variant " + std::to_string(variant));
  }
}

// fuse_matmul_layout: the head split and merge of an unfused attention block's forward and
// backward (T = 16: below fuse_attention_training's threshold) become matmuls reading and writing
// through perms, with the bits of the transposed copies, on every ISA and thread count.
TEST(Passes, TransposesFoldIntoTheMatmulsAroundThem) {
  ModelBuilder b("heads");
  const int64_t B = 2, T = 16, H = 3, D = 8, C = H * D;
  Value x = b.input("x", {DType::f32, {B, T, C}});
  Value qkv = b.matmul(x, b.param("w", {DType::f32, {C, 3 * C}}, ParamInit::normal(0.3)), "qkv");
  auto heads = [&](int64_t i) { return b.transpose(b.reshape(b.slice(qkv, 2, i * C, (i + 1) * C), {B, T, H, D}), {0, 2, 1, 3}); };
  Value q = heads(0), k = heads(1), v = heads(2);
  Value p = b.softmax(b.causal_mask(b.mul(b.matmul(q, k, "scores", false, true), b.scalar(0.35f))), -1);
  Value y = b.reshape(b.transpose(b.matmul(p, v, "y"), {0, 2, 1, 3}), {B, T, C});
  b.output(b.mse(b.matmul(y, b.param("wo", {DType::f32, {C, C}}, ParamInit::normal(0.3)), "out"),
                 b.input("t", {DType::f32, {B, T, C}}), "loss"));
  auto g = b.build();
  ASSERT_OK(g);
  auto train = autograd::build_backward(*g);
  ASSERT_OK(train);
  auto values = test::seeded_values(train->graph, 8);
  ASSERT_OK(values);
  expect_fusion_keeps_bits(
      train->graph, *values, {"fuse_matmul_layout"},
      [&](const ir::Graph& plan, bool fuse) {
        size_t permuted = 0;
        for (int32_t id : plan.nodes_of(ir::Op::Matmul))
          permuted += plan.node(id).attrs.has("a_perm") || plan.node(id).attrs.has("b_perm") || plan.node(id).attrs.has("out_perm");
        EXPECT_EQ(plan.nodes_of(ir::Op::Transpose).empty(), fuse) << ir::print_graph(plan);
        EXPECT_EQ(permuted > 0, fuse);
      },
      "head split");
  // A perm that is not one, or an out_perm that moves the last axis, does not verify.
  for (const char* attrs : {"a_perm=[0, 0, 1]", "out_perm=[0, 2, 1]", "b_perm=[0, 1]"}) {
    const std::string text = std::string("graph g {\n %a: f32[2,4,8] = input()\n %w: f32[2,8,3] = input()\n") +
                             " %y = matmul(%a, %w) {" + attrs + "}\n return %y\n}\n";
    auto bad = ir::parse_graph(text, "test");
    EXPECT_FALSE(bad.is_ok()) << attrs;
  }
}

// Constant weights packed once when the plan is made (pack_matmul_weights): the bits of the
// unpacked products on every ISA and thread count (an ISA other than the plan's reads them
// unpacked); a weight two matmuls read is packed once; one read another way or transposed
// stays as it is. Decode-sized products read their packed weight in place too (one and four
// rows, 160 columns: the wide or half tiles and a single panel, over two K blocks).
TEST(Passes, PackedWeightsKeepTheBits) {
  ModelBuilder b("packed");
  Value x = b.input("x", {DType::f32, {3, 40, 48}});
  Value t = b.input("t", {DType::f32, {4, 64}});
  auto weight = [&](const char* name, Shape s, uint64_t seed) {
    Tensor w = Tensor::zeros(DType::f32, s);
    fill_normal(w, seed, 0, 0.0f, 0.3f);
    return b.constant(name, w);
  };
  // K = 384: two K blocks of the AVX-512 blocking and a short one of AVX2's
  Value w1 = weight("w1", {48, 384}, 1), w2 = weight("w2", {384, 384}, 2), wt = weight("wt", {32, 384}, 3), wo = weight("wo", {64, 32}, 4);
  Value h = b.gelu(b.add(b.matmul(x, w1, "fc1"), weight("bias", {384}, 5)));
  Value y = b.matmul(b.matmul(h, w2, "fc2a"), w2, "fc2b");  // one weight, two readers
  Value z = b.matmul(y, wt, "tb", false, true);             // transposed: stays
  Value d = b.matmul(t, wo, "small");                       // wo is also read by a mul: stays
  Value t1 = b.input("t1", {DType::f32, {1, 384}}), t4 = b.input("t4", {DType::f32, {4, 384}});
  Value wd = weight("wd", {384, 160}, 6);
  b.output(b.matmul(t1, wd, "decode1"));
  b.output(b.matmul(t4, wd, "decode4"));
  b.output(z);
  b.output(d);
  b.output(b.mul(wo, b.input("s", {DType::f32, {64, 32}})));  // wo is also read by a mul: stays
  auto g = b.build();
  ASSERT_OK(g);
  auto values = test::seeded_values(*g, 9);
  ASSERT_OK(values);
  expect_fusion_keeps_bits(
      *g, *values, {"pack_matmul_weights"},
      [&](const ir::Graph& plan, bool fuse) {
        std::set<std::string> packed;  // fc1 carries its GELU epilogue, and the GELU's name
        for (const ir::Node& n : plan.nodes)
          if (n.op == ir::Op::Matmul && n.attrs.has("b_packed")) packed.insert(n.name.starts_with("gelu") ? "fc1" : n.name);
        std::set<std::string> want;
        if (fuse) want = {"fc1", "fc2a", "fc2b"};
        if (fuse && cpu::matmul_active_isa() != cpu::MatmulIsa::kScalar) want.insert({"decode1", "decode4"});
        EXPECT_EQ(packed, want);
      },
      "packed weights");
}

// store_weights_packed (inference's f32 weights in the GEMM's layout): the named params' matmuls
// read them as b_packed and the params are frozen; a param read any other way, or not a whole
// number of panels wide, is refused naming it.
TEST(Passes, StoringWeightsPackedMarksTheirReadersAndRefusesOtherReads) {
  auto graph = [](bool transposed) {
    ModelBuilder b("stored");
    Value x = b.input("x", {DType::f32, {2, 32}});
    Value w = b.param("w", {DType::f32, {32, 64}});
    Value v = b.param("v", {DType::f32, {64, 48}});
    Value h = b.matmul(x, w, "mm");
    b.output(b.matmul(h, v, "mv"));
    if (transposed) b.output(b.matmul(h, w, "tb", false, true));
    return b.build();
  };
  auto g = graph(false);
  ASSERT_OK(g);
  auto packed = passes::store_weights_packed(*g, {{"w", {16, 32}}});
  ASSERT_OK(packed);
  for (const ir::Node& n : packed->nodes) {
    if (n.name == "mm") {
      auto layout = n.attrs.get_ints("b_packed");
      ASSERT_OK(layout);
      EXPECT_EQ(*layout, (std::vector<int64_t>{16, 32}));
    }
    if (n.name == "mv") {
      EXPECT_FALSE(n.attrs.has("b_packed"));
    }
    if (n.name == "w") {
      EXPECT_EQ(*n.attrs.get_int("trainable", 1), 0);
    }
  }
  EXPECT_ERROR_CONTAINS(passes::store_weights_packed(*g, {{"v", {16, 32}}}),
                        "param 'v' (f32[64,48]) cannot be stored in panels of 32 columns");
  auto t = graph(true);
  ASSERT_OK(t);
  EXPECT_ERROR_CONTAINS(passes::store_weights_packed(*t, {{"w", {16, 32}}}),
                        "param 'w' is stored packed but read other than as a matmul's plain weight");
}

// untie_transposed_weights: a param a matmul reads transposed (a tied output embedding) gets one
// frozen transposed copy that every such matmul reads plainly, with the same bits; its other
// reads and a constant read transposed stay as they are.
TEST(Passes, UntyingATransposedWeightReadsACopyWithTheSameBits) {
  ModelBuilder b("tied");
  Value ids = b.input("ids", {DType::i32, {2, 5}});
  Value wte = b.param("wte", {DType::f32, {11, 16}});
  Value x = b.embedding(wte, ids, "emb");
  Tensor c = Tensor::zeros(DType::f32, {7, 16});
  fill_normal(c, 4, 0, 0.0f, 1.0f);
  b.output(b.matmul(x, wte, "head", false, true));
  b.output(b.matmul(b.matmul(x, wte, "again", false, true), wte, "plain"));
  b.output(b.matmul(x, b.constant("c", c), "const", false, true));
  auto g = b.build();
  ASSERT_OK(g);
  std::vector<std::pair<std::string, std::string>> copies;
  auto untied = passes::untie_transposed_weights(*g, &copies);
  ASSERT_OK(untied);
  ASSERT_EQ(copies, (std::vector<std::pair<std::string, std::string>>{{"wte.t", "wte"}}));
  const int32_t copy = untied->find("wte.t");
  ASSERT_GE(copy, 0);
  EXPECT_EQ(untied->node(copy).type.shape, (Shape{16, 11}));
  EXPECT_EQ(*untied->node(copy).attrs.get_int("trainable", 1), 0);
  for (const ir::Node& n : untied->nodes) {
    if (n.name != "head" && n.name != "again" && n.name != "plain" && n.name != "const") continue;
    const bool read_copy = n.name == "head" || n.name == "again";
    EXPECT_EQ(n.inputs[1] == copy, read_copy) << n.name;
    EXPECT_EQ(*n.attrs.get_int("transpose_b", 0), n.name == "const" ? 1 : 0) << n.name;
  }
  auto values = test::seeded_values(*g, 3);
  ASSERT_OK(values);
  Bindings with_copy = *values;
  const Tensor& w = with_copy.at("wte");
  Tensor t = Tensor::zeros(DType::f32, {16, 11});
  for (int64_t r = 0; r < 11; ++r)
    for (int64_t k = 0; k < 16; ++k) t.data<float>()[k * 11 + r] = w.data<float>()[r * 16 + k];
  with_copy["wte.t"] = t;
  Runtime rt(make_cpu_backend());
  auto p0 = rt.compile(*g);
  auto p1 = rt.compile(*untied);
  ASSERT_OK(p0);
  ASSERT_OK(p1);
  auto want = rt.run(**p0, *values);
  auto got = rt.run(**p1, with_copy);
  ASSERT_OK(want);
  ASSERT_OK(got);
  for (size_t i = 0; i < want->size(); ++i) EXPECT_TRUE((*want)[i].bitwise_equal((*got)[i])) << "output " << i;
}

// A graph moved into compile is the pipeline's own: the weight it packs is replaced, not kept
// beside its packed copy (only the test's handle holds the original afterwards), and the plan
// computes what the plan of a copy computes.
TEST(Passes, CompilingAMovedGraphHoldsEachPackedWeightOnce) {
  Tensor w = Tensor::zeros(DType::f32, {64, 96});
  fill_normal(w, 3, 0, 0.0f, 0.3f);
  ModelBuilder b("moved");
  Value x = b.input("x", {DType::f32, {40, 64}});
  b.output(b.matmul(x, b.constant("w", w), "mm"));
  auto g = b.build();
  ASSERT_OK(g);
  ir::Graph copy = *g;
  Runtime rt(make_cpu_backend());
  if (!rt.backend().capabilities().has("matmul.packed_b")) GTEST_SKIP() << "no packed weights on this backend";
  auto kept = rt.compile(copy);
  ASSERT_OK(kept);
  const long held_by_copy = w.use_count();  // the test, the copy and g
  copy = {};
  Runtime rt2(make_cpu_backend());
  auto moved = rt2.compile(std::move(*g));
  ASSERT_OK(moved);
  EXPECT_EQ(held_by_copy, 3);
  EXPECT_EQ(w.use_count(), 1);
  bool packed = false;
  for (const ir::Node& n : (*moved)->graph.nodes) packed = packed || (n.op == ir::Op::Matmul && n.attrs.has("b_packed"));
  EXPECT_TRUE(packed);
  Tensor in = Tensor::zeros(DType::f32, {40, 64});
  fill_normal(in, 4, 0, 0.0f, 1.0f);
  auto a = rt.run(**kept, {{"x", in}});
  auto c = rt2.run(**moved, {{"x", in}});
  ASSERT_OK(a);
  ASSERT_OK(c);
  EXPECT_TRUE((*a)[0].bitwise_equal((*c)[0]));
}

// fuse_elementwise: a tree of elementwise ops becomes one node with the bits of the unfused
// chain (every thread count); a value read twice, a graph output and a broadcast intermediate
// stay outside the tree; a bad program names the op.
TEST(Passes, FuseElementwiseFoldsTreesWithTheBitsOfTheUnfusedOps) {
  const ir::Graph g = parse_ir(R"(graph g {
  %x: f32[6,40] = input()
  %b: f32[40] = input()
  %s: f32[] = constant(0.7071)
  %h: f32[] = constant(0.5)
  %xb = add(%x, %b)
  %u = mul(%xb, %s)
  %e = erf(%u)
  %one: f32[] = constant(1.0)
  %e1 = add(%e, %one)
  %g1 = mul(%xb, %h)
  %gelu = mul(%g1, %e1)
  %t = tanh(%gelu)
  %twice = add(%t, %t)
  %row: f32[1,40] = input()
  %r2 = exp(%row)
  %wide = mul(%r2, %twice)
  return %wide, %gelu
})");
  auto fused = passes::run_pipeline(g, {});
  ASSERT_OK(fused);
  std::vector<const ir::Node*> nodes;
  for (const ir::Node& n : fused->nodes)
    if (n.op == ir::Op::FusedElementwise) nodes.push_back(&n);
  // %xb and %t are read twice and %gelu is an output: trees end there. %r2 ([1,40]) is a leaf of
  // %wide's tree.
  ASSERT_EQ(nodes.size(), 2u) << ir::print_graph(*fused);
  EXPECT_EQ(nodes[0]->name, "gelu");
  EXPECT_EQ(*nodes[0]->attrs.get_string("program", ""), "mul x0 x1; mul x0 x2; erf t1; add t2 x3; mul t0 t3");
  EXPECT_EQ(fused->node(nodes[0]->inputs[0]).name, "xb");
  EXPECT_EQ(nodes[1]->name, "wide");
  EXPECT_EQ(fused->node(nodes[1]->inputs[0]).name, "r2");
  auto in = random_inputs(g, 9);
  ASSERT_OK(in);
  std::vector<Tensor> first;
  for (bool fuse : {true, false})
    for (int threads : {1, 2}) {
      set_cpu_threads(threads);
      Runtime rt(make_cpu_backend());
      CompileOptions opts;
      if (!fuse) opts.pipeline.disabled = {"fuse_elementwise"};
      auto plan = rt.compile(g, opts);
      ASSERT_OK(plan);
      auto out = rt.run(**plan, *in);
      ASSERT_OK(out);
      if (first.empty()) first = *out;
      for (size_t i = 0; i < out->size(); ++i)
        EXPECT_TRUE(first[i].bitwise_equal((*out)[i])) << "output " << i << " fuse " << fuse << " threads " << threads;
    }
  set_cpu_threads(0);
  // The program round-trips through the text form, and a bad one is refused naming the op.
  auto text = ir::parse_graph(ir::print_graph(*fused));
  ASSERT_OK(text);
  EXPECT_EQ(ir::print_graph(*text), ir::print_graph(*fused));
  for (const char* bad : {"add x0 x9", "frob x0", "add x0", "exp t0", ""})
    EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::FusedElementwise, std::vector<TensorType>{{DType::f32, {2}}, {DType::f32, {2}}},
                                         ir::Attrs{{"program", std::string(bad)}}),
                          "fused_elementwise");
}

}  // namespace
}  // namespace volta
