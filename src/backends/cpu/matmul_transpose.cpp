// Transposes in registers for the matmul's packing and attention's decode step: the copies that
// pack a k-contiguous operand into panels (transpose_copy), and the scores of one query row
// against key rows with each block of keys transposed in registers (key_scores). Compiled per ISA
// through target attributes, as matmul_kernels.cpp; the scores are the matmul's FMA chains.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <span>

#include "backends/cpu/isa.h"
#include "backends/cpu/matmul.h"

namespace volta::cpu {

namespace {

// The score kernels take blocks of a query row's keys as KeyScoreRow slices: at most one vector
// of keys each (16 with AVX-512, 8 with AVX2, whose k then holds 8 readable pointers).
using KeyBlock = KeyScoreRow;

#ifdef VOLTA_MATMUL_X86

// ---- Transposing copies (packing k-contiguous operands) -------------------------------------
// dst[p * dst_rs + r] = src[r * src_rs + p], and 0 for rows <= r < rows_out: 8 x 8 blocks
// transposed in ymm registers (AVX is part of both vector ISAs), the last rows as one more block
// whose first rows are stored (value by value, the AVX2 tile's 6-row panels took a third of the
// packing time of A). The zero rows (panel padding) go through the same stores: filled separately, they took
// one small memset per k.

// Rows r0..r7 (8 values each) become columns: out[j] holds value j of every row.
VOLTA_TARGET_AVX2 inline void transpose8x8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0..3, then rows 4..7
    __m256* u = t + 4 * h;
    s[4 * h + 0] = _mm256_shuffle_ps(u[0], u[2], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 1] = _mm256_shuffle_ps(u[0], u[2], _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * h + 2] = _mm256_shuffle_ps(u[1], u[3], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * h + 3] = _mm256_shuffle_ps(u[1], u[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // s[j] (j < 4) holds values j and j + 4 of rows 0..3 in its halves; s[4 + j] those of rows 4..7.
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
    r[j + 4] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
  }
}

// The first h (1..8) values of v at p: the 8-row blocks whole, the rest (the AVX2 tile's 6-row
// panels) as four, two and one.
VOLTA_TARGET_AVX2 inline void store_first(float* p, __m256 v, int h) {
  if (h == 8) return _mm256_storeu_ps(p, v);
  __m128 x = _mm256_castps256_ps128(v);
  if (h >= 4) {
    _mm_storeu_ps(p, x);
    x = _mm256_extractf128_ps(v, 1);
    p += 4, h -= 4;
  }
  if (h >= 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(p), x);
    x = _mm_movehl_ps(x, x);
    p += 2, h -= 2;
  }
  if (h == 1) _mm_store_ss(p, x);
}

// Rows r0 .. r0 + h - 1 (h <= 8) of the output panel, of which the first `live` come from src.
// A panel narrower than 8 (the AVX2 tile's 6 rows) takes whole 8-lane stores in k order: each
// one's last lanes fall on the start of the next k's row, which the next store (or the tail's)
// writes over; only the panel's last row, with nothing after it, is stored value by value. (Its
// 4 + 2 stores per k were a third of the 6-row pack's time.)
VOLTA_TARGET_AVX2 inline void transpose_rows(const float* src, int64_t src_rs, int64_t r0, int h, int64_t live,
                                             int64_t k8, int64_t k, float* dst, int64_t dst_rs) {
  const bool overlap = r0 == 0 && h == dst_rs;
  for (int64_t p = 0; p < k8; p += 8) {
    __m256 v[8];
    for (int i = 0; i < 8; ++i) v[i] = i < live ? _mm256_loadu_ps(src + (r0 + i) * src_rs + p) : _mm256_setzero_ps();
    transpose8x8(v);
    for (int j = 0; j < 8; ++j) {
      float* d = dst + (p + j) * dst_rs + r0;
      if (overlap && p + j + 1 < k) _mm256_storeu_ps(d, v[j]);
      else store_first(d, v[j], h);
    }
  }
}

VOLTA_TARGET_AVX2 void transpose_copy_x86(const float* src, int64_t src_rs, int64_t rows, int64_t k, float* dst,
                                          int64_t dst_rs, int64_t rows_out) {
  const int64_t k8 = k / 8 * 8;
  const auto live = [rows](int64_t r0, int h) { return std::clamp<int64_t>(rows - r0, 0, h); };
  int64_t r0 = 0;
  for (; r0 + 8 <= rows_out; r0 += 8) transpose_rows(src, src_rs, r0, 8, live(r0, 8), k8, k, dst, dst_rs);
  if (r0 < rows_out) {  // the last 1..7 rows (the whole of a 6-row panel)
    const int h = static_cast<int>(rows_out - r0);
    transpose_rows(src, src_rs, r0, h, live(r0, h), k8, k, dst, dst_rs);
  }
  for (int64_t p = k8; p < k; ++p)  // the last 0..7 values of every row
    for (int64_t r = 0; r < rows_out; ++r) dst[p * dst_rs + r] = r < rows ? src[r * src_rs + p] : 0.0f;
}

// ---- Scores of one query row against key rows (attention's decode step) -----------------------
//
// s[j] = q . k_j as the matmul's FMA chain over d from +0, the keys in the lanes: each block of
// keys is transposed in registers (no kᵀ panel in memory) and each k value meets q[d] once.

// GCC 12's unpack and shuffle intrinsics pass _mm512_undefined_ps() as the (unused) merge
// source, which -Wmaybe-uninitialized reports once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// 16 rows of 16 values become 16 columns: r[j] holds value j of every row.
VOLTA_TARGET_AVX512 inline void transpose16x16(__m512 (&r)[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4a + c], 128-bit lane L: value 4L + c of rows 4a .. 4a + 3.
  for (int a = 0; a < 4; ++a) {
    const __m512* x = t + 4 * a;
    u[4 * a + 0] = _mm512_shuffle_ps(x[0], x[2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * a + 1] = _mm512_shuffle_ps(x[0], x[2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * a + 2] = _mm512_shuffle_ps(x[1], x[3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * a + 3] = _mm512_shuffle_ps(x[1], x[3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Value 4L + c of every row: lane L of u[c], u[4 + c], u[8 + c], u[12 + c] (a 4 x 4 transpose
  // of 128-bit lanes).
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44), v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
  }
}

// transpose_copy with AVX-512: 16 x 16 blocks, each output row's h (<= 16) values stored
// through a lane mask. Against the 8 x 8 blocks in ymm registers, a 12-row panel (the AVX-512
// tile's) takes one transpose per 16 k instead of two per 8 (the second with 4 rows of 8 live),
// and one store per k instead of two.
VOLTA_TARGET_AVX512 void transpose_copy_avx512(const float* src, int64_t src_rs, int64_t rows, int64_t k, float* dst,
                                               int64_t dst_rs, int64_t rows_out) {
  const int64_t k16 = k / 16 * 16;
  for (int64_t r0 = 0; r0 < rows_out; r0 += 16) {
    const int h = static_cast<int>(std::min<int64_t>(16, rows_out - r0));
    const int64_t live = std::clamp<int64_t>(rows - r0, 0, h);
    const auto m = static_cast<__mmask16>((1u << h) - 1u);
    for (int64_t p = 0; p < k16; p += 16) {
      __m512 v[16];
      for (int i = 0; i < 16; ++i) v[i] = i < live ? _mm512_loadu_ps(src + (r0 + i) * src_rs + p) : _mm512_setzero_ps();
      transpose16x16(v);
      for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + (p + j) * dst_rs + r0, m, v[j]);
    }
  }
  for (int64_t p = k16; p < k; ++p)  // the last 0..15 values of every row
    for (int64_t r = 0; r < rows_out; ++r) dst[p * dst_rs + r] = r < rows ? src[r * src_rs + p] : 0.0f;
}

// Scores of NB blocks of up to 16 keys each (a block's missing keys read as zeros, their lanes
// never stored), from any query rows, the blocks' chains interleaved: one block's chain of D
// FMAs waits on each step's latency, which left the scores latency-bound (a batch-8 decode
// step's largest piece after the products); NB chains side by side overlap, whether of one row
// or of several heads' rows. A whole chunk of 16 values takes its FMAs unrolled, so the
// transposed rows stay in registers.
template <int NB>
VOLTA_TARGET_AVX512 inline void key_blocks_avx512(const KeyBlock* blk, int64_t D) {
  __m512 acc[NB];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int64_t d0 = 0; d0 < D; d0 += 16) {
    const int64_t w = std::min<int64_t>(16, D - d0);
    const auto m = static_cast<__mmask16>((1u << w) - 1);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const float* q = blk[b].q;
      __m512 r[16];
      for (int i = 0; i < 16; ++i) r[i] = i < blk[b].n ? _mm512_maskz_loadu_ps(m, blk[b].k[i] + d0) : _mm512_setzero_ps();
      transpose16x16(r);
      if (w == 16) {
#pragma GCC unroll 16
        for (int d = 0; d < 16; ++d) acc[b] = _mm512_fmadd_ps(_mm512_set1_ps(q[d0 + d]), r[d], acc[b]);
      } else {
        for (int64_t d = 0; d < w; ++d) acc[b] = _mm512_fmadd_ps(_mm512_set1_ps(q[d0 + d]), r[d], acc[b]);
      }
    }
  }
  for (int b = 0; b < NB; ++b) _mm512_mask_storeu_ps(blk[b].s, static_cast<__mmask16>((1u << blk[b].n) - 1), acc[b]);
}

VOLTA_TARGET_AVX512 void key_blocks_avx512_any(const KeyBlock* blk, int nb, int64_t D) {
  switch (nb) {
    case 4: return key_blocks_avx512<4>(blk, D);
    case 3: return key_blocks_avx512<3>(blk, D);
    case 2: return key_blocks_avx512<2>(blk, D);
    default: return key_blocks_avx512<1>(blk, D);
  }
}

#pragma GCC diagnostic pop

// 8 whole keys' values d0 .. d0 + 7 transposed: r[d] holds value d0 + d of every key. Each
// register is two 4-value rows (keys i and i + 4), so a 4 x 4 transpose within the 128-bit
// halves finishes it: 16 shuffles where the full 8 x 8 transpose takes 24.
VOLTA_TARGET_AVX2 inline void load_keys8x8(const float* const* k, int64_t d0, __m256 (&r)[8]) {
  __m256 x[8];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) x[4 * h + i] = _mm256_loadu2_m128(k[i + 4] + d0 + 4 * h, k[i] + d0 + 4 * h);
  for (int h = 0; h < 2; ++h) {
    const __m256* y = x + 4 * h;
    const __m256 t0 = _mm256_unpacklo_ps(y[0], y[1]), t1 = _mm256_unpackhi_ps(y[0], y[1]);
    const __m256 t2 = _mm256_unpacklo_ps(y[2], y[3]), t3 = _mm256_unpackhi_ps(y[2], y[3]);
    r[4 * h + 0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * h + 1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * h + 2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * h + 3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  }
}

// Scores of NB blocks of 8 keys (a block of fewer repeats its last key's row, those lanes
// never stored), from any query rows, their chains interleaved: one block's chain of D FMAs waits
// on each step's latency, which alone left the core idle (decode attention's scores were
// latency-bound); NB chains side by side overlap, whether of one row or of several heads' rows.
template <int NB>
VOLTA_TARGET_AVX2 inline void key_blocks_avx2(const KeyBlock* blk, int64_t D) {
  __m256 acc[NB];
  // Unrolled here and at the stores, so acc lives in registers only: a range loop over it left
  // GCC zeroing a stack copy with a `rep stos` every call.
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) acc[b] = _mm256_setzero_ps();
  int64_t d0 = 0;
  for (; d0 + 8 <= D; d0 += 8)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const float* q = blk[b].q;
      __m256 r[8];
      load_keys8x8(blk[b].k, d0, r);
      for (int d = 0; d < 8; ++d) acc[b] = _mm256_fmadd_ps(_mm256_set1_ps(q[d0 + d]), r[d], acc[b]);
    }
  for (; d0 < D; ++d0)  // the last 0..7 values of every key
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      const float* const* kb = blk[b].k;
      const __m256 col = _mm256_setr_ps(kb[0][d0], kb[1][d0], kb[2][d0], kb[3][d0], kb[4][d0], kb[5][d0], kb[6][d0], kb[7][d0]);
      acc[b] = _mm256_fmadd_ps(_mm256_set1_ps(blk[b].q[d0]), col, acc[b]);
    }
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    if (blk[b].n == 8) {
      _mm256_storeu_ps(blk[b].s, acc[b]);
      continue;
    }
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[b]);
    std::copy_n(out, blk[b].n, blk[b].s);
  }
}

