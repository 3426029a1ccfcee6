// The run-to-run attention kernels on a GPU (they skip without one): the tensor-core kernels
// (cuda.attention_tf32x3) take the groups whose operands are finite, the f32 kernels the groups
// with a nan or infinity, in one call, and both agree with the reference kernels. The op-test
// harness's special values reach every group, so there every group takes the f32 kernels.
#include <cmath>

#include "ops/node_runner.h"
#include "test_util.h"
#include "volta/rng.h"

namespace volta {
namespace {

TEST(CudaAttention, TensorCoreGroupsBesideGroupsWithNanOrInfinity) {
  auto cuda = make_cuda_backend();
  if (!cuda.is_ok()) GTEST_SKIP() << "no CUDA device: " << cuda.status().message();
  auto ref = test::make_reference_backend();
  // 4 groups, two row blocks, heads 64 wide; then 160 groups, whose 640 row blocks of the f32
  // launch after the tensor cores take a second turn of its 512-block grid (the last groups' do).
  for (const auto& [G, op] : {std::pair<int64_t, ir::Op>{4, ir::Op::Attention}, {4, ir::Op::AttentionGrad},
                              {160, ir::Op::Attention}, {160, ir::Op::AttentionGrad}}) {
    const Shape shape{1, G, 128, 64};
    const bool grad = op == ir::Op::AttentionGrad;
    std::vector<Tensor> in;
    for (int i = 0; i < (grad ? 4 : 3); ++i) {
      in.push_back(Tensor::zeros(DType::f32, shape));
      fill_normal(in.back(), 7, static_cast<uint64_t>(i), 0.0f, 1.0f);
    }
    const int64_t group = 128 * 64;
    in[2].data<float>()[(G - 3) * group + 100 * 64 + 3] = NAN;        // a value (a row after most queries: masked for them)
    in[1].data<float>()[(G - 2) * group + 5 * 64] = NAN;              // a key
    if (grad) in[3].data<float>()[(G - 1) * group + 7 * 64 + 1] = NAN;  // a row of dy
    std::vector<TensorType> types;
    for (const Tensor& t : in) types.push_back(t.type());
    auto node = test::make_node(op, types, ir::Attrs{{"scale", 0.125}, {"causal_offset", int64_t{0}}});
    ASSERT_OK(node);
    const ir::Graph g = test::node_graph(*node, types);
    ASSERT_EQ((*cuda)->kernel_info(g, g.nodes.back(), Determinism::RunToRun).variant, "cuda.attention_tf32x3");
    auto want = test::run_node(*ref, *node, in);
    auto got = test::run_node(**cuda, *node, in, Determinism::RunToRun);
    ASSERT_OK(want);
    ASSERT_OK(got);
    const float* w = want->data<float>();
    const float* x = got->data<float>();
    int64_t special = 0, finite_group0 = 0;
    double worst = 0;
    for (int64_t i = 0; i < want->numel(); ++i) {
      ASSERT_EQ(std::isnan(w[i]), std::isnan(x[i])) << ir::op_name(op) << " element " << i << ": " << x[i] << ", reference " << w[i];
      if (std::isnan(w[i])) {
        ++special;
        continue;
      }
      if (std::isinf(w[i])) {
        ASSERT_EQ(w[i], x[i]) << ir::op_name(op) << " element " << i;
        ++special;
        continue;
      }
      if (i % (G * group) < group) ++finite_group0;  // group 0 of each part (dq, dk, dv)
      worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - w[i]) / (1.0 + std::fabs(w[i])));
    }
    EXPECT_GT(special, 0) << "the f32 kernels' groups keep the reference's nan and infinities";
    EXPECT_EQ(finite_group0, (grad ? 3 : 1) * group) << "group 0 is finite";
    EXPECT_LE(worst, 5e-5) << ir::op_name(op);
    std::printf("parity %s at run-to-run, tensor-core and f32 groups: max err %.3g, %lld special values\n", ir::op_name(op), worst,
                static_cast<long long>(special));
  }
}

// One key of group 1 holds +inf and query rows of that group score it at +inf (row 70) or -inf
// (the others from 64 on): the +inf row's probabilities are nan over its keys and exactly 0 past
// the causal mask, as the forward writes them, so the later keys' dv stays finite. The rows of
// 128 (tensor-core shapes) put the finite groups on the tensor cores and group 1 on the f32 tiled
// kernels at run-to-run, all groups on the tiled ones at strict; rows of 6 take the per-row kernels.
TEST(CudaAttention, GradientKeepsMaskedProbabilitiesZeroBesideAnInfiniteScore) {
  auto cuda = make_cuda_backend();
  if (!cuda.is_ok()) GTEST_SKIP() << "no CUDA device: " << cuda.status().message();
  auto ref = test::make_reference_backend();
  for (const auto& [T, D] : {std::pair<int64_t, int64_t>{128, 64}, {6, 8}}) {
    const Shape shape{1, 2, T, D};
    std::vector<Tensor> in;
    for (int i = 0; i < 4; ++i) {
      in.push_back(Tensor::zeros(DType::f32, shape));
      fill_normal(in.back(), 8, static_cast<uint64_t>(i), 0.0f, 1.0f);
    }
    const int64_t group = T * D, key = T / 2, hot = key + T / 8;  // the +inf key, the row scoring it +inf
    in[1].data<float>()[group + key * D] = INFINITY;
    for (int64_t i = key; i < T; ++i) in[0].data<float>()[group + i * D] = i == hot ? 1.0f : -1.0f;
    std::vector<TensorType> types;
    for (const Tensor& t : in) types.push_back(t.type());
    auto node = test::make_node(ir::Op::AttentionGrad, types, ir::Attrs{{"scale", 0.125}, {"causal_offset", int64_t{0}}});
    ASSERT_OK(node);
    auto want = test::run_node(*ref, *node, in);
    ASSERT_OK(want);
    for (const Determinism level : {Determinism::Strict, Determinism::RunToRun}) {
      auto got = test::run_node(**cuda, *node, in, level);
      ASSERT_OK(got);
      const float *w = want->data<float>(), *x = got->data<float>();
      for (int64_t i = 0; i < want->numel(); ++i) {
        ASSERT_EQ(std::isnan(w[i]), std::isnan(x[i])) << "T " << T << " element " << i << ": " << x[i] << ", reference " << w[i];
        if (!std::isnan(w[i])) {
          ASSERT_NEAR(x[i], w[i], 5e-5 * (1.0 + std::fabs(w[i]))) << "T " << T << " element " << i;
        }
      }
      const float* dv = w + (2 * 2 + 1) * group;  // part 2 (dv), group 1
      for (int64_t j = hot + 1; j < T; ++j) ASSERT_TRUE(std::isfinite(dv[j * D])) << "dv of key " << j;
    }
  }
}

}  // namespace
}  // namespace volta
