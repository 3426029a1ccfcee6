// Which kernel the CUDA backend runs for a node at each determinism level (capabilities.cpp's
// kernel_info): host-side, so these run on any machine.
#include "backends/cuda/capabilities.h"
#include "ops/node_runner.h"
#include "test_util.h"

namespace volta {
namespace {

// Below strict a matmul runs cuBLAS (run-to-run) where one strided-batched SGEMM covers its
// batch dims; at strict, or for a batch only partly broadcast, Volta's own kernel.
TEST(CudaCapabilities, CublasMatmulBelowStrictWhereOneStridedGemmCoversIt) {
  auto variant = [](const Shape& a, const Shape& b, Determinism level, int64_t transpose_b = 0) {
    ir::Attrs attrs;
    if (transpose_b) attrs.set("transpose_b", transpose_b);
    auto n = test::make_node(ir::Op::Matmul, {{DType::f32, a}, {DType::f32, b}}, attrs);
    EXPECT_TRUE(n.is_ok()) << n.status().message();
    const ir::Graph g = test::node_graph(*n, {{DType::f32, a}, {DType::f32, b}});
    const KernelInfo k = cuda::kernel_info(g, g.nodes.back(), level);
    EXPECT_EQ(k.level, k.variant == "cuda" ? Determinism::Strict : Determinism::RunToRun);
    return k.variant;
  };
  EXPECT_EQ(variant({4, 5}, {5, 6}, Determinism::Strict), "cuda");
  EXPECT_EQ(variant({4, 5}, {5, 6}, Determinism::RunToRun), "cuda.cublas");
  EXPECT_EQ(variant({4, 5}, {5, 6}, Determinism::Off), "cuda.cublas");
  EXPECT_EQ(variant({2, 3, 4, 5}, {5, 6}, Determinism::RunToRun), "cuda.cublas");               // b broadcast
  EXPECT_EQ(variant({2, 3, 4, 5}, {2, 3, 6, 5}, Determinism::RunToRun, 1), "cuda.cublas");      // attention's scores
  EXPECT_EQ(variant({2, 3, 4, 5}, {3, 5, 6}, Determinism::RunToRun), "cuda");                   // b partly broadcast
  EXPECT_EQ(variant({0, 5}, {5, 6}, Determinism::RunToRun), "cuda");                            // empty
}

// Below strict a self-attention of q, k, v and its gradient run on tensor cores in 3xTF32
// (cuda.attention_tf32x3) where its rows are a multiple of 64, its keys as many and its heads 64
// wide, plain or packed, with a causal mask at offset 0 or none; anything else, and anything at
// strict, runs the f32 kernels ("cuda").
TEST(CudaCapabilities, TensorCoreAttentionBelowStrictWhereTheShapeFits) {
  auto kernel = [](ir::Op op, const std::vector<Shape>& shapes, const ir::Attrs& attrs, Determinism level) {
    std::vector<TensorType> in;
    for (const Shape& s : shapes) in.push_back({DType::f32, s});
    auto n = test::make_node(op, in, attrs);
    EXPECT_TRUE(n.is_ok()) << n.status().message();
    const ir::Graph g = test::node_graph(*n, in);
    const KernelInfo k = cuda::kernel_info(g, g.nodes.back(), level);
    EXPECT_EQ(k.level, k.variant == "cuda" ? Determinism::Strict : Determinism::RunToRun);
    return k.variant;
  };
  auto variant = [&](const std::vector<Shape>& shapes, const ir::Attrs& attrs, Determinism level) {
    return kernel(ir::Op::Attention, shapes, attrs, level);
  };
  auto grad = [&](const std::vector<Shape>& shapes, const ir::Attrs& attrs, Determinism level) {
    return kernel(ir::Op::AttentionGrad, shapes, attrs, level);
  };
  ir::Attrs causal;
  causal.set("scale", 0.125);
  causal.set("causal_offset", int64_t{0});
  ir::Attrs open;
  open.set("scale", 0.125);
  ir::Attrs packed = causal;
  packed.set("packed_heads", int64_t{6});
  const Shape q{2, 3, 128, 64};
  EXPECT_EQ(variant({q, q, q}, causal, Determinism::Strict), "cuda");
  EXPECT_EQ(variant({q, q, q}, causal, Determinism::RunToRun), "cuda.attention_tf32x3");
  EXPECT_EQ(variant({q, q, q}, open, Determinism::Off), "cuda.attention_tf32x3");
  EXPECT_EQ(variant({{4, 256, 1152}, {4, 256, 1152}, {4, 256, 1152}}, packed, Determinism::RunToRun), "cuda.attention_tf32x3");
  EXPECT_EQ(variant({{4, 256, 1152}, {4, 256, 1152}, {4, 256, 1152}}, packed, Determinism::Strict), "cuda");
  EXPECT_EQ(variant({{2, 3, 96, 64}, {2, 3, 96, 64}, {2, 3, 96, 64}}, causal, Determinism::RunToRun), "cuda");  // rows not a multiple of 64
  EXPECT_EQ(variant({{2, 3, 128, 32}, {2, 3, 128, 32}, {2, 3, 128, 32}}, causal, Determinism::RunToRun), "cuda");  // heads 32 wide
  EXPECT_EQ(variant({q, q, {2, 3, 128, 32}}, causal, Determinism::RunToRun), "cuda");  // values 32 wide
  EXPECT_EQ(variant({{2, 3, 64, 64}, q, q}, causal, Determinism::RunToRun), "cuda");  // fewer rows than keys
  ir::Attrs shifted = causal;
  shifted.set("causal_offset", int64_t{64});
  EXPECT_EQ(variant({q, q, q}, shifted, Determinism::RunToRun), "cuda");
  ir::Attrs prefix = causal;
  prefix.set("prefix", int64_t{64});
  EXPECT_EQ(variant({{2, 3, 64, 64}, q, q}, prefix, Determinism::RunToRun), "cuda");  // a cache read in place
  EXPECT_EQ(variant({q, q, q, {2, 3, 64, 64}, {2, 3, 64, 64}}, causal, Determinism::RunToRun), "cuda");  // k2, v2
  // The gradient (q, k, v, dy), by the same rule; the stored-probabilities form keeps its kernels.
  EXPECT_EQ(grad({q, q, q, q}, causal, Determinism::Strict), "cuda");
  EXPECT_EQ(grad({q, q, q, q}, causal, Determinism::RunToRun), "cuda.attention_tf32x3");
  EXPECT_EQ(grad({q, q, q, q}, open, Determinism::RunToRun), "cuda.attention_tf32x3");
  EXPECT_EQ(grad({{4, 256, 1152}, {4, 256, 1152}, {4, 256, 1152}, {4, 256, 384}}, packed, Determinism::RunToRun),
            "cuda.attention_tf32x3");
  EXPECT_EQ(grad({{2, 3, 96, 64}, {2, 3, 96, 64}, {2, 3, 96, 64}, {2, 3, 96, 64}}, causal, Determinism::RunToRun), "cuda");
  EXPECT_EQ(grad({q, q, q, q}, shifted, Determinism::RunToRun), "cuda");
  EXPECT_EQ(grad({q, q, q, q, {2, 3, 128, 128}}, causal, Determinism::RunToRun), "cuda");  // stored probabilities
}

}  // namespace
}  // namespace volta
