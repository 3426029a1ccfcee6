// Sizes the CUDA kernels and the host agree on, in plain C++17 with no CUDA or Volta headers:
// nvcc includes this through kernels.h, the host-only planning code through capabilities.cpp.
#pragma once

#include <cstdint>

namespace volta::cuda {

// grad_norm's sum of squares runs over chunks of kSquaresChunk elements (one fixed tree each),
// then one fixed tree over the chunk sums: squares_partials(n) doubles of workspace.
constexpr int64_t kSquaresChunk = 8192;
inline int64_t squares_partials(int64_t n) { return n == 0 ? 1 : (n + kSquaresChunk - 1) / kSquaresChunk; }

}  // namespace volta::cuda
