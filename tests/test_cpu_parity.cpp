// Every op the CPU backend runs with its own kernel, against the reference kernel, on the
// layouts its fast paths take and on ones that fall back (test-backend-ops style).
#include <cmath>
#include <limits>

#include "backends/cpu/kernels.h"
#include "test_util.h"
#include "volta/optim.h"
#include "volta/rng.h"

namespace volta {
namespace {

struct Case {
  ir::Op op;
  std::vector<Shape> inputs;
  ir::Attrs attrs;
  double tol;  // max |fast - ref| / (1 + |ref|)
};

// Runs c with `threads` threads; returns the fast kernel's output after comparing it with the
// reference kernel.
Tensor check(const Case& c, int threads) {
  set_cpu_threads(threads);
  std::vector<Tensor> in;
  std::vector<TensorType> types;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = Tensor::zeros(DType::f32, c.inputs[i]);
    fill_normal(t, 17, i, 0.0f, 2.0f);
    in.push_back(t);
    types.push_back(t.type());
  }
  ir::Node n;
  n.op = c.op;
  n.name = "n";
  n.attrs = c.attrs;
  auto type = ir::infer_type(c.op, types, c.attrs);
  EXPECT_TRUE(type.is_ok()) << test::message_of(type);
  if (!type.is_ok()) return Tensor{};
  n.type = *type;
  auto want = cpu::evaluate_reference(n, in);
  EXPECT_TRUE(want.is_ok()) << test::message_of(want);
  Tensor got = Tensor::zeros(n.type.dtype, n.type.shape);
  if (!want.is_ok()) return got;
  std::vector<TensorRef> refs;
  for (Tensor& t : in) refs.push_back({t.raw(), t.type()});
  const Status st = cpu::fast_kernel(c.op)(cpu::KernelArgs{n, refs, TensorRef{got.raw(), got.type()}, {}});
  EXPECT_TRUE(st.is_ok()) << test::message_of(st);
  for (int64_t i = 0; i < got.numel(); ++i) {  // exact zeros stay exact (masked softmax entries)
    if (want->data<float>()[i] == 0.0f) {
      EXPECT_EQ(got.data<float>()[i], 0.0f) << ir::op_name(c.op) << " element " << i;
    }
  }
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double r = want->data<float>()[i], g = got.data<float>()[i];
    EXPECT_EQ(std::isnan(r), std::isnan(g)) << ir::op_name(c.op) << " element " << i;
    worst = std::max(worst, std::fabs(g - r) / (1.0 + std::fabs(r)));
  }
  EXPECT_LE(worst, c.tol) << ir::op_name(c.op) << " " << shape_to_string(c.inputs[0]) << " threads " << threads;
  set_cpu_threads(0);
  return got;
}

