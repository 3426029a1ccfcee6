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

#include "backends/cuda/workspace.h"
#include "volta/op_id.h"

namespace volta::cuda {

constexpr int kMaxRank = 8;

// An index walk over `dims` (row-major) with per-operand element strides (0 on broadcast dims).
struct StridedIndex {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[3][kMaxRank] = {};
};

// ---- elementwise.cu -----------------------------------------------------------------------------
// Every op of category Binary (launch_binary) or Unary (launch_unary) of ops.def; another op is
// cudaErrorInvalidValue. out[i] = x[off0] op y[off1] over idx (strides[0] for x, strides[1] for
// y); same_shape skips the index arithmetic when both operands are already out-shaped.
cudaError_t launch_binary(ir::Op op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx,
                          bool same_shape, cudaStream_t stream);
cudaError_t launch_unary(ir::Op op, const float* x, float* out, int64_t n, cudaStream_t stream);

// ---- activation.cu ------------------------------------------------------------------------------
// Each element in double with the CPU reference's f32 roundings (ir/scalar_math.h).
cudaError_t launch_gelu(const float* x, float* out, int64_t n, bool tanh_form, cudaStream_t stream);
// x [rows, 2F] -> out [rows, F] = silu(gate) * up; with dy [rows, F], the gradient [rows, 2F].
cudaError_t launch_swiglu(const float* x, const float* dy, float* out, int64_t rows, int64_t F, cudaStream_t stream);

// out = x > 0 ? dy : 0
cudaError_t launch_relu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream);
// out = gelu'(x) * dy, erf form or tanh approximation, in double.
cudaError_t launch_gelu_grad(const float* x, const float* dy, float* out, int64_t n, bool tanh_form, cudaStream_t stream);
cudaError_t launch_silu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream);

// ---- softmax.cu ---------------------------------------------------------------------------------
// Softmax / log_softmax of scale * x over the middle axis of [outer, n, inner]; with `causal`,
// entries k > (o % rows) + offset of outer row o are left out (exactly 0 / -inf).
struct SoftmaxDesc {
  int64_t outer = 0, n = 0, inner = 1;
  double scale = 1.0;
  bool causal = false;
  int64_t rows = 1, offset = 0;
  bool as_log = false;
  const int32_t* position = nullptr;  // device i32 added to offset (clamped to [0, n]), or none
};
cudaError_t launch_softmax(const float* x, float* out, const SoftmaxDesc& d, cudaStream_t stream);
// Over the middle axis of [outer, n, inner]: out = scale * y * (dy - sum(dy * y)).
cudaError_t launch_softmax_grad(const float* y, const float* dy, float* out, int64_t outer, int64_t n, int64_t inner,
                                double scale, cudaStream_t stream);

// ---- norm.cu ------------------------------------------------------------------------------------
// layer_norm (center = true, beta may be null) or rms_norm of `rows` rows of length D.
cudaError_t launch_norm(const float* x, const float* gamma, const float* beta, float* out, int64_t rows, int64_t D,
                        double eps, bool center, cudaStream_t stream);
// dx of layer_norm (center) or rms_norm for `rows` rows of length D (gamma's gradient is a
// matmul-free reduction autograd writes separately).
cudaError_t launch_norm_grad(const float* x, const float* gamma, const float* dy, float* out, int64_t rows, int64_t D,
                             double eps, bool center, cudaStream_t stream);

// ---- loss.cu ------------------------------------------------------------------------------------
// Mean over counted rows of -log_softmax(logits[r])[t_r]; rows whose target is the ignore index
// (has_ignore) are skipped. `row_loss` is `rows` doubles of workspace. Targets were range-checked
// on the host, which also counted the rows; counted == 0 gives nan, as on the CPU.
cudaError_t launch_cross_entropy(const float* logits, const void* targets, bool targets_i64, int64_t rows, int64_t C,
                                 bool has_ignore, int64_t ignore, int64_t counted, double* row_loss, float* out,
                                 cudaStream_t stream);
// d loss / d logits = dloss[0] / counted * (softmax(logits[r]) - onehot(t_r)); ignored rows 0.
cudaError_t launch_cross_entropy_grad(const float* logits, const void* targets, bool targets_i64, const float* dloss,
                                      int64_t rows, int64_t C, bool has_ignore, int64_t ignore, int64_t counted,
                                      float* out, cudaStream_t stream);

