// The CPU backend's optimizer kernels against the reference over several steps. Every op's
// kernel against its reference kernel, one step, is the op-test harness's job (tests/ops/).
#include <cmath>
#include <limits>

#include "backends/cpu/kernels.h"
#include "ops/node_runner.h"
#include "test_util.h"
#include "volta/optim.h"
#include "volta/rng.h"

namespace volta {
namespace {

// attention_grad where one key holds +inf: the query row whose score with it is +inf has nan
// probabilities over its keys, as the forward's softmax gives them, and exact zeros past the
// causal mask (the forward's masked entries), so the value gradient of a later key takes nothing
// from that row. The rows after it score -inf there and stay finite. The CPU kernel, the
// reference and the unfused backward agree on which elements are nan.
TEST(CpuParity, AttentionGradKeepsMaskedProbabilitiesZeroBesideAnInfiniteScore) {
  const int64_t T = 8, D = 4;
  std::vector<Tensor> in;
  for (int i = 0; i < 4; ++i) {
    in.push_back(Tensor::zeros(DType::f32, {1, 1, T, D}));
    fill_normal(in.back(), 12, static_cast<uint64_t>(i), 0.0f, 1.0f);
  }
  float* q = in[0].data<float>();
  for (int64_t i = 0; i < T; ++i) q[i * D] = i == 2 ? 1.0f : -1.0f;  // row 2 scores key 2 at +inf, later rows at -inf
  in[1].data<float>()[2 * D] = std::numeric_limits<float>::infinity();
  std::vector<TensorType> types;
  for (const Tensor& t : in) types.push_back(t.type());
  auto node = test::make_node(ir::Op::AttentionGrad, types, ir::Attrs{{"scale", 0.5}, {"causal_offset", int64_t{0}}});
  ASSERT_OK(node);
  auto cpu = make_cpu_backend();
  auto ref = test::make_reference_backend();
  auto want = test::run_node(*ref, *node, in);
  auto got = test::run_node(*cpu, *node, in);
  ASSERT_OK(want);
  ASSERT_OK(got);
  const float *w = want->data<float>(), *x = got->data<float>();
  for (int64_t i = 0; i < want->numel(); ++i) {
    ASSERT_EQ(std::isnan(w[i]), std::isnan(x[i])) << "element " << i << ": " << x[i] << ", reference " << w[i];
    if (!std::isnan(w[i])) {
      EXPECT_NEAR(x[i], w[i], 1e-5 * (1.0 + std::fabs(w[i]))) << i;
    }
  }
  const float* dv = w + 2 * T * D;
  for (int64_t j = 3; j < T; ++j)
    for (int64_t d = 0; d < D; ++d) EXPECT_TRUE(std::isfinite(dv[j * D + d])) << "dv of key " << j << ", " << d;
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

// silu's far negative tail (x < -80, where exp(x) is no longer a normal f32 but silu(x) and its
// derivative still are) in the kernels of silu_grad, swiglu and swiglu_grad against the reference.
TEST(CpuParity, SiluKernelsKeepTheFarNegativeTail) {
  const int64_t n = 64;
  std::vector<float> xs;
  for (int64_t i = 0; i < n; ++i) xs.push_back(-87.0f + 7.5f * static_cast<float>(i) / n);  // [-87, -79.5)
  auto run = [](ir::Op op, cpu::Kernel k, std::vector<Tensor> in, Shape out_shape) {
    ir::Node node;
    node.op = op;
    node.name = "t";
    node.type = TensorType{DType::f32, out_shape};
    Tensor out = Tensor::zeros(DType::f32, out_shape);
    std::vector<TensorRef> refs;
    for (Tensor& t : in) refs.push_back({t.raw(), t.type()});
    const TensorRef o{out.raw(), out.type()};
    const Status s = k(cpu::KernelArgs{node, refs, o, {}});
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return out;
  };
  auto expect_close = [](const Tensor& got, const Tensor& want, const char* what) {
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float g = got.data<float>()[i], w = want.data<float>()[i];
      ASSERT_GE(std::fabs(w), 1e-37f) << what << " " << i;  // a normal f32, so relative error counts
      EXPECT_NEAR(g / w, 1.0f, 1e-5f) << what << " element " << i << ": " << g << " vs " << w;
    }
  };
  const Tensor x = Tensor::from_f32({n}, xs), ones = Tensor::from_f32({n}, std::vector<float>(n, 1.0f));
  const auto ref = [](ir::Op op) { return cpu::kReferenceKernels[static_cast<size_t>(op)]; };
  expect_close(run(ir::Op::SiluGrad, cpu::silu_grad, {x, ones}, {n}), run(ir::Op::SiluGrad, ref(ir::Op::SiluGrad), {x, ones}, {n}),
               "silu_grad");
  std::vector<float> gate_up;  // rows [gate, up] with up = 1
  for (float v : xs) gate_up.insert(gate_up.end(), {v, 1.0f});
  const Tensor gu = Tensor::from_f32({n, 2}, gate_up);
  expect_close(run(ir::Op::Swiglu, cpu::swiglu, {gu}, {n, 1}), run(ir::Op::Swiglu, ref(ir::Op::Swiglu), {gu}, {n, 1}), "swiglu");
  const Tensor dy = Tensor::from_f32({n, 1}, std::vector<float>(n, 1.0f));
  const Tensor got = run(ir::Op::SwigluGrad, cpu::swiglu_grad, {gu, dy}, {n, 2});
  const Tensor want = run(ir::Op::SwigluGrad, ref(ir::Op::SwigluGrad), {gu, dy}, {n, 2});
  for (int64_t i = 0; i < n; ++i)  // the gate's gradient silu'(x) and the up's silu(x)
    for (int64_t j = 0; j < 2; ++j) {
      const float g = got.data<float>()[2 * i + j], w = want.data<float>()[2 * i + j];
      EXPECT_NEAR(g / w, 1.0f, 1e-5f) << "swiglu_grad " << i << "," << j << ": " << g << " vs " << w;
    }
}

}  // namespace
}  // namespace volta
