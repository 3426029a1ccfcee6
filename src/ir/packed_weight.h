// The layout of a matmul's `b_packed` weight: B [K, N] in blocks of kc rows (the last block may
// be shorter), each block as N / nr panels of nr columns whose rows follow one another, for f32,
// bf16 or f16 weights alike. It is the CPU GEMM's packed B (src/backends/cpu/matmul.cpp), so a
// weight packed once, when the plan is made, is read by every run without packing. The pass that writes it, the reference kernel
// and the CPU kernel's fallback all go through these two functions.
#pragma once

#include <algorithm>
#include <cstdint>

namespace volta::ir {

// Where element (k, n) of B lives in the packed layout (N a multiple of nr).
inline int64_t packed_weight_offset(int64_t k, int64_t n, int64_t K, int64_t N, int64_t kc, int64_t nr) {
  const int64_t p0 = k / kc * kc, kb = std::min(kc, K - p0);
  return p0 * N + n / nr * nr * kb + (k - p0) * nr + n % nr;
}

// Packs row-major src [K, N] into dst (pack: true), or unpacks packed src into row-major dst:
// each panel row is nr consecutive values of a row of B. T: float, or the uint16_t bits of bf16
// and f16 weights (the layout is the same at any width).
template <typename T>
void repack_weight(const T* src, T* dst, int64_t K, int64_t N, int64_t kc, int64_t nr, bool pack) {
  for (int64_t p0 = 0; p0 < K; p0 += kc) {
    const int64_t kb = std::min(kc, K - p0);
    for (int64_t j = 0; j < N; j += nr)
      for (int64_t r = 0; r < kb; ++r) {
        T* to = pack ? dst + packed_weight_offset(p0 + r, j, K, N, kc, nr) : dst + (p0 + r) * N + j;
        const T* from = pack ? src + (p0 + r) * N + j : src + packed_weight_offset(p0 + r, j, K, N, kc, nr);
        std::copy_n(from, nr, to);
      }
  }
}

}  // namespace volta::ir
