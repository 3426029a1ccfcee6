// The small-M path on a weight packed when the plan was made (ir/packed_weight.h): decode's
// products, on f32 weights or on bf16 / f16 ones widened in registers, each task's columns one
// contiguous piece of every K block. Every element of C is the same FMA chain in k order as on
// the plain path (matmul.cpp), whichever tile, row grouping or task split computes it.
#include <algorithm>

#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"

namespace volta::cpu {

namespace {

// Split from 2^16 FLOP: a 128 x 128 decode product (64 KB, 2^15) finishes on one core before a
// second would have joined (batch-1 decode at 2 threads: 20.3k -> 21.4k tokens/s).
constexpr double kSplitFlops = 1 << 16;

// Columns per task of the small-M path on a packed weight. Up to the wide tile's rows (decode at
// batch 1 or 2) each thread takes an equal share of whole half tiles, so at two threads each
// core reads half of every weight, the same half every token (the bits do not depend on the
// split: every column is its own chain); more rows: half tiles, as on a plain weight.
int64_t small_packed_task_cols(MatmulIsa isa, int64_t M, int64_t N, int64_t K) {
  const double flops = 2.0 * static_cast<double>(M * N) * static_cast<double>(K);
  const int64_t half = matmul_small_cols(isa, false);
  if (flops < kSplitFlops) return N;
  if (M > matmul_small_rows(isa, true)) return half;
  return std::min(N, round_up(ceil_div(N, std::max(1, num_threads())), half));
}

}  // namespace

void gemm_small_packed(MatmulIsa isa, DType dtype, MatView A, const void* packed_b, int64_t kc, float* C, int64_t ldc, int64_t M,
                       int64_t n0, int64_t cols, int64_t N, int64_t K) {
  const bool half = dtype != DType::f32, bf16 = dtype == DType::bf16;
  const bool wide = M <= matmul_small_rows(isa, true);
  const int64_t nr = matmul_tile(isa).cols, hc = matmul_small_cols(isa, false);
  // B's values from `offset` on (TileArgs::b points at half weights as their bits).
  const auto values = [&](int64_t offset) {
    return half ? reinterpret_cast<const float*>(static_cast<const uint16_t*>(packed_b) + offset)
                : static_cast<const float*>(packed_b) + offset;
  };
  // Batched decode past the half tile's rows (AVX2: 3 rows on): the rows in as few groups as
  // the group tile allows, as even as can be (8 rows: 4 + 4, not 6 + 2, nor 3 + 3 + 2), each
  // group over all of the task's columns. 1 thread, four layers of TinyLM's products from L3
  // (BM_DecodeGemvs, us): 8 rows 204 -> 153, 12 rows 297 -> 205, 3 rows 92 -> 64. Two rows
  // keep the half tile (59 us; one panel at a time, 4 chains, took 71).
  // Half weights take the same groups, widened in registers, one panel at a time even for 3 rows
  // (bf16, BM_DecodeGemvsBf16: 3 rows 104 -> 93 us, two panels at a time 133; 8 rows 205 -> 164,
  // 12 rows 289 -> 223). Widening the task's panels of a K block into scratch first and running
  // the f32 tiles on them measured 15-60% slower.
  const bool grouped = M > matmul_small_rows(isa, false) && !(half && !matmul_has_half_tiles(isa));
  const int64_t group_max = grouped ? matmul_row_group_rows(isa) : 0;
  for (int64_t p0 = 0; p0 < K; p0 += kc) {
    const int64_t kb = std::min(kc, K - p0);
    const int64_t block = p0 * N;  // panel j (its first column n) at block + n * kb
    if (group_max > 0) {
      const int64_t groups = ceil_div(M, group_max);
      for (int64_t g = 0, i = 0; g < groups; ++g) {
        const int64_t rows = ceil_div(M - i, groups - g);
        TileArgs t{.rows = rows, .k = kb, .a = A.data + i * A.rs + p0 * A.cs, .a_rs = A.rs, .a_cs = A.cs, .b = nullptr,
                   .b_rs = nr, .c = nullptr, .ldc = ldc, .accumulate = p0 > 0};
        for (int64_t j = n0, end = n0 + cols; j < end;) {
          const bool pair = rows == 3 && !half && j + 2 * nr <= end;
          t.b = values(block + j * kb), t.c = C + i * ldc + j, t.b_ps = pair ? nr * kb : 0;
          if (half) run_row_group_half_tile(isa, bf16, t);  // (its rows and panels are what it takes)
          else run_row_group_tile(isa, t);
          j += pair ? 2 * nr : nr;
        }
        i += rows;
      }
      continue;
    }
    const auto tile = [&](bool w, int64_t j, int64_t rows, int64_t tiles) {
      for (int64_t i = 0; i < M; i += rows) {
        const TileArgs t{.rows = std::min(rows, M - i), .k = kb, .a = A.data + i * A.rs + p0 * A.cs, .a_rs = A.rs,
                         .a_cs = A.cs, .b = values(block + j * kb), .b_rs = nr, .c = C + i * ldc + j, .ldc = ldc,
                         .accumulate = p0 > 0, .b_ps = nr * kb, .tiles = tiles};
        if (half) run_small_half_tile(isa, w, bf16, t);
        else run_small_tile(isa, w, t);
      }
    };
    int64_t j = n0;
    const int64_t end = n0 + cols, sc = matmul_small_cols(isa, wide);
    if (const int64_t whole = (end - j) / sc; whole > 0) {  // the task's whole wide tiles in one call
      tile(wide, j, matmul_small_rows(isa, wide), whole);
      j += whole * sc;
    }
    for (; j + hc <= end; j += hc) tile(false, j, matmul_small_rows(isa, false), 1);
    for (; j < end; j += nr) {  // one panel: a contiguous [kb, nr] matrix (half weights widened whole)
      const float* b = values(block + j * kb);
      if (half) {
        float* wide_b = half_weights_scratch(kb * nr);
        widen_half(isa, bf16, static_cast<const uint16_t*>(packed_b) + block + j * kb, wide_b, kb * nr);
        b = wide_b;
      }
      for (int64_t i = 0; i < M; ++i)
        run_row_tile(isa, nr / matmul_narrow_cols(isa),
                     {.rows = 1, .k = kb, .a = A.data + i * A.rs + p0 * A.cs, .a_rs = A.rs, .a_cs = A.cs, .b = b,
                      .b_rs = nr, .c = C + i * ldc + j, .ldc = ldc, .accumulate = p0 > 0});
    }
  }
}

void gemm_small_packed_all(MatmulIsa isa, DType dtype, MatView A, const void* packed_b, int64_t kc, float* C, int64_t ldc,
                           int64_t M, int64_t N, int64_t K, const MatmulEpilogue* ep) {
  if (M <= 0 || N <= 0) return;
  if (ep && !ep->active()) ep = nullptr;
  if (K <= 0) {  // an empty sum (written outside tasks: in a team, by one rank)
    run_alone([&](int64_t) {
      for (int64_t m = 0; m < M; ++m) std::fill_n(C + m * ldc, N, 0.0f);
      if (ep) ep->apply(C, M, N);
    });
    return;
  }
  const int64_t task_cols = small_packed_task_cols(isa, M, N, K), nt = ceil_div(N, task_cols);
  const int64_t elem = dtype == DType::f32 ? 4 : 2;
  parallel_for_resident(packed_b, task_cols * K * elem, nt, [&](int64_t t) {
    const int64_t n0 = t * task_cols, cols = std::min(task_cols, N - n0);
    gemm_small_packed(isa, dtype, A, packed_b, std::clamp<int64_t>(kc, 1, K), C, ldc, M, n0, cols, N, K);
    if (ep) ep->apply(C + n0, M, cols);
  });
}

}  // namespace volta::cpu
