// The CUDA backend's stateless ops, one function per op (or pair of ops), by family: each reads
// the node's attributes and shapes on the host, hands plain numbers to the launchers of
// kernels.h and queues the work on `stream`. The backend (cuda_backend.cpp) keeps what has state:
// cuBLAS, the index checks, recordings.
#pragma once

#include <span>

#include "backends/cuda/kernels.h"
#include "volta/backend.h"

namespace volta::cuda::ops {

Status reshape(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status transpose(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status slice(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status concat(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status pad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status broadcast(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status cache_write(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status grad_norm(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace, cudaStream_t stream);
Status optimizer_update(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status increment(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status gelu(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status norm(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool center, cudaStream_t stream);
Status causal_mask(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status relu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status silu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status gelu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status softmax_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status norm_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool center, cudaStream_t stream);
Status rope(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
// tensor_cores: the run-to-run variants (launch_attention_run_to_run, launch_attention_grad_run_to_run).
Status attention(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace, cudaStream_t stream,
                 bool tensor_cores = false);
Status swiglu(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status binary(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status unary(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status matmul(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream);
Status softmax(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool as_log, cudaStream_t stream);
Status reduce(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, ReduceOp op, cudaStream_t stream);

}  // namespace volta::cuda::ops
