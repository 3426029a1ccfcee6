// Attention scores against a key cache stored transposed (key_scores_columns): the keys are
// columns, so a vector of consecutive keys is one load per value and each score is the matmul's
// FMA chain over the values with no transposes in registers (key_scores, reading key rows,
// transposes every block of keys it scores). Compiled per ISA through target attributes, as
// matmul_kernels.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/matmul.h"

namespace volta::cpu {

namespace {

#ifdef VOLTA_MATMUL_X86

// Scores of NB blocks of up to one vector of keys each, from any query rows, their chains
// interleaved: each block's chain of D FMAs waits on every step's latency, so several chains
// side by side keep the FMA units busy (a decode step's rows are a few dozen keys). Full: every
// block reads whole vectors (its columns readable that far: lanes past n are computed and not
// stored); else the lanes past n are not read either. The two kinds go to separate calls, so
// the loop over d has no branch and, for the first, no mask.
template <int NB, bool Full>
VOLTA_TARGET_AVX2 inline void column_blocks_avx2(const KeyColumnRow* blk, int64_t D) {
  __m256 acc[NB];
  __m256i lanes[NB];
  const float* k[NB];
  const float* q[NB];
  int64_t ld[NB];
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 8
  for (int b = 0; b < NB; ++b) {
    acc[b] = _mm256_setzero_ps();
    lanes[b] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(blk[b].n)), index);
    k[b] = blk[b].kt, q[b] = blk[b].q, ld[b] = blk[b].ld;
  }
  for (int64_t d = 0; d < D; ++d)
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) {
      const __m256 x = Full ? _mm256_loadu_ps(k[b]) : _mm256_maskload_ps(k[b], lanes[b]);
      acc[b] = _mm256_fmadd_ps(_mm256_broadcast_ss(q[b] + d), x, acc[b]);
      k[b] += ld[b];
    }
#pragma GCC unroll 8
  for (int b = 0; b < NB; ++b) {
    if (blk[b].n == 8) _mm256_storeu_ps(blk[b].s, acc[b]);
    else _mm256_maskstore_ps(blk[b].s, lanes[b], acc[b]);
  }
}

template <int NB, bool Full>
VOLTA_TARGET_AVX512 inline void column_blocks_avx512(const KeyColumnRow* blk, int64_t D) {
  __m512 acc[NB];
  __mmask16 lanes[NB];
  const float* k[NB];
  const float* q[NB];
  int64_t ld[NB];
#pragma GCC unroll 8
  for (int b = 0; b < NB; ++b) {
    acc[b] = _mm512_setzero_ps();
    lanes[b] = static_cast<__mmask16>((1u << blk[b].n) - 1);
    k[b] = blk[b].kt, q[b] = blk[b].q, ld[b] = blk[b].ld;
  }
  for (int64_t d = 0; d < D; ++d)
#pragma GCC unroll 8
    for (int b = 0; b < NB; ++b) {
      const __m512 x = Full ? _mm512_loadu_ps(k[b]) : _mm512_maskz_loadu_ps(lanes[b], k[b]);
      acc[b] = _mm512_fmadd_ps(_mm512_set1_ps(q[b][d]), x, acc[b]);
      k[b] += ld[b];
    }
#pragma GCC unroll 8
  for (int b = 0; b < NB; ++b) _mm512_mask_storeu_ps(blk[b].s, lanes[b], acc[b]);
}

// Up to kMaxBlocks blocks read whole a call (8 chains cover the FMA latency of either ISA), up
// to kMaxPartial of the others (a row's last block, where its columns end within the vector).
constexpr int kMaxBlocks = 8, kMaxPartial = 4;

template <bool Full>
void column_blocks(bool wide, const KeyColumnRow* blk, int nb, int64_t D) {
  const auto run = [&]<int NB>(std::integral_constant<int, NB>) {
    if (wide) column_blocks_avx512<NB, Full>(blk, D);
    else column_blocks_avx2<NB, Full>(blk, D);
  };
  switch (nb) {
    case 8: if constexpr (Full) return run(std::integral_constant<int, 8>{}); break;
    case 7: if constexpr (Full) return run(std::integral_constant<int, 7>{}); break;
    case 6: if constexpr (Full) return run(std::integral_constant<int, 6>{}); break;
    case 5: if constexpr (Full) return run(std::integral_constant<int, 5>{}); break;
    case 4: return run(std::integral_constant<int, 4>{});
    case 3: return run(std::integral_constant<int, 3>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 1: return run(std::integral_constant<int, 1>{});
    default: break;
  }
}

#endif  // VOLTA_MATMUL_X86

}  // namespace

void key_scores_columns(MatmulIsa isa, int64_t D, std::span<const KeyColumnRow> rows) {
#ifdef VOLTA_MATMUL_X86
  if (isa == MatmulIsa::kAvx512 || isa == MatmulIsa::kAvx2) {
    const bool wide = isa == MatmulIsa::kAvx512;
    const int64_t width = wide ? 16 : 8;
    std::array<KeyColumnRow, kMaxBlocks> full;  // each set whole before it is read
    std::array<KeyColumnRow, kMaxPartial> part;
    int nf = 0, np = 0;
    for (const KeyColumnRow& r : rows)
      for (int64_t j0 = 0; j0 < r.n; j0 += width) {
        const KeyColumnRow b{r.q, r.kt + j0, r.ld, std::min(width, r.n - j0), r.s + j0};
        if (j0 + width <= r.ld) {  // a whole vector of columns to read, of which the first n count
          full[static_cast<size_t>(nf++)] = b;
          if (nf == kMaxBlocks) column_blocks<true>(wide, full.data(), nf, D), nf = 0;
        } else {
          part[static_cast<size_t>(np++)] = b;
          if (np == kMaxPartial) column_blocks<false>(wide, part.data(), np, D), np = 0;
        }
      }
    column_blocks<true>(wide, full.data(), nf, D);
    column_blocks<false>(wide, part.data(), np, D);
    return;
  }
#endif
  (void)isa;
  for (const KeyColumnRow& r : rows)
    for (int64_t j = 0; j < r.n; ++j) {
      float acc = 0.0f;
      for (int64_t d = 0; d < D; ++d) acc = std::fma(r.q[d], r.kt[d * r.ld + j], acc);
      r.s[j] = acc;
    }
}

}  // namespace volta::cpu
