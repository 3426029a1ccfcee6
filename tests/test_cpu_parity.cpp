// Every op the CPU backend runs with its own kernel, against the reference kernel, on the
// layouts its fast paths take and on ones that fall back (test-backend-ops style).
#include <cmath>
#include <limits>

#include "backends/cpu/kernels.h"
#include "test_util.h"
#include "volta/rng.h"

namespace volta {
namespace {

struct Case {
  ir::Op op;
  std::vector<Shape> inputs;
  ir::Attrs attrs;
  double tol;  // max |fast - ref| / (1 + |ref|)
};

void check(const Case& c, int threads) {
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
  ASSERT_OK(type);
  n.type = *type;
  auto want = cpu::evaluate_reference(n, in);
  ASSERT_OK(want);
  Tensor got = Tensor::zeros(n.type.dtype, n.type.shape);
  std::vector<TensorRef> refs;
  for (Tensor& t : in) refs.push_back({t.raw(), t.type()});
  ASSERT_OK(cpu::fast_kernel(c.op)(cpu::KernelArgs{n, refs, TensorRef{got.raw(), got.type()}, {}}));
  for (int64_t i = 0; i < got.numel(); ++i) {  // exact zeros stay exact (masked softmax entries)
    if (want->data<float>()[i] == 0.0f) {
      EXPECT_EQ(got.data<float>()[i], 0.0f) << ir::op_name(c.op) << " element " << i;
    }
  }
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double r = want->data<float>()[i], g = got.data<float>()[i];
    worst = std::max(worst, std::fabs(g - r) / (1.0 + std::fabs(r)));
  }
  EXPECT_LE(worst, c.tol) << ir::op_name(c.op) << " " << shape_to_string(c.inputs[0]) << " threads " << threads;
  set_cpu_threads(0);
}

TEST(CpuParity, FastKernelsMatchTheReference) {
  const std::vector<Case> cases = {
      {ir::Op::ReduceSum, {{4, 5, 6}}, {{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t{1}}}, 0.0},
      {ir::Op::ReduceSum, {{4, 5, 300}}, {{"axes", std::vector<int64_t>{0, 1}}}, 0.0},
      {ir::Op::ReduceSum, {{4, 5, 6}}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}}, 0.0},
      {ir::Op::ReduceSum, {{4, 5, 6}}, {{"axes", std::vector<int64_t>{0, 2}}}, 0.0},  // falls back
      {ir::Op::Softmax, {{7, 33}}, {{"axis", int64_t{-1}}}, 1e-6},
      {ir::Op::Softmax, {{7, 33}}, {{"axis", int64_t{0}}}, 1e-6},
      {ir::Op::Softmax, {{2, 40, 40}}, {{"axis", int64_t{-1}}}, 1e-6},  // below: with a causal mask
      {ir::Op::LogSoftmax, {{3, 4, 65}}, {{"axis", int64_t{2}}}, 1e-6},
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
      // Row-parallel forms of the reference kernels: bit for bit.
      {ir::Op::LayerNorm, {{5, 33, 24}, {24}, {24}}, {{"eps", 1e-5}}, 0.0},
      {ir::Op::LayerNorm, {{70, 16}, {16}}, {}, 0.0},
      {ir::Op::RmsNorm, {{70, 16}, {16}}, {}, 0.0},
      {ir::Op::LayerNormGrad, {{70, 16}, {16}, {70, 16}}, {}, 0.0},
      {ir::Op::RmsNormGrad, {{3, 40, 8}, {8}, {3, 40, 8}}, {}, 0.0},
  };
  for (const Case& c : cases)
    for (int threads : {1, 2}) check(c, threads);
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