TEST(CpuParity, FastKernelsMatchTheReference) {
  const std::vector<Case> cases = {
      {ir::Op::ReduceSum, {{4, 5, 6}}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t{1}}}, 2e-6},
      {ir::Op::ReduceSum, {{4, 5, 300}}, {{"axes", std::vector<int64_t>{0, 1}}}, 2e-6},
      {ir::Op::ReduceSum, {{4, 5, 6}}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}}, 2e-6},
      {ir::Op::ReduceSum, {{3, 1000}}, {{"axes", std::vector<int64_t>{1}}}, 5e-5},  // float sum of 1000 terms
      {ir::Op::ReduceSum, {{4, 5, 6}}, {{"axes", std::vector<int64_t>{0, 2}}}, 0.0},  // falls back
      {ir::Op::Softmax, {{7, 33}}, {{"axis", int64_t{-1}}}, 1e-6},
      {ir::Op::Softmax, {{7, 33}}, {{"axis", int64_t{0}}}, 1e-6},
      {ir::Op::Softmax, {{2, 40, 40}}, {{"axis", int64_t{-1}}}, 1e-6},  // below: with a causal mask
      {ir::Op::LogSoftmax, {{3, 4, 65}}, {{"axis", int64_t{2}}}, 1e-6},
      {ir::Op::Softmax, {{2, 40, 40}}, {{"axis", int64_t{-1}}, {"scale", 0.3}, {"causal_offset", int64_t{0}}}, 1e-6},
      {ir::Op::Softmax, {{3, 17, 20}}, {{"scale", 0.7}, {"causal_offset", int64_t{3}}}, 1e-6},
      {ir::Op::Softmax, {{3, 17, 20}}, {{"causal_offset", int64_t{-2}}}, 1e-6},  // first rows: nothing kept, nan
      {ir::Op::SoftmaxGrad, {{7, 33}, {7, 33}}, {{"axis", int64_t{-1}}, {"scale", 0.5}}, 2e-6},
      {ir::Op::SoftmaxGrad, {{7, 33}, {7, 33}}, {{"axis", int64_t{0}}}, 0.0},  // falls back
      {ir::Op::Gelu, {{3, 40000}}, {}, 1e-6},
      {ir::Op::Gelu, {{3, 1000}}, {{"approximate", std::string("tanh")}}, 1e-6},
      {ir::Op::GeluGrad, {{50000}, {50000}}, {}, 1e-6},
      {ir::Op::GeluGrad, {{999}, {999}}, {{"approximate", std::string("tanh")}}, 2e-6},  // f32 tanh of a cubic
      {ir::Op::Transpose, {{2, 3, 4, 5}}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, 0.0},
      {ir::Op::Transpose, {{2, 3, 4}}, {{"perm", std::vector<int64_t>{2, 0, 1}}}, 0.0},  // falls back
      {ir::Op::Add, {{6, 40000}, {6, 40000}}, {}, 1e-7},
      {ir::Op::Add, {{3, 5, 7}, {7}}, {}, 1e-7},
      {ir::Op::Sub, {{3, 5, 7}, {5, 7}}, {}, 1e-7},
      {ir::Op::Mul, {{3, 5, 7}, {}}, {}, 1e-7},
      {ir::Op::Div, {{3, 5, 7}, {3, 5, 7}}, {}, 1e-7},
      {ir::Op::Mul, {{3, 1, 7}, {3, 5, 7}}, {}, 1e-7},  // falls back
      {ir::Op::Matmul, {{3, 50, 20}, {20, 30}}, {}, 1e-5},
      {ir::Op::Matmul, {{3, 50, 20}, {20, 30}, {30}}, {{"activation", std::string("gelu")}}, 1e-5},
      {ir::Op::Matmul, {{2, 20, 7}, {30, 7}, {30}}, {{"transpose_b", int64_t{1}}, {"activation", std::string("relu")}}, 1e-5},
      {ir::Op::LayerNorm, {{5, 33, 24}, {24}, {24}}, {{"eps", 1e-5}}, 2e-6},
      {ir::Op::LayerNorm, {{70, 16}, {16}}, {}, 2e-6},
      {ir::Op::LayerNorm, {{9, 130}, {130}, {130}}, {}, 2e-6},
      {ir::Op::RmsNorm, {{70, 16}, {16}}, {}, 2e-6},
      {ir::Op::RmsNorm, {{9, 131}, {131}}, {}, 2e-6},
      {ir::Op::LayerNormGrad, {{70, 16}, {16}, {70, 16}}, {}, 2e-6},
      {ir::Op::LayerNormGrad, {{9, 130}, {130}, {9, 130}}, {}, 2e-6},
      {ir::Op::RmsNormGrad, {{3, 40, 8}, {8}, {3, 40, 8}}, {}, 2e-6},
      {ir::Op::RmsNormGrad, {{5, 129}, {129}, {5, 129}}, {}, 2e-6},
      {ir::Op::Attention, {{2, 4, 5, 32}, {2, 4, 7, 32}, {2, 4, 7, 32}}, {{"scale", 0.2}}, 2e-6},
      {ir::Op::Attention, {{3, 9, 8}, {3, 9, 8}, {3, 9, 5}}, {{"scale", 0.3}, {"causal_offset", int64_t{0}}}, 2e-6},
      {ir::Op::Attention, {{1, 4, 1, 32}, {1, 4, 20, 32}, {1, 4, 20, 32}, {1, 4, 1, 32}, {1, 4, 1, 32}},
       {{"scale", 0.17}, {"causal_offset", int64_t{20}}}, 2e-6},  // a decode step: cache + new position
      {ir::Op::Attention, {{2, 6, 3}, {2, 2, 3}, {2, 2, 19}, {2, 33, 3}, {2, 33, 19}}, {{"causal_offset", int64_t{-1}}}, 2e-6},
      {ir::Op::Attention, {{1, 4, 1, 32}, {1, 4, 64, 32}, {1, 4, 64, 32}, {1, 4, 1, 32}, {1, 4, 1, 32}},
       {{"scale", 0.17}, {"causal_offset", int64_t{20}}, {"prefix", int64_t{20}}}, 2e-6},  // the cache at full capacity
      // Many query rows, one key block: GEMMs per group, causal blocks skipping masked keys.
      {ir::Op::Attention, {{2, 3, 40, 16}, {2, 3, 40, 16}, {2, 3, 40, 21}}, {{"scale", 0.25}, {"causal_offset", int64_t{0}}}, 5e-6},
      {ir::Op::Attention, {{2, 37, 8}, {2, 50, 8}, {2, 50, 8}}, {{"causal_offset", int64_t{13}}}, 2e-6},
      {ir::Op::Attention, {{2, 20, 8}, {2, 20, 8}, {2, 20, 8}}, {{"causal_offset", int64_t{-3}}}, 5e-6},  // rows with no key
      {ir::Op::Attention, {{2, 12, 8}, {2, 30, 8}, {2, 30, 8}}, {{"scale", 0.5}, {"prefix", int64_t{17}}}, 2e-6},
      {ir::Op::AttentionGrad, {{2, 3, 40, 16}, {2, 3, 40, 16}, {2, 3, 40, 16}, {2, 3, 40, 16}},
       {{"scale", 0.25}, {"causal_offset", int64_t{0}}}, 1e-5},
      {ir::Op::AttentionGrad, {{3, 33, 8}, {3, 33, 8}, {3, 33, 8}, {3, 33, 8}}, {{"causal_offset", int64_t{5}}}, 1e-5},
      {ir::Op::AttentionGrad, {{2, 20, 5}, {2, 20, 5}, {2, 20, 5}, {2, 20, 5}}, {{"scale", 0.7}}, 1e-5},
      {ir::Op::AttentionGrad, {{1, 1, 4}, {1, 1, 4}, {1, 1, 4}, {1, 1, 4}}, {{"causal_offset", int64_t{0}}}, 1e-5},
      // Fused elementwise chains: the same double evaluation per step, so exactly the reference.
      {ir::Op::FusedElementwise, {{3, 5, 700}, {700}, {}}, {{"program", std::string("add x0 x1; mul t0 x2; erf t1; sub t2 x0")}}, 0.0},
      {ir::Op::FusedElementwise, {{3, 1, 7}, {5, 1}, {3, 5, 7}},
       {{"program", std::string("sub x0 x1; mul t0 t0; add t1 x2; tanh t2; sigmoid t3; silu x2; div t4 t5")}}, 0.0},
      {ir::Op::FusedElementwise, {{40000}, {40000}},
       {{"program", std::string("abs x0; sqrt t0; log t1; exp t2; neg t3; relu x1; sign t5; pow t0 x1; add t6 t7; add t8 t4")}}, 0.0},
  };
  for (const Case& c : cases) {
    const Tensor one = check(c, 1);
    for (int threads : {2, 3}) {
      const Tensor many = check(c, threads);
      EXPECT_TRUE(one.bitwise_equal(many))
          << ir::op_name(c.op) << " " << shape_to_string(c.inputs[0]) << ": threads 1 and " << threads << " differ";
    }
  }
}