// ---- reduce.cu ----------------------------------------------------------------------------------
enum class ReduceOp : int { Sum, Mean, Max };
// One thread per output element walks its reduced elements in row-major order, accumulating
// in double (the CPU reference's order). kept: the output dims with the input's strides
// (strides[0]); reduced: the reduced dims with theirs. NaN propagates through max.
cudaError_t launch_reduce(ReduceOp op, const float* x, float* out, const StridedIndex& kept, int64_t n_out,
                          const StridedIndex& reduced, int64_t n_reduced, cudaStream_t stream);

// ---- layout.cu ----------------------------------------------------------------------------------
// out[n] = x[off0] for the out-shaped walk idx (strides[0] into x); elements of 4 or 8 bytes.
cudaError_t launch_permute(const void* x, void* out, int64_t n, int elem_bytes, const StridedIndex& idx,
                           cudaStream_t stream);
// cache [outer, S, words] rows *position.. = rows [outer, T, words], in place; nothing is written
// when *position is outside [0, S - T].
cudaError_t launch_cache_write(void* cache, const void* rows, const int32_t* position, int64_t outer, int64_t S, int64_t T,
                               int64_t words, cudaStream_t stream);
// out row i = table row ids[i]; ids were range-checked on the host. Rows are `words` 4-byte words.
cudaError_t launch_gather_rows(const void* table, const void* ids, bool ids_i64, void* out, int64_t n_ids,
                               int64_t words, cudaStream_t stream);
// out[rows, D] = sum over positions p with ids[p] == row of dy[p, :], positions in index order,
// summed in double and rounded once. One block owns each output row: no atomics. Ids were
// range-checked on the host.
cudaError_t launch_embedding_grad(const void* ids, bool ids_i64, int64_t n_ids, const float* dy, float* out, int64_t rows,
                                  int64_t D, cudaStream_t stream);

// ---- select.cu ----------------------------------------------------------------------------------
cudaError_t launch_causal_mask(const float* x, float* out, int64_t mats, int64_t R, int64_t C, int64_t offset,
                               float fill, cudaStream_t stream);

// ---- matmul.cu ----------------------------------------------------------------------------------
struct MatmulDesc {
  int64_t M = 0, N = 0, K = 0;
  int64_t a_m = 0, a_k = 0, b_k = 0, b_n = 0;  // element strides of A(m, k), B(k, n) in one matrix
  int64_t batch = 1;                           // product of the output batch dims
  StridedIndex batch_index;                    // output batch dims; strides[0] A, [1] B (elements)
};
cudaError_t launch_matmul(const float* a, const float* b, float* out, const MatmulDesc& d, cudaStream_t stream);

// ---- attention.cu -------------------------------------------------------------------------------
// rope: out = x [rows, 2 half] rotated: row r at table row (*position or 0) + r % T of cos, sin
// [table_rows, half], each product rounded before the add (the CPU's bits). A position outside
// [0, table_rows - T] makes every output nan.
cudaError_t launch_rope(const float* x, const float* cos, const float* sin, const int32_t* position, float* out, int64_t rows,
                        int64_t T, int64_t half, int64_t table_rows, cudaStream_t stream);

// ---- optim.cu -----------------------------------------------------------------------------------
// Sum of x[i]^2 in double over a fixed partition: chunks of kSquaresChunk elements, each a
// fixed tree, then one fixed tree over the chunks. `partials` holds squares_partials(n) doubles;
// the result lands in *out (device).
cudaError_t launch_sum_of_squares(const float* x, int64_t n, double* partials, double* out, cudaStream_t stream);
// out[0] = sqrt(sums[0] + sums[1] + ... + sums[n-1]), added in that order (grad_norm's tail).
cudaError_t launch_norm_of_sums(const double* sums, int64_t n, double* out, cudaStream_t stream);
// counter[0] += 1; out[0] = counter[0] (the step counter of the training step).
cudaError_t launch_increment(int64_t* counter, int64_t* out, cudaStream_t stream);

// The optimizer updates: each element in double from its own values.
// The step's run-time scalars stay on the device: the gradient norm (f64), the learning rate
// (f64) and the count of completed steps (i64); each block derives the clipping factor and
// Adam's bias corrections from them once.
struct OptimDesc {
  int kind = 0;  // 0 sgd, 1 adam, 2 adamw
  double beta1 = 0, beta2 = 0, eps = 0, momentum = 0, weight_decay = 0, clip = 0;
  const double* norm = nullptr;
  const double* lr = nullptr;
  const int64_t* step = nullptr;
};
// state0: sgd momentum buffer (may be null) or adam m; state1: adam v.
cudaError_t launch_optimizer_update(const OptimDesc& d, float* param, const float* grad, float* state0, float* state1,
                                    int64_t n, cudaStream_t stream);

}  // namespace volta::cuda
