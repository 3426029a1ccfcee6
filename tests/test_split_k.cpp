// The CPU backend's run-to-run kernel, split-K for weight gradients (matmul_split_k.cpp): it
// matches the reference, repeats bit for bit at a fixed slice count, is the strict kernel at one
// thread, and planning chooses it only for weight-gradient products and only when the level asked
// for allows run-to-run.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "test_util.h"
#include "volta/plan.h"
#include "volta/rng.h"
#include "volta/runtime.h"
#include "volta/text.h"

namespace volta {
namespace {

Tensor normal(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::f32, s);
  fill_normal(t, seed, 1, 0.0f, 1.0f);
  return t;
}

// C = A^T @ B (A [K, M], B [K, N]) by the reference kernel, accumulated in double.
Tensor reference_weight_grad(const Tensor& a, const Tensor& b) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "dw";
  n.attrs.set("transpose_a", int64_t{1});
  n.type = {DType::f32, {a.shape()[1], b.shape()[1]}};
  auto out = cpu::evaluate_reference(n, std::vector<Tensor>{a, b});
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  return out.is_ok() ? *out : Tensor{};
}

Tensor split_k(const Tensor& a, const Tensor& b, int64_t parts) {
  const int64_t K = a.shape()[0], M = a.shape()[1], N = b.shape()[1];
  Tensor c = Tensor::zeros(DType::f32, {M, N});
  cpu::gemm_split_k(cpu::matmul_best_isa(), a.data<float>(), b.data<float>(), c.data<float>(), M, N, K, parts);
  return c;
}

TEST(SplitK, MatchesTheReferenceAndRepeatsBitwisePerSliceCount) {
  const std::vector<std::array<int64_t, 3>> shapes = {{768, 128, 65}, {777, 33, 70}, {256, 17, 5}, {1000, 96, 128}};
  for (const auto& [K, M, N] : shapes) {
    const Tensor a = normal({K, M}, static_cast<uint64_t>(K + M)), b = normal({K, N}, static_cast<uint64_t>(K + N));
    const Tensor expected = reference_weight_grad(a, b);
    const Tensor one = split_k(a, b, 1);
    Tensor strict = Tensor::zeros(DType::f32, {M, N});
    cpu::gemm(cpu::matmul_best_isa(), cpu::matmul_default_blocking(cpu::matmul_best_isa()), {a.data<float>(), 1, M},
              {b.data<float>(), N, 1}, strict.data<float>(), N, M, N, K);
    EXPECT_TRUE(one.bitwise_equal(strict)) << "one slice is the strict GEMM, K " << K;
    for (int64_t parts : {2, 3, 5}) {
      for (int threads : {1, 2}) {  // the slice count sets the bits, the threads running them do not
        set_cpu_threads(threads);
        const Tensor c = split_k(a, b, parts);
        EXPECT_TRUE(c.bitwise_equal(split_k(a, b, parts))) << "K " << K << " parts " << parts;
        double max_err = 0.0;
        for (int64_t i = 0; i < c.numel(); ++i)
          max_err = std::max(max_err, std::fabs(double(c.data<float>()[i]) - expected.data<float>()[i]));
        EXPECT_LE(max_err, 1e-6 * (4.0 + static_cast<double>(K))) << "K " << K << " parts " << parts;
        if (parts == 2) {
          EXPECT_FALSE(c.bitwise_equal(strict)) << "a split that changes no bit is no split, K " << K;
        }
      }
    }
  }
  set_cpu_threads(0);
}

// A weight gradient (x^T @ dy over all tokens), a forward product and a batched transposed one.
constexpr const char* kGraph = R"(graph grads {
  %x: f32[512,48] = input()
  %dy: f32[512,96] = input()
  %w: f32[48,96] = input()
  %q: f32[4,128,16] = input()
  %dw: f32[48,96] = matmul(%x, %dy) {transpose_a=1}
  %y: f32[512,96] = matmul(%x, %w)
  %dk: f32[4,16,16] = matmul(%q, %q) {transpose_a=1}
  return %dw, %y, %dk
})";

TEST(SplitK, PlanningChoosesItOnlyForWeightGradientsBelowStrict) {
  auto g = ir::parse_graph(kGraph);
  ASSERT_OK(g);
  const Bindings in = {{"x", normal({512, 48}, 1)}, {"dy", normal({512, 96}, 2)}, {"w", normal({48, 96}, 3)},
                       {"q", normal({4, 128, 16}, 4)}};
  set_cpu_threads(2);
  std::vector<std::vector<Tensor>> outs;
  for (Determinism level : {Determinism::Strict, Determinism::RunToRun, Determinism::Off}) {
    Runtime rt(make_cpu_backend(), level);
    auto p = rt.compile(*g);
    ASSERT_OK(p);
    for (int32_t id : (*p)->schedule) {
      const ir::Node& n = (*p)->graph.node(id);
      const KernelInfo& k = (*p)->kernels[static_cast<size_t>(id)];
      const bool split = level != Determinism::Strict && n.name == "dw";
      EXPECT_EQ(k.variant, split ? "cpu.split-k" : "cpu") << n.name << " at " << determinism_name(level);
      EXPECT_EQ(k.level, split ? Determinism::RunToRun : Determinism::Strict) << n.name;
    }
    const std::string report = plan::format_plan(**p);
    EXPECT_EQ(report.find("cpu.split-k") != std::string::npos, level != Determinism::Strict) << report;
    auto out = rt.run(**p, in);
    ASSERT_OK(out);
    auto again = rt.run(**p, in);
    ASSERT_OK(again);
    for (size_t i = 0; i < out->size(); ++i) EXPECT_TRUE((*out)[i].bitwise_equal((*again)[i])) << "run to run, output " << i;
    outs.push_back(*out);
  }
  EXPECT_FALSE(outs[1][0].bitwise_equal(outs[0][0]));  // dw: two slices at 2 threads
  EXPECT_TRUE(outs[1][0].bitwise_equal(outs[2][0]));
  for (size_t i = 1; i < 3; ++i) EXPECT_TRUE(outs[1][i].bitwise_equal(outs[0][i])) << "output " << i << " stays strict";
  set_cpu_threads(1);  // one thread, one slice: the strict kernel's bits
  Runtime one(make_cpu_backend(), Determinism::RunToRun);
  auto p = one.compile(*g);
  ASSERT_OK(p);
  auto out = one.run(**p, in);
  ASSERT_OK(out);
  EXPECT_TRUE((*out)[0].bitwise_equal(outs[0][0]));
  set_cpu_threads(0);
}

}  // namespace
}  // namespace volta