// cross_entropy and its gradient: integer targets, with and without an ignored class.
TEST(CpuParity, CrossEntropyMatchesTheReference) {
  for (bool ignore : {false, true}) {
    Tensor logits = Tensor::zeros(DType::f32, {6, 50, 65});
    fill_normal(logits, 3, 0, 0.0f, 3.0f);
    Tensor targets = Tensor::zeros(DType::i32, {6, 50});
    for (int64_t i = 0; i < targets.numel(); ++i) targets.data<int32_t>()[i] = static_cast<int32_t>((i * 7) % 65);
    Tensor dy = Tensor::zeros(DType::f32, {});
    dy.data<float>()[0] = 0.75f;
    ir::Attrs attrs;
    if (ignore) attrs.set("ignore_index", int64_t{7});
    for (ir::Op op : {ir::Op::CrossEntropy, ir::Op::CrossEntropyGrad}) {
      std::vector<Tensor> in = {logits, targets};
      if (op == ir::Op::CrossEntropyGrad) in.push_back(dy);
      ir::Node n;
      n.op = op;
      n.name = "ce";
      n.attrs = attrs;
      n.type = op == ir::Op::CrossEntropy ? TensorType{DType::f32, {}} : logits.type();
      auto want = cpu::evaluate_reference(n, in);
      ASSERT_OK(want);
      std::vector<TensorRef> refs;
      for (Tensor& t : in) refs.push_back({t.raw(), t.type()});
      std::vector<Tensor> outs;
      for (int threads : {1, 2}) {
        set_cpu_threads(threads);
        Tensor got = Tensor::zeros(n.type.dtype, n.type.shape);
        ASSERT_OK(cpu::fast_kernel(op)(cpu::KernelArgs{n, refs, TensorRef{got.raw(), got.type()}, {}}));
        for (int64_t i = 0; i < got.numel(); ++i)
          EXPECT_NEAR(got.data<float>()[i], want->data<float>()[i], 2e-6 * (1.0 + std::fabs(want->data<float>()[i])))
              << ir::op_name(op) << " element " << i;
        outs.push_back(got);
      }
      set_cpu_threads(0);
      EXPECT_TRUE(outs[0].bitwise_equal(outs[1])) << ir::op_name(op);
    }
  }
}