VOLTA_TARGET_AVX2 void key_blocks_avx2_any(const KeyBlock* blk, int nb, int64_t D) {
  switch (nb) {
    case 4: return key_blocks_avx2<4>(blk, D);
    case 3: return key_blocks_avx2<3>(blk, D);
    case 2: return key_blocks_avx2<2>(blk, D);
    default: return key_blocks_avx2<1>(blk, D);
  }
}

#endif  // VOLTA_MATMUL_X86

}  // namespace

void transpose_copy(MatmulIsa isa, const float* src, int64_t src_rs, int64_t rows, int64_t k, float* dst, int64_t dst_rs,
                    int64_t rows_out) {
#ifdef VOLTA_MATMUL_X86
  if (isa == MatmulIsa::kAvx512) return transpose_copy_avx512(src, src_rs, rows, k, dst, dst_rs, rows_out);
  if (isa != MatmulIsa::kScalar) return transpose_copy_x86(src, src_rs, rows, k, dst, dst_rs, rows_out);
#endif
  (void)isa;
  for (int64_t p = 0; p < k; ++p)
    for (int64_t r = 0; r < rows_out; ++r) dst[p * dst_rs + r] = r < rows ? src[r * src_rs + p] : 0.0f;
}

void key_scores_rows(MatmulIsa isa, int64_t D, std::span<const KeyScoreRow> rows) {
#ifdef VOLTA_MATMUL_X86
  if (isa == MatmulIsa::kAvx512 || isa == MatmulIsa::kAvx2) {
    const bool wide = isa == MatmulIsa::kAvx512;
    const int64_t width = wide ? 16 : 8;
    // Up to 4 blocks at a time, taken in order from the rows' keys; an AVX2 block of fewer than
    // 8 keys reads its pending slot's copy of the row pointers, the last one repeated.
    // Each slot set whole before it is read; left unzeroed (a brace initializer cost a `rep stos`
    // a call, a tenth of a short row's scores).
    std::array<KeyBlock, 4> blocks;
    std::array<std::array<const float*, 8>, 4> padded;
    int nb = 0;
    const auto flush = [&] {
      if (nb == 0) return;
      if (wide) key_blocks_avx512_any(blocks.data(), nb, D);
      else key_blocks_avx2_any(blocks.data(), nb, D);
      nb = 0;
    };
    for (const KeyScoreRow& r : rows)
      for (int64_t j0 = 0; j0 < r.n; j0 += width) {
        const int n = static_cast<int>(std::min(width, r.n - j0));
        KeyBlock& b = blocks[static_cast<size_t>(nb)];
        b = {r.q, r.k + j0, n, r.s + j0};
        if (!wide && n < 8) {
          auto& pad = padded[static_cast<size_t>(nb)];
          for (int i = 0; i < 8; ++i) pad[static_cast<size_t>(i)] = r.k[j0 + std::min(i, n - 1)];
          b.k = pad.data();
        }
        if (++nb == 4) flush();
      }
    flush();
    return;
  }
#endif
  (void)isa;
  for (const KeyScoreRow& r : rows)
    for (int64_t j = 0; j < r.n; ++j) {
      float acc = 0.0f;
      for (int64_t d = 0; d < D; ++d) acc = std::fma(r.q[d], r.k[j][d], acc);
      r.s[j] = acc;
    }
}

void key_scores(MatmulIsa isa, const float* q, int64_t D, const float* const* k, int64_t n, float* s) {
  const KeyScoreRow row{q, k, n, s};
  key_scores_rows(isa, D, std::span(&row, 1));
}

}  // namespace volta::cpu
