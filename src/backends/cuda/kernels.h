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
// y). Where both operands' periods are given (>= 0) the offsets skip idx: an operand of period
// 0 is out-shaped (offset i), one of period p > 0 repeats along out's leading dims (offset
// i % p: a bias over the last dims).
cudaError_t launch_binary(ir::Op op, const float* x, const float* y, float* out, int64_t n, const StridedIndex& idx,
                          int64_t period_x, int64_t period_y, cudaStream_t stream);
cudaError_t launch_unary(ir::Op op, const float* x, float* out, int64_t n, cudaStream_t stream);

// ---- activation.cu ------------------------------------------------------------------------------
// Each element in double with the CPU reference's f32 roundings (ir/scalar_math.h); gelu's erf
// form and its gradient in f32 (activation.cu says why).
cudaError_t launch_gelu(const float* x, float* out, int64_t n, bool tanh_form, cudaStream_t stream);
// x [rows, 2F] -> out [rows, F] = silu(gate) * up; with dy [rows, F], the gradient [rows, 2F].
cudaError_t launch_swiglu(const float* x, const float* dy, float* out, int64_t rows, int64_t F, cudaStream_t stream);

// out = x > 0 ? dy : 0
cudaError_t launch_relu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream);
// out = gelu'(x) * dy, erf form (f32) or tanh approximation (double).
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
// (has_ignore) are skipped. `row_loss` is `rows` doubles of workspace. `counted` (device) is
// check_indices' count of the rows kept; counted == 0 gives nan, as on the CPU. A target outside
// [0, C) (check_indices reports it) makes its row's loss nan.
cudaError_t launch_cross_entropy(const float* logits, const void* targets, bool targets_i64, int64_t rows, int64_t C,
                                 bool has_ignore, int64_t ignore, const int64_t* counted, double* row_loss, float* out,
                                 cudaStream_t stream);
// d loss / d logits = dloss[0] / counted * (softmax(logits[r]) - onehot(t_r)); ignored rows 0.
cudaError_t launch_cross_entropy_grad(const float* logits, const void* targets, bool targets_i64, const float* dloss,
                                      int64_t rows, int64_t C, bool has_ignore, int64_t ignore, const int64_t* counted,
                                      float* out, cudaStream_t stream);

// ---- reduce.cu ----------------------------------------------------------------------------------
enum class ReduceOp : int { Sum, Mean, Max };
// The general form: one thread per output element walks its reduced elements in row-major
// order, accumulating in double (the CPU reference's order). kept: the output dims with the input's strides
// (strides[0]); reduced: the reduced dims with theirs. NaN propagates through max.
cudaError_t launch_reduce(ReduceOp op, const float* x, float* out, const StridedIndex& kept, int64_t n_out,
                          const StridedIndex& reduced, int64_t n_reduced, cudaStream_t stream);
// The reduced axes as one contiguous band: x [O, R, I] -> out [O, I], reduced over R, read
// coalesced with a fixed partition and tree (reduce.cu). R == 0 gives the identity (nan: mean).
cudaError_t launch_reduce_band(ReduceOp op, const float* x, float* out, int64_t O, int64_t R, int64_t I, cudaStream_t stream);

// ---- layout.cu ----------------------------------------------------------------------------------
// out[n] = x[off0] for the out-shaped walk idx (strides[0] into x); elements of 4 or 8 bytes.
cudaError_t launch_permute(const void* x, void* out, int64_t n, int elem_bytes, const StridedIndex& idx,
                           cudaStream_t stream);
// cache [outer, S, words] rows *position.. = rows [outer, T, words], in place; nothing is written
// when *position is outside [0, S - T].
cudaError_t launch_cache_write(void* cache, const void* rows, const int32_t* position, int64_t outer, int64_t S, int64_t T,
                               int64_t words, cudaStream_t stream);
// Integer indices (embedding ids, cross-entropy targets) are checked on the device, so a step
// needs no copy back: check_indices finds the lowest position of ids[0, n) outside [0, bound)
// (entries equal to `skip` aside) and records it with its value and `token` in `record`,
// unless an earlier error is recorded there; `counted` (or null) gets the number of entries
// not equal to `skip`. The backend reads the record at its next synchronisation.
struct IndexError {
  int64_t token = -1;  // the backend's number for the node, -1: none
  int64_t position = 0, value = 0;
};
cudaError_t launch_check_indices(const void* ids, bool ids_i64, int64_t n, int64_t bound, bool has_skip, int64_t skip,
                                 int64_t token, IndexError* record, int64_t* counted, cudaStream_t stream);
// out row i = table row ids[i] (nan for an id outside the table). Rows are `words` 4-byte words.
cudaError_t launch_gather_rows(const void* table, int64_t table_rows, const void* ids, bool ids_i64, void* out, int64_t n_ids,
                               int64_t words, cudaStream_t stream);