// The backend's float optimizer updates against the double reference, over many steps.
TEST(CpuParity, OptimizerUpdatesMatchTheReference) {
  for (optim::Kind kind : {optim::Kind::Sgd, optim::Kind::Adam, optim::Kind::AdamW}) {
    const int64_t n = 40000;
    Tensor p_fast = Tensor::zeros(DType::f32, {n}), g = Tensor::zeros(DType::f32, {n});
    fill_normal(p_fast, 9, 0, 0.0f, 1.0f);
    Tensor p_ref = p_fast.clone();
    const int slots = kind == optim::Kind::Sgd ? 1 : 2;
    std::vector<Tensor> s_fast, s_ref;
    for (int i = 0; i < slots; ++i) s_fast.push_back(Tensor::zeros(DType::f32, {n})), s_ref.push_back(Tensor::zeros(DType::f32, {n}));
    auto refs = [](std::vector<Tensor>& ts) {
      std::vector<TensorRef> r;
      for (Tensor& t : ts) r.push_back({t.raw(), t.type()});
      return r;
    };
    auto rf = refs(s_fast), rr = refs(s_ref);
    for (int64_t step = 1; step <= 5; ++step) {
      fill_normal(g, 10, static_cast<uint64_t>(step), 0.0f, 0.5f);
      const optim::UpdateStep u{kind, 1e-2, 0.9, 0.99, 1e-8, 0.9, 0.1, step, 0.8};
      const TensorRef gr{g.raw(), g.type()};
      ASSERT_OK(cpu::fast_optimizer_update(u, TensorRef{p_fast.raw(), p_fast.type()}, gr, rf));
      ASSERT_OK(cpu::optimizer_update(u, TensorRef{p_ref.raw(), p_ref.type()}, gr, rr));
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p_fast.data<float>()[i], p_ref.data<float>()[i], 1e-6) << i;
  }
  Tensor x = Tensor::zeros(DType::f32, {100003});
  fill_normal(x, 11, 0, 0.0f, 1.0f);
  const TensorRef xr{x.raw(), x.type()};
  EXPECT_NEAR(cpu::fast_sum_of_squares(xr), cpu::sum_of_squares(xr), 1e-5 * cpu::sum_of_squares(xr));
}

TEST(CpuParity, MaskedSoftmaxKeepsExactZeros) {
  Tensor x = Tensor::zeros(DType::f32, {3, 20, 20});
  fill_normal(x, 5, 5, 0.0f, 3.0f);
  for (int64_t m = 0; m < 3; ++m)
    for (int64_t i = 0; i < 20; ++i)
      for (int64_t j = i + 1; j < 20; ++j) x.data<float>()[(m * 20 + i) * 20 + j] = -std::numeric_limits<float>::infinity();
  ir::Node n;
  n.op = ir::Op::Softmax;
  n.name = "p";
  n.type = x.type();
  auto want = cpu::evaluate_reference(n, std::vector<Tensor>{x});
  ASSERT_OK(want);
  Tensor got = Tensor::zeros(DType::f32, {3, 20, 20});
  const TensorRef in[1] = {{x.raw(), x.type()}};
  ASSERT_OK(cpu::fast_kernel(ir::Op::Softmax)(cpu::KernelArgs{n, in, TensorRef{got.raw(), got.type()}, {}}));
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (want->data<float>()[i] == 0.0f) {
      EXPECT_EQ(got.data<float>()[i], 0.0f) << i;
    }
    EXPECT_NEAR(got.data<float>()[i], want->data<float>()[i], 1e-6) << i;
  }
}

}  // namespace
}  // namespace volta
