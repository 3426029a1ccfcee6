// Attention scores against a key cache stored transposed (key_scores_columns): the keys are
// columns, so a vector of consecutive keys is one load per value and each score is the matmul's
// FMA chain over the values with no transposes in registers (key_scores, reading key rows,
// transposes every block of keys it scores). Compiled per ISA through target attributes, as
// matmul_kernels.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "backends/cpu/isa.h"
#include "backends/cpu/matmul.h"

namespace volta::cpu {

namespace {

#ifdef VOLTA_MATMUL_X86

// Scores of NB blocks of up to one vector of keys each (lanes past a block's n neither read nor
// stored), from any query rows, their chains interleaved: each block's chain of D FMAs waits on
// every step's latency, so a few chains side by side keep the FMA units busy (a decode step's
// rows are a few dozen keys).
template <int NB>
VOLTA_TARGET_AVX2 inline void column_blocks_avx2(const KeyColumnRow* blk, int64_t D) {
  __m256 acc[NB];
  __m256i lanes[NB];
  const float* k[NB];
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    acc[b] = _mm256_setzero_ps();
    lanes[b] = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(blk[b].n)), index);
    k[b] = blk[b].kt;
  }
  for (int64_t d = 0; d < D; ++d)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const __m256 x = blk[b].n == 8 ? _mm256_loadu_ps(k[b]) : _mm256_maskload_ps(k[b], lanes[b]);
      acc[b] = _mm256_fmadd_ps(_mm256_set1_ps(blk[b].q[d]), x, acc[b]);
      k[b] += blk[b].ld;
    }
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) _mm256_maskstore_ps(blk[b].s, lanes[b], acc[b]);
}

template <int NB>
VOLTA_TARGET_AVX512 inline void column_blocks_avx512(const KeyColumnRow* blk, int64_t D) {
  __m512 acc[NB];
  __mmask16 lanes[NB];
  const float* k[NB];
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    acc[b] = _mm512_setzero_ps();
    lanes[b] = static_cast<__mmask16>((1u << blk[b].n) - 1);
    k[b] = blk[b].kt;
  }
  for (int64_t d = 0; d < D; ++d)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      acc[b] = _mm512_fmadd_ps(_mm512_set1_ps(blk[b].q[d]), _mm512_maskz_loadu_ps(lanes[b], k[b]), acc[b]);
      k[b] += blk[b].ld;
    }
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) _mm512_mask_storeu_ps(blk[b].s, lanes[b], acc[b]);
}

template <int NB>
void column_blocks(bool wide, const KeyColumnRow* blk, int64_t D) {
  if (wide) column_blocks_avx512<NB>(blk, D);
  else column_blocks_avx2<NB>(blk, D);
}

#endif  // VOLTA_MATMUL_X86

}  // namespace

void key_scores_columns(MatmulIsa isa, int64_t D, std::span<const KeyColumnRow> rows) {
#ifdef VOLTA_MATMUL_X86
  if (isa == MatmulIsa::kAvx512 || isa == MatmulIsa::kAvx2) {
    const bool wide = isa == MatmulIsa::kAvx512;
    const int64_t width = wide ? 16 : 8;
    std::array<KeyColumnRow, 4> blocks;  // each set whole before it is read
    int nb = 0;
    const auto flush = [&] {
      switch (nb) {
        case 4: column_blocks<4>(wide, blocks.data(), D); break;
        case 3: column_blocks<3>(wide, blocks.data(), D); break;
        case 2: column_blocks<2>(wide, blocks.data(), D); break;
        case 1: column_blocks<1>(wide, blocks.data(), D); break;
        default: break;
      }
      nb = 0;
    };
    for (const KeyColumnRow& r : rows)
      for (int64_t j0 = 0; j0 < r.n; j0 += width) {
        blocks[static_cast<size_t>(nb)] = {r.q, r.kt + j0, r.ld, std::min(width, r.n - j0), r.s + j0};
        if (++nb == 4) flush();
      }
    flush();
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
