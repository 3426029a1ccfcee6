// Sizes the CUDA kernels and the host agree on, in plain C++17 with no CUDA or Volta headers:
// nvcc includes this through kernels.h, the host-only planning code through capabilities.cpp.
#pragma once

#include <climits>
#include <cstdint>

namespace volta::cuda {

// grad_norm's sum of squares runs over chunks of kSquaresChunk elements (one fixed tree each),
// then one fixed tree over the chunk sums: squares_partials(n) doubles of workspace.
constexpr int64_t kSquaresChunk = 8192;
inline int64_t squares_partials(int64_t n) { return n == 0 ? 1 : (n + kSquaresChunk - 1) / kSquaresChunk; }

// attention keeps one int per query group (are its operands finite: may causal blocks skip?),
// attention_grad also each query row's softmax statistics (3 doubles), after the ints, and where
// they take at most kAttentionStoredProbs bytes, the probabilities and score gradients its dq
// kernel computes ([groups, rows, rows] f32 each), which the dk/dv kernel then reads instead of
// recomputing two products (an H100 spent more time on those than on writing and reading them).
constexpr int64_t kAttentionStoredProbs = int64_t{256} << 20;
inline int64_t attention_flags_bytes(int64_t groups) { return (groups * 4 + 15) / 16 * 16; }
inline int64_t attention_stored_probs_bytes(int64_t groups, int64_t rows) {
  const int64_t bytes = 2 * groups * rows * rows * 4;
  return bytes <= kAttentionStoredProbs ? bytes : 0;
}
inline int64_t attention_stats_bytes(int64_t groups, int64_t rows) { return groups * rows * 3 * 8; }
inline int64_t attention_workspace_bytes(int64_t groups, int64_t rows, bool grad) {
  return attention_flags_bytes(groups) + (grad ? attention_stats_bytes(groups, rows) + attention_stored_probs_bytes(groups, rows) : 0);
}

// Whether the run-to-run level's tensor-core attention (attention_tf32x3.cu, the
// cuda.attention_tf32x3 variant) takes a self-attention of `rows` query rows over `keys` keys:
// rows a multiple of its 64-row blocks, as many keys, head widths of 64, a causal mask at offset
// 0 or none.
inline bool tf32x3_attention_shape(int64_t rows, int64_t keys, int64_t d, int64_t e, bool causal, int64_t offset) {
  return rows > 0 && rows % 64 == 0 && keys == rows && d == 64 && e == 64 && (!causal || offset == 0);
}

// Whether cuBLAS's int dims hold a GEMM (the cuda.cublas matmul variant).
inline bool gemm_fits(int64_t m, int64_t n, int64_t k, int64_t batch) {
  for (int64_t v : {m, n, k, batch})
    if (v <= 0 || v > INT_MAX) return false;
  return true;
}

}  // namespace volta::cuda
