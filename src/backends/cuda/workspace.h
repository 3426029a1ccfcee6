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
// attention_grad also each query row's softmax statistics (3 doubles), after the ints.
inline int64_t attention_flags_bytes(int64_t groups) { return (groups * 4 + 15) / 16 * 16; }
inline int64_t attention_workspace_bytes(int64_t groups, int64_t rows, bool grad) {
  return attention_flags_bytes(groups) + (grad ? groups * rows * 3 * 8 : 0);
}

// Whether cuBLAS's int dims hold a GEMM (the cuda.cublas matmul variant).
inline bool gemm_fits(int64_t m, int64_t n, int64_t k, int64_t batch) {
  for (int64_t v : {m, n, k, batch})
    if (v <= 0 || v > INT_MAX) return false;
  return true;
}

}  // namespace volta::cuda
