#include "backends/cuda/capabilities.h"

#include "backends/cuda/workspace.h"

namespace volta::cuda {

Capabilities capabilities() {
  Capabilities caps;
  using ir::Op;
  // Every op of the Unary and Binary categories (one kernel template over ir/scalar_math.h),
  // then the ops with their own kernels.
  for (int i = 0; i < ir::kNumOps; ++i)
    if (ir::elementwise_arity(static_cast<Op>(i)) > 0) caps.ops.push_back(static_cast<Op>(i));
  caps.ops.insert(caps.ops.end(), {
              Op::Matmul, Op::Gelu, Op::Softmax,    Op::LogSoftmax, Op::LayerNorm, Op::RmsNorm,
              Op::Embedding, Op::Reshape, Op::Transpose, Op::Slice,    Op::Concat,     Op::CausalMask,
              Op::Pad,     Op::Broadcast, Op::ReduceSum, Op::ReduceMean, Op::ReduceMax,
              // the backward ops autograd writes for TinyLM
              Op::ReluGrad, Op::GeluGrad, Op::SoftmaxGrad, Op::LayerNormGrad, Op::RmsNormGrad, Op::EmbeddingGrad,
              Op::CrossEntropy, Op::CrossEntropyGrad,
              // the training step's tail on the model's state
              Op::GradNorm, Op::OptimizerUpdate, Op::Increment,
              // inference on the session's KV cache
              Op::CacheWrite});
  caps.dtypes = {DType::f32, DType::i32, DType::i64, DType::f64};
  caps.determinism = DeterminismLevel::Bitwise;
  return caps;
}

// Cross-entropy keeps one double per row for its fixed-order mean; grad_norm the chunk sums of
// each gradient and one sum per gradient.
size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) {
  if (n.op == ir::Op::CrossEntropy && n.inputs.size() == 2)
    return static_cast<size_t>(g.node(n.inputs[1]).type.numel()) * sizeof(double);
  if (n.op == ir::Op::GradNorm) {
    size_t words = n.inputs.size();
    for (int32_t in : n.inputs) words += static_cast<size_t>(squares_partials(g.node(in).type.numel()));
    return words * sizeof(double);
  }
  return 0;
}

}  // namespace volta::cuda
