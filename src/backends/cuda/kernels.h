// Launchers of the CUDA kernels (one .cu per op family, mirroring src/backends/cpu/ref_*.cpp).
// This header is shared by nvcc and the host compiler, so it holds only plain structs: the
// backend (cuda_backend.cpp) reads attributes and shapes and passes numbers here. Every launcher
// enqueues on `stream` and returns the launch error (cudaSuccess when the launch was accepted).
//
// Determinism: each output element is produced by one thread or one block whose reduction
// order depends only on the shapes (fixed block sizes, tree reductions in shared memory, no
// atomics), so results are bitwise identical from run to run.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace volta::cuda {

constexpr int kMaxRank = 8;

// An index walk over `dims` (row-major) with per-operand element strides (0 on broadcast dims).
struct StridedIndex {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[3][kMaxRank] = {};
};

// ---- elementwise.cu ----------------------------------------------------------------------
enum class BinaryOp : int { Add, Sub, Mul, Div };
enum class UnaryOp : int { Neg, Exp, Log, Sqrt, Tanh, Relu, GeluErf, GeluTanh, Silu, Sigmoid };
// out[i] = x[off0] op y[off1] over idx (strides[0] for x, strides[1] for y); same_shape skips
// the index arithmetic when both operands are already out-shaped.
cudaError_t launch_binary(BinaryOp op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx,
                          bool same_shape, cudaStream_t stream);
cudaError_t launch_unary(UnaryOp op, const float* x, float* out, int64_t n, cudaStream_t stream);

// ---- matmul.cu -----------------------------------------------------------------------------
struct MatmulDesc {
  int64_t M = 0, N = 0, K = 0;
  int64_t a_m = 0, a_k = 0, b_k = 0, b_n = 0;  // element strides of A(m, k), B(k, n) in one matrix
  int64_t batch = 1;                           // product of the output batch dims
  StridedIndex batch_index;                    // output batch dims; strides[0] A, [1] B (elements)
};
cudaError_t launch_matmul(const float* a, const float* b, float* out, const MatmulDesc& d, cudaStream_t stream);

// ---- softmax.cu ----------------------------------------------------------------------------
// Softmax / log_softmax of scale * x over the middle axis of [outer, n, inner]; with `causal`,
// entries k > (o % rows) + offset of outer row o are left out (exactly 0 / -inf).
struct SoftmaxDesc {
  int64_t outer = 0, n = 0, inner = 1;
  double scale = 1.0;
  bool causal = false;
  int64_t rows = 1, offset = 0;
  bool as_log = false;
};
cudaError_t launch_softmax(const float* x, float* out, const SoftmaxDesc& d, cudaStream_t stream);

// ---- norm.cu ------------------------------------------------------------------------------
// layer_norm (center = true, beta may be null) or rms_norm of `rows` rows of length D.
cudaError_t launch_norm(const float* x, const float* gamma, const float* beta, float* out, int64_t rows, int64_t D,
                        double eps, bool center, cudaStream_t stream);

// ---- select.cu -----------------------------------------------------------------------------
cudaError_t launch_causal_mask(const float* x, float* out, int64_t mats, int64_t R, int64_t C, int64_t offset,
                               float fill, cudaStream_t stream);

// ---- layout.cu -----------------------------------------------------------------------------
// out[n] = x[off0] for the out-shaped walk idx (strides[0] into x); elements of 4 or 8 bytes.
cudaError_t launch_permute(const void* x, void* out, int64_t n, int elem_bytes, const StridedIndex& idx,
                           cudaStream_t stream);
// out row i = table row ids[i]; ids were range-checked on the host. Rows are `words` 4-byte words.
cudaError_t launch_gather_rows(const void* table, const void* ids, bool ids_i64, void* out, int64_t n_ids,
                               int64_t words, cudaStream_t stream);

}  // namespace volta::cuda
