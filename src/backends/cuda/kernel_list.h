// The ops with a CUDA kernel of their own, beside every op of ops.def's Unary and Binary
// categories (one elementwise template over ir/scalar_math.h). Plain host code: capabilities.cpp
// derives the backend's supported ops from it on any machine, and cuda_backend.cpp asserts at
// compile time that its kernel table holds exactly these ops.
#pragma once

#define VOLTA_CUDA_KERNELS(K)                                                                              \
  K(Matmul) K(Gelu) K(Softmax) K(LogSoftmax) K(LayerNorm) K(RmsNorm) K(CausalMask) K(Embedding) K(Reshape) \
  K(Transpose) K(Slice) K(Concat) K(Pad) K(Broadcast) K(ReduceSum) K(ReduceMean) K(ReduceMax)             \
  /* the backward ops autograd writes for TinyLM */                                                     \
  K(ReluGrad) K(GeluGrad) K(SoftmaxGrad) K(LayerNormGrad) K(RmsNormGrad) K(EmbeddingGrad) K(CrossEntropy) \
  K(CrossEntropyGrad)                                                                                   \
  /* the training step's tail on the model's state, and the KV cache */                                \
  K(GradNorm) K(OptimizerUpdate) K(Increment) K(CacheWrite)                                             \
  /* the llama variant's */                                                                             \
  K(Rope) K(SiluGrad) K(Swiglu) K(SwigluGrad)                                                           \
  /* fused attention and its gradient */                                                                \
  K(Attention) K(AttentionGrad)
