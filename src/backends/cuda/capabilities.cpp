#include "backends/cuda/capabilities.h"

namespace volta::cuda {

Capabilities capabilities() {
  Capabilities caps;
  using ir::Op;
  caps.ops = {Op::Matmul,  Op::Add,     Op::Sub,        Op::Mul,       Op::Div,        Op::Neg,
              Op::Exp,     Op::Log,     Op::Sqrt,       Op::Tanh,      Op::Relu,       Op::Gelu,
              Op::Silu,    Op::Sigmoid, Op::Softmax,    Op::LogSoftmax, Op::LayerNorm, Op::RmsNorm,
              Op::Embedding, Op::Reshape, Op::Transpose, Op::Slice,    Op::Concat,     Op::CausalMask,
              Op::Pad,     Op::Broadcast, Op::ReduceSum, Op::ReduceMean, Op::ReduceMax,
              // the backward ops autograd writes for TinyLM
              Op::ReluGrad, Op::GeluGrad, Op::SoftmaxGrad, Op::LayerNormGrad, Op::RmsNormGrad, Op::EmbeddingGrad,
              Op::CrossEntropy, Op::CrossEntropyGrad,
              // the training step's tail on the model's state
              Op::GradNorm, Op::OptimizerUpdate, Op::Increment,
              // inference on the session's KV cache
              Op::CacheWrite};
  caps.dtypes = {DType::f32, DType::i32, DType::i64, DType::f64};
  caps.determinism = DeterminismLevel::Bitwise;
  return caps;
}

}  // namespace volta::cuda
