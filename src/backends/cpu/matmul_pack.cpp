// Packing the GEMM's operands into the microkernels' panels (matmul.h): A into panels of tile
// rows (a transpose for a row-major A, row copies for a transposed one), B into panels of tile
// columns. Packing only moves values; the plain loops are compiled per ISA, so the copies use the
// widest vectors there are.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_tile.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VOLTA_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLTA_ISA_CLONES
#endif

namespace volta::cpu {

namespace {

// pack_a_transposed for tile height MR: a fixed-size copy the compiler inlines (a memcpy call per
// 48 bytes cost more than the copy). The stored rows are taken kRowsTogether at a time, and
// each panel's piece of them written front to back. Row by row across all panels wrote MR values
// into each of M / MR lines kb * MR floats apart (6 KiB for AVX2's 6 x 256), which fall into two
// L1 sets, so a line left L1 before it was full and came back for each of its next values (a
// cold 512 x 768 operand: 206 -> 138 us). Panel by panel over all k rows read the rows'
// lines 2 KiB apart, again two L1 sets, each line leaving before the next panel read the rest
// of it. A few rows at a time keep those lines in L1 and write whole lines of each panel.
// The next group's rows are fetched a few lines per panel while this group is copied: the
// hardware's prefetch sees kRowsTogether streams advance 48 bytes a panel and, for an operand
// from memory (an activation written long before), fetches too little ahead. Zen 4, 1 thread,
// 1.5 MB operands from memory (512 x 768): 161-197 -> 92-123 us; from L3 (128 x 768) unchanged.
constexpr int64_t kRowsTogether = 8;
template <int64_t MR>
VOLTA_ISA_CLONES void pack_a_transposed_mr(const float* a, int64_t a_cs, int64_t M, int64_t k, int64_t kb, float* dst) {
  const auto line = [](const float* p) { return reinterpret_cast<uintptr_t>(p) / 64; };
  // Lines a row spans (one more where rows do not start on a line), panels to spread them over.
  const bool aligned = line(a) * 64 == reinterpret_cast<uintptr_t>(a) && a_cs % 16 == 0;
  const int64_t row_lines = (M + 15) / 16 + (aligned ? 0 : 1), panels = std::max<int64_t>(M / MR, 1);
  for (int64_t p0 = 0; p0 < k; p0 += kRowsTogether) {
    const int64_t p1 = std::min(k, p0 + kRowsTogether), ahead = std::clamp<int64_t>(k - p1, 0, kRowsTogether);
    const int64_t fetch = ahead * row_lines;  // the next group's lines, spread over this group's panels
    int64_t fetched = 0, i = 0, row = p1, at = 0;  // the next line: row `row`'s line `at`
    const auto prefetch_until = [&](int64_t upto) {
      for (; fetched < upto; ++fetched) {
        __builtin_prefetch(reinterpret_cast<const char*>((line(a + row * a_cs) + static_cast<uintptr_t>(at)) * 64), 0, 3);
        if (++at == row_lines) at = 0, ++row;
      }
    };
    for (int64_t panel = 0; i + MR <= M; i += MR, ++panel) {
      prefetch_until(fetch * (panel + 1) / panels);
      for (int64_t p = p0; p < p1; ++p) std::memcpy(dst + i * kb + p * MR, a + p * a_cs + i, MR * sizeof(float));
    }
    prefetch_until(fetch);
    if (i < M)
      for (int64_t p = p0; p < p1; ++p)
        std::memcpy(dst + i * kb + p * MR, a + p * a_cs + i, static_cast<size_t>(M - i) * sizeof(float));
  }
}
// Row p of a row-major B's full panels of NR columns: `panels` copies of NR values, panel j's
// at dst + j * panel_stride. A fixed-size copy the compiler turns into whole vectors.
template <int64_t NR>
[[gnu::always_inline]] inline void pack_b_row(const float* src, int64_t panels, float* dst, int64_t panel_stride) {
  for (int64_t j = 0; j < panels; ++j) std::memcpy(dst + j * panel_stride, src + j * NR, NR * sizeof(float));
}

}  // namespace

VOLTA_ISA_CLONES
void pack_a(MatmulIsa isa, MatView A, int64_t rows, int64_t kb, int64_t mr, float* dst) {
  for (int64_t i = 0; i < rows; i += mr, dst += mr * kb) {
    const int64_t h = std::min(mr, rows - i);
    const float* src = A.data + i * A.rs;
    if (A.cs == 1) {  // row-major A: each row's k values are contiguous, a transpose
      // An A from L3 or memory is read a K block of each row at a time: pieces too short for
      // the hardware's stream prefetch. The next panel's rows are fetched while this one is
      // transposed.
      const int64_t next = std::min(rows, i + 2 * mr), lines = (kb + 15) / 16;
      for (int64_t r = i + mr; r < next; ++r)
        for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(src + (r - i) * A.rs + l * 16, 0, 2);
      transpose_copy(isa, src, A.rs, h, kb, dst, mr, h);
      continue;
    }
    for (int64_t p = 0; p < kb; ++p)  // any other strides: write the panel in order
      for (int64_t r = 0; r < h; ++r) dst[p * mr + r] = src[r * A.rs + p * A.cs];
  }
}

void pack_a_transposed(const float* a, int64_t a_cs, int64_t M, int64_t k, int64_t kb, int64_t mr, float* dst) {
  switch (mr) {
    case tile::kAvx512Rows: return pack_a_transposed_mr<tile::kAvx512Rows>(a, a_cs, M, k, kb, dst);
    case tile::kAvx2Rows: return pack_a_transposed_mr<tile::kAvx2Rows>(a, a_cs, M, k, kb, dst);
    case tile::kScalarRows: return pack_a_transposed_mr<tile::kScalarRows>(a, a_cs, M, k, kb, dst);
    default:
      for (int64_t p = 0; p < k; ++p, a += a_cs)
        for (int64_t i = 0; i < M; i += mr)
          std::memcpy(dst + i * kb + p * mr, a + i, static_cast<size_t>(std::min(mr, M - i)) * sizeof(float));
  }
}


VOLTA_ISA_CLONES
void pack_b(MatmulIsa isa, MatView B, int64_t kb, int64_t cols, int64_t nr, float* dst) {
  if (B.cs == 1) {  // row-major B: its rows in order (a cold operand streams), each cut into panels
    const int64_t full = cols / nr, stride = nr * kb;
    for (int64_t p = 0; p < kb; ++p) {
      const float* s = B.data + p * B.rs;
      float* d = dst + p * nr;
      if (nr == 16) pack_b_row<16>(s, full, d, stride);
      else if (nr == 32) pack_b_row<32>(s, full, d, stride);
      else
        for (int64_t j = 0; j < full; ++j) std::copy_n(s + j * nr, nr, d + j * stride);
      if (full * nr < cols) {  // a last, narrower panel, zero-padded
        const int64_t w = cols - full * nr;
        d += full * stride, s += full * nr;
        for (int64_t c = 0; c < w; ++c) d[c] = s[c];
        for (int64_t c = w; c < nr; ++c) d[c] = 0.0f;
      }
    }
    return;
  }
  for (int64_t j = 0; j < cols; j += nr, dst += nr * kb) {
    const int64_t w = std::min(nr, cols - j);
    const float* src = B.data + j * B.cs;
    if (B.rs == 1) {  // transposed B: each column's k values are contiguous, a transpose
      transpose_copy(isa, src, B.cs, w, kb, dst, nr, nr);
      continue;
    }
    if (w < nr)
      for (int64_t p = 0; p < kb; ++p) std::fill(dst + p * nr + w, dst + (p + 1) * nr, 0.0f);
    for (int64_t c = 0; c < w; ++c)  // any other strides
      for (int64_t p = 0; p < kb; ++p) dst[p * nr + c] = src[c * B.cs + p * B.rs];
  }
}

}  // namespace volta::cpu
