// The CPU backend's matmul against the reference kernel, over edge shapes, transposes and
// broadcast batches.
#include <cmath>

#include "backends/cpu/kernels.h"
#include "test_util.h"
#include "volta/rng.h"

namespace volta {
namespace {

struct Case {
  Shape a, b;
  bool ta, tb;
};

void compare(const Case& c, uint64_t seed) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  if (c.ta) n.attrs.set("transpose_a", int64_t{1});
  if (c.tb) n.attrs.set("transpose_b", int64_t{1});
  Tensor a = Tensor::zeros(DType::f32, c.a), b = Tensor::zeros(DType::f32, c.b);
  fill_normal(a, seed, 1, 0.0f, 1.0f);
  fill_normal(b, seed, 2, 0.0f, 1.0f);
  auto type = ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a.type(), b.type()}, n.attrs);
  ASSERT_OK(type);
  n.type = *type;
  auto expected = cpu::evaluate_reference(n, std::vector<Tensor>{a, b});
  ASSERT_OK(expected);
  ir::Graph g;
  g.nodes = {ir::Node{0, "a", ir::Op::Input, {}, {}, a.type(), {}}, ir::Node{1, "b", ir::Op::Input, {}, {}, b.type(), {}}};
  n.id = 2;
  n.inputs = {0, 1};
  std::vector<std::byte> ws(cpu::matmul_workspace_bytes(g, n));
  const int64_t K = c.ta ? c.a[c.a.size() - 2] : c.a.back();
  for (int rep = 0; rep < 2; ++rep) {
    Tensor out = Tensor::zeros(DType::f32, n.type.shape);
    TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
    TensorRef o{out.raw(), out.type()};
    ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, o, ws}));
    double max_err = 0.0;
    for (int64_t i = 0; i < out.numel(); ++i)
      max_err = std::max(max_err, std::fabs(double(out.data<float>()[i]) - expected->data<float>()[i]));
    // f32 accumulation of K unit-variance products vs the double-accumulated oracle.
    EXPECT_LE(max_err, 1e-6 * (4.0 + static_cast<double>(K))) << shape_to_string(c.a) << " @ " << shape_to_string(c.b)
                                                               << " ta=" << c.ta << " tb=" << c.tb;
  }
}

TEST(CpuMatmul, MatchesReferenceOnEdgeShapes) {
  for (int64_t m : {1, 2, 5, 6, 7, 13, 17})
    for (int64_t n : {1, 3, 15, 16, 17, 33})
      for (int64_t k : {1, 2, 7, 16})
        for (int t = 0; t < 4; ++t) {
          bool ta = t & 1, tb = t & 2;
          compare({ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}, ta, tb}, static_cast<uint64_t>(m * 100 + n + k));
        }
}

TEST(CpuMatmul, MatchesReferenceOnModelShapes) {
  compare({{64, 128}, {128, 384}, false, false}, 1);
  compare({{128, 64}, {128, 257}, true, false}, 2);
  compare({{96, 129}, {65, 129}, false, true}, 3);
  compare({{2, 4, 16, 8}, {2, 4, 16, 8}, false, true}, 4);   // attention scores
  compare({{2, 1, 6, 5}, {3, 5, 7}, false, false}, 5);       // broadcast batch
  compare({{3, 9, 4}, {4, 18}, false, false}, 6);            // batched @ shared matrix
}

TEST(CpuMatmul, IsDeterministic) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  n.type = {DType::f32, {37, 45}};
  Tensor a = Tensor::zeros(DType::f32, {37, 131}), b = Tensor::zeros(DType::f32, {131, 45});
  fill_normal(a, 9, 1, 0.0f, 1.0f);
  fill_normal(b, 9, 2, 0.0f, 1.0f);
  Tensor o1 = Tensor::zeros(DType::f32, {37, 45}), o2 = Tensor::zeros(DType::f32, {37, 45});
  TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
  TensorRef r1{o1.raw(), o1.type()}, r2{o2.raw(), o2.type()};
  ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, r1, {}}));
  ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, r2, {}}));
  EXPECT_TRUE(o1.bitwise_equal(o2));
}

TEST(CpuMatmul, SameBitsForAnyThreadCount) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  n.type = {DType::f32, {3, 200, 70}};
  n.attrs.set("transpose_b", int64_t{1});
  Tensor a = Tensor::zeros(DType::f32, {3, 200, 90}), b = Tensor::zeros(DType::f32, {70, 90});
  fill_normal(a, 4, 1, 0.0f, 1.0f);
  fill_normal(b, 4, 2, 0.0f, 1.0f);
  std::vector<Tensor> outs;
  for (int threads : {1, 2, 3}) {
    set_cpu_threads(threads);
    Tensor o = Tensor::zeros(DType::f32, {3, 200, 70});
    std::vector<std::byte> ws(70 * 90 * 4);
    TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
    TensorRef r{o.raw(), o.type()};
    ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, r, ws}));
    outs.push_back(o);
  }
  set_cpu_threads(0);
  EXPECT_TRUE(outs[0].bitwise_equal(outs[1]));
  EXPECT_TRUE(outs[0].bitwise_equal(outs[2]));
}

}  // namespace
}  // namespace volta
