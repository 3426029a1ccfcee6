// What the CUDA backend can run. Plain host code, built with or without the toolkit, so
// planning checks (does TinyLM need an op without a kernel?) are testable on any machine.
#pragma once

#include <optional>

#include "volta/backend.h"

namespace volta::cuda {

// Ops with a CUDA kernel (src/backends/cuda/*.cu); planning refuses every other op by name.
Capabilities capabilities();
// The forms of supported ops the kernels refuse, named at plan time (Backend::check_node): an
// elementwise op on anything but f32; attention with an additive mask or zero_nan_probs.
Status check_node(const ir::Graph& g, const ir::Node& n);
// The kernel of node n (Backend::kernel_info). Volta's own kernels are strict: they reduce in
// a fixed order (no atomics, launch shapes fixed by the problem's shape, never by the device),
// so runs give identical bytes. Below strict a matmul that one strided-batched SGEMM covers runs
// cuBLAS ("cuda.cublas", index 1, run-to-run: blas.h), and a forward self-attention of the shapes
// tf32x3_attention_shape takes runs on tensor cores ("cuda.attention_tf32x3", index 2, run-to-run:
// attention_tf32x3.cu). Without a level: the strict choice.
KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n, Determinism level);
KernelInfo kernel_info(const ir::Node& n);
constexpr int kCublasMatmul = 1;
constexpr int kTf32x3Attention = 2;

// One strided-batched GEMM for a matmul of operands shaped a, b into out: the batch count and
// each operand's batch stride in elements (0: broadcast), when every batch dim of an operand is
// either all there or all broadcast and the dims fit cuBLAS.
struct GemmBatch {
  int64_t batch = 1, stride_a = 0, stride_b = 0;
};
std::optional<GemmBatch> gemm_batch(const Shape& a, const Shape& b, const Shape& out, bool trans_a);

// Workspace bytes the CUDA kernel of `n` needs (Backend::workspace_bytes): planning, and so the
// planned device peak, is computable without a device.
size_t workspace_bytes(const ir::Graph& g, const ir::Node& n);

}  // namespace volta::cuda