// out[rows, D] = sum over positions p with ids[p] == row of dy[p, :], positions in index order,
// summed in double and rounded once. One block owns each output row: no atomics; an id outside
// [0, rows) matches no row.
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
// Fused attention (ref_attention.cpp's semantics): per query row, the scores over the keys, the
// softmax and the weighted sum without the score matrix in memory. Query group g reads key group
// g / rep; keys are the first S1 of cap rows of k / v, then the S2 rows of k2 / v2. Each score is
// the dot product in double rounded to f32 (the reference's), softmax statistics and sums in
// double, probabilities rounded to f32 as the reference stores them. Blocks of 16 query rows
// share tiles of 32 keys in shared memory; each row's sums run in a fixed order (lanes, then a
// butterfly whose every lane holds the same value), so results repeat bitwise and do not depend
// on the batch. Causal blocks skip the keys (queries, for dk and dv) the mask zeroes when the
// group's operands are finite (checked per group into `finite`), which changes no bit.
struct AttentionDesc {
  int64_t G = 0, T = 0, D = 0, E = 0, rep = 1;  // query groups, query rows, q / k width, v width
  int64_t cap = 0, S1 = 0, S2 = 0;               // rows per key group of k / v, those used; of k2 / v2
  bool causal = false;
  int64_t offset = 0;  // row i keeps keys j <= i + offset
  double scale = 1.0;
  const int32_t* position = nullptr;  // device i32 or null: S1 = position + T, offset moved by it
  // packed_heads H (0: the plain layout above): group g is head g % H of batch g / H; q, k and v
  // are the thirds of packed [.., T, 3 H D] rows (head h at columns h D.. of its third), the
  // output and dy [.., T, H D], attention_grad's dq, dk, dv where q, k, v were read (rep = 1).
  int64_t heads = 0;
  // Only the groups whose `finite` flag is 0 (the f32 kernels, after the tensor-core ones).
  bool nonfinite_only = false;
};
constexpr int64_t kAttentionMaxDim = 128;  // D and E of the fused kernels
// out [G, T, E] (plain); `finite` is G ints of workspace. A position outside [0, cap - T] makes the
// output nan (the host has no copy of it).
cudaError_t launch_attention(const float* q, const float* k, const float* v, const float* k2, const float* v2, float* out,
                             const AttentionDesc& d, int* finite, cudaStream_t stream);
// The run-to-run variant (attention_tf32x3.cu): where attention_tf32x3_fits, the finite flags,
// then the tensor-core kernel on the finite groups and the f32 kernels on the rest; else as
// launch_attention.
cudaError_t launch_attention_run_to_run(const float* q, const float* k, const float* v, const float* k2, const float* v2,
                                        float* out, const AttentionDesc& d, int* finite, cudaStream_t stream);
// attention_grad: out [3, G, T, D] = dq, dk, dv (dk, dv per query group); workspace `finite` G
// ints, `stats` G * T * 3 doubles (each row's max, sum and sum(dp * p)) and, where
// attention_stored_probs_bytes gives room (else null), `probs`: 2 G T T floats.
cudaError_t launch_attention_grad(const float* q, const float* k, const float* v, const float* dy, float* out,
                                  const AttentionDesc& d, int* finite, double* stats, float* probs, cudaStream_t stream);
// Its run-to-run variant, as launch_attention_run_to_run: the tensor-core kernels on the finite
// groups, the f32 kernels on the rest.
cudaError_t launch_attention_grad_run_to_run(const float* q, const float* k, const float* v, const float* dy, float* out,
                                             const AttentionDesc& d, int* finite, double* stats, float* probs, cudaStream_t stream);

// rope: out = x [rows, 2 half] rotated: row r at table row (*position or 0) + r % T of cos, sin
// [table_rows, half], each product rounded before the add (the CPU's bits). A position outside
// [0, table_rows - T] makes every output nan.
cudaError_t launch_rope(const float* x, const float* cos, const float* sin, const int32_t* position, float* out, int64_t rows,
                        int64_t T, int64_t half, int64_t table_rows, cudaStream_t stream);

// ---- optim.cu -----------------------------------------------------------------------------------
// Sums of x[i]^2 in double over a fixed partition, for up to kSquaresBatch tensors in two
// launches: chunks of kSquaresChunk elements, each a fixed tree, then per tensor one fixed tree
// over its chunks. Tensor t's chunks are partials[first[t] .. first[t + 1]) (first[0] = 0,
// squares_partials(n[t]) of them); its sum lands in sums[t] (device).
constexpr int kSquaresBatch = 64;
struct SquaresBatch {
  int count = 0;
  const float* x[kSquaresBatch] = {};
  int64_t n[kSquaresBatch] = {};
  int64_t first[kSquaresBatch + 1] = {};
  double* partials = nullptr;
  double* sums = nullptr;
};
cudaError_t launch_sums_of_squares(const SquaresBatch& b, cudaStream_t stream);
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
