// The CPU backend's f32 matmul: a packed, cache-blocked GEMM on register-tile microkernels
// (matmul_kernels.cpp), with a direct path for decode shapes (M <= 8).
//
// Determinism: every element of C is one chain of fused multiply-adds in k order starting from
// +0; K blocks continue the chain from the value stored in C. Packing only moves operands, tiles
// and tasks only choose which elements are computed together, so the bits depend on none of the
// blocking parameters, the tile, the ISA (all kernels fuse), the task split or the thread count.
// The task list is a function of the shape and the blocking alone (see parallel.h), but for the
// small-M path on a packed weight, which cuts its columns into one share per thread.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_tile.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

constexpr int64_t kInPlaceB = 1 << 13;  // floats of a row-major B read in place at most (32 KiB)
constexpr int64_t kL1Floats = 1 << 13;   // floats of an operand block that may still be in L1 (32 KiB)
constexpr int64_t kPackACols = 128;     // columns of C past which a task packs a row-major A

// Per-thread packing buffers, 64-byte aligned and grown on demand. A task fills what it reads
// before reading it, so leftovers from earlier tasks never reach a result.
class Scratch {
 public:
  enum Slot { kA, kB, kEdge, kSharedA, kSharedB, kHalfWeights, kSlots };
  float* get(Slot slot, int64_t floats) {
    const auto n = static_cast<size_t>(floats);
    if (cap_[slot] < n) {
      buf_[slot].reset(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
      cap_[slot] = n;
    }
    return buf_[slot].get();
  }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::array<std::unique_ptr<float, Free>, kSlots> buf_;
  std::array<size_t, kSlots> cap_{};
};
thread_local Scratch t_scratch;

// Runs a tile whose output is only `w` columns wide (the right edge of C): the kernel writes a
// full-width scratch tile, of which the w valid columns are copied out.
template <typename Run>
void edge_tile(TileArgs t, int64_t w, int64_t full_cols, Run run) {
  constexpr int64_t kMaxTile = 16 * 64;  // >= rows * cols of every kernel
  alignas(64) float tmp[kMaxTile];
  float* c = t.c;
  const int64_t ldc = t.ldc;
  if (t.accumulate)
    for (int64_t r = 0; r < t.rows; ++r) std::memcpy(tmp + r * full_cols, c + r * ldc, static_cast<size_t>(w) * sizeof(float));
  t.c = tmp;
  t.ldc = full_cols;
  run(t);
  for (int64_t r = 0; r < t.rows; ++r) std::memcpy(c + r * ldc, tmp + r * full_cols, static_cast<size_t>(w) * sizeof(float));
}

// B packed once for all tasks of a product (see gemm_batch): the K block at p0 (depth kb) holds
// the panels of all `ld` (padded) columns of B, panel j at j * kb, from data + p0 * ld on; a task
// starting at column col0 reads its panels from col0 * kb on. data == nullptr: the task packs
// its own columns.
struct PackedB {
  const float* data = nullptr;
  int64_t ld = 0, col0 = 0;
};

// A transposed A packed once for all tasks (see gemm_batch): the K block at p0 starts at
// data + p0 * ld, its panels of tile rows side by side; a task's panels from row0 * kb on.
struct PackedA {
  const float* data = nullptr;
  int64_t ld = 0, row0 = 0;
};

// One task of the packed path: C[rows, cols] = A[rows, K] @ B[K, cols], K in blocks of kc. For
// each K block: pack the task's B columns once (unless packed for all tasks already), then for
// each mc block of rows pack A and sweep the tiles, each packed B panel (kc x tile cols, L1)
// against the A panels (mc x kc, L2). `sa`: A packed for all tasks already. `ep` (active) is applied
// to each block of rows once its last K block is done, while its rows of C are still in L2.
void packed_block(MatmulIsa isa, const MatmulBlocking& bl, MatView A, MatView B, const PackedB& shared, float* C,
                  int64_t ldc, int64_t rows, int64_t cols, int64_t K, const PackedA& sa = {},
                  const MatmulEpilogue* ep = nullptr) {
  const MatmulTile tile = matmul_tile(isa);
  const int64_t kc = std::min(bl.kc, K);
  const int64_t mc = std::min(matmul_row_block(bl.mc, rows, tile.rows), round_up(rows, tile.rows));
  float* ap = t_scratch.get(Scratch::kA, mc * kc);
  // A small row-major B of whole panels (attention's P @ V, dS @ K) is read in place: its rows
  // already are what packing would produce, and it stays in L1 anyway.
  const bool b_in_place = !shared.data && B.cs == 1 && cols % tile.cols == 0 && cols * K <= kInPlaceB;
  float* own_b = shared.data || b_in_place ? nullptr : t_scratch.get(Scratch::kB, round_up(cols, tile.cols) * kc);
  // Each value of A meets 2 * cols FLOPs: for narrow C packing A (a transpose) costs more than it
  // saves, and the kernel reads A in place (a transposed A already has unit row stride; packing
  // it measured no faster). The bar is in columns, not panels of B: with AVX2's 16-wide panels
  // the training step's 128-column products ran 3-10% faster in place than packed on a Zen 3
  // (768x128x512 hot: 80-85 -> 89-92 GFLOP/s). Rows 4 KiB apart compete for the same L1 sets,
  // so such an A is packed anyway.
  // A right edge of a few columns runs lanes along the rows, which needs each k's row values
  // adjacent: packed.
  const int64_t narrow = matmul_narrow_cols(isa), edge_max = matmul_column_edge_max(isa);
  const bool column_edge = cols % tile.cols != 0 && cols % tile.cols <= edge_max;
  const bool pack_a_rows = A.rs != 1 && (cols > kPackACols || A.rs % 1024 == 0 || column_edge);
  // K block p0 of the task's columns in a B packed for all tasks.
  const auto shared_block = [&](int64_t p0) { return shared.data + p0 * shared.ld + shared.col0 * std::min(kc, K - p0); };
  // One mc block of rows against one K block of B (its panels from bp on, b_step floats apart,
  // their rows b_rs apart).
  const auto block = [&](int64_t p0, int64_t i0, const float* bp, int64_t b_step, int64_t b_rs) {
    const int64_t kb = std::min(kc, K - p0);
    const int64_t mrows = std::min(mc, rows - i0);
    MatView a{A.data + i0 * A.rs + p0 * A.cs, A.rs, A.cs};
    int64_t panel_stride = tile.rows * a.rs;  // from one tile's rows to the next
    if (sa.data) {
      a = {sa.data + p0 * sa.ld + (sa.row0 + i0) * kb, 1, tile.rows};
      panel_stride = tile.rows * kb;
    } else if (pack_a_rows) {
      pack_a(isa, a, mrows, kb, tile.rows, ap);
      a = {ap, 1, tile.rows};
      panel_stride = tile.rows * kb;
    }
    // A B packed before the product (a weight, pack_matmul_weights) comes from memory or a far
    // cache: each column of tiles prefetches the next panel into L2, its lines spread over the
    // tiles (for the K block's last panel, the next K block's first).
    const int64_t tiles_down = ceil_div(mrows, tile.rows);
    // Operands written long before (a weight gradient's activation, a d-input's gradient) come
    // from L3 or memory. Where they are read in place, or packed by this task, their next lines
    // are prefetched into L2 a few before each tile: an A read in place (the kernel's strided
    // rows; a block bigger than L1) the next tile's rows, during the first column of tiles; a
    // row-major B this task packs the next K block's rows of its columns, spread over the last
    // row block's tiles (cold A: 768x128x512 134 -> 145 GFLOP/s at 1 thread; cold B:
    // 128x512x768 115 -> 123).
    const bool ahead_a = !sa.data && !pack_a_rows && a.cs == 1 && a.rs != 1 && mrows * kb > kL1Floats;
    const int64_t a_lines = ceil_div(kb, 16);
    const bool ahead_b = own_b && B.cs == 1 && p0 + kc < K && i0 + mc >= rows;
    const int64_t b_row_lines = ceil_div(cols, 16), b_lines = ahead_b ? std::min(kc, K - p0 - kc) * b_row_lines : 0;
    const int64_t b_per_tile = ceil_div(b_lines, tiles_down * ceil_div(cols, tile.cols));
    int64_t b_line = 0, b_row = 0, b_col = 0;  // b_line = b_row * b_row_lines + b_col
    // The epilogue's operands (a stored gelu', a residual: written a forward pass before, from
    // memory) are fetched during the last K block, each tile's lines as it starts, so that the
    // row block's epilogue finds them in L2.
    const bool ep_last = ep && p0 + kb == K;
    const float* ep_ops[2] = {ep_last ? ep->pre : nullptr, ep_last ? ep->residual : nullptr};
    const int64_t panel_lines = kb * tile.cols * static_cast<int64_t>(sizeof(float)) / 64;
    const int64_t lines_per_tile = std::min(kb, ceil_div(panel_lines, tiles_down));
    for (int64_t j = 0; j < cols; j += tile.cols) {
      const int64_t w = std::min(tile.cols, cols - j);
      const float* b_ahead = nullptr;
      if (shared.data && j + tile.cols < cols) b_ahead = bp + (j + tile.cols) * b_step;
      else if (shared.data && p0 + kc < K) b_ahead = shared_block(p0 + kc);
      if (w <= edge_max && a.rs == 1) {  // a few last columns: lanes along the rows
        run_column_edge(isa, {.rows = mrows, .k = kb, .cols = w, .a = a.data, .panel_stride = panel_stride, .a_cs = a.cs,
                              .b = bp + j * b_step, .b_rs = b_rs, .c = C + i0 * ldc + j, .ldc = ldc, .accumulate = p0 > 0});
        continue;
      }
      // One TileArgs per column of tiles, its per-tile fields set in the loop: built afresh, it
      // was zeroed with `rep stos` each time, and the tile counter replaces two divisions (together
      // a tenth of a 6 x 16 tile's k loop when k is 128).
      TileArgs t{.rows = 0, .k = kb, .a = a.data, .a_rs = a.rs, .a_cs = a.cs, .b = bp + j * b_step, .b_rs = b_rs,
                 .c = nullptr, .ldc = ldc, .accumulate = p0 > 0};
      for (int64_t i = 0, ti = 0; i < mrows; i += tile.rows, ++ti) {
        // The next tile down this column of tiles, else the top of the next column.
        t.c_next = i + tile.rows < mrows ? C + (i0 + i + tile.rows) * ldc + j
                   : j + tile.cols < cols ? C + i0 * ldc + j + tile.cols
                                          : nullptr;
        const int64_t first_line = ti * lines_per_tile;
        t.rows = std::min(tile.rows, mrows - i);
        t.a = a.data + ti * panel_stride;
        t.c = C + (i0 + i) * ldc + j;
        t.b_next = b_ahead ? b_ahead + first_line * 16 : nullptr;
        t.b_next_lines = std::max<int64_t>(0, std::min(lines_per_tile, panel_lines - first_line));
        for (const float* op : ep_ops)
          for (int64_t r = 0; op && r < t.rows; ++r) {  // the tile's first and last column of each row
            const float* at = op + (t.c - ep->out) + r * ep->N;
            __builtin_prefetch(at, 0, 2);
            __builtin_prefetch(at + w - 1, 0, 2);
          }
        if (ahead_a && j == 0)
          for (int64_t r = i + tile.rows; r < std::min(mrows, i + 2 * tile.rows); ++r)
            for (int64_t l = 0; l < a_lines; ++l) __builtin_prefetch(a.data + r * a.rs + l * 16, 0, 2);
        for (int64_t l = 0; l < b_per_tile && b_line < b_lines; ++l, ++b_line) {
          __builtin_prefetch(B.data + (p0 + kc + b_row) * B.rs + b_col * 16, 0, 2);
          if (++b_col == b_row_lines) b_col = 0, ++b_row;
        }
        if (w == tile.cols) run_tile(isa, t);
        else if (w == narrow) run_narrow_tile(isa, t);
        else if (w < narrow) edge_tile(t, w, narrow, [isa](const TileArgs& e) { run_narrow_tile(isa, e); });
        else edge_tile(t, w, tile.cols, [isa](const TileArgs& e) { run_tile(isa, e); });
      }
    }
  };
  // K block p0 of B as block() reads it: in place, packed for all tasks, or packed here into own_b.
  const auto k_block = [&](int64_t p0, const auto& f) {
    const int64_t kb = std::min(kc, K - p0);
    if (b_in_place) return f(B.data + p0 * B.rs, int64_t{1}, B.rs);
    if (shared.data) return f(shared_block(p0), kb, tile.cols);
    pack_b(isa, {B.data + p0 * B.rs, B.rs, B.cs}, kb, cols, tile.cols, own_b);
    return f(own_b, kb, tile.cols);
  };
  // The epilogue on the block of rows at i0, once its last K block is done.
  const auto finish_rows = [&](int64_t i0) {
    if (ep) ep->apply(C + i0 * ldc, std::min(mc, rows - i0), cols);
  };
  // The floats of the task's C that stay in L2 from one K block to the next: what the block of
  // A and B's K block of the task's columns leave of it (this CPU's L2, not one machine's: a
  // fixed 2 MiB, a Xeon's L2, kept the 16384 x 65 x 384 head's 1 MiB tasks in K-block order on
  // a Zen 4's 1 MiB L2, C going to L3 and back: 64-68 -> 73-79 GFLOP/s at 1 thread).
  const int64_t cached_c = cpu_l2_bytes() / static_cast<int64_t>(sizeof(float)) - kc * (mc + round_up(cols, tile.cols));
  if ((shared.data || b_in_place) && K > kc && rows * cols > cached_c) {
    // All of B is readable already and the task's C is too big to stay cached between K
    // blocks: each block of rows runs all its K blocks in turn, so its tiles of C stay in L2
    // instead of going to memory and back once per K block (for a 16384 x 384 x 1536 product, C
    // would pass 8 times). A smaller C keeps the K-block order, which reuses each K block of B
    // over all rows (the training step's products measured 3% slower the other way).
    for (int64_t i0 = 0; i0 < rows; i0 += mc) {
      for (int64_t p0 = 0; p0 < K; p0 += kc) k_block(p0, [&](const float* bp, int64_t b_step, int64_t b_rs) { block(p0, i0, bp, b_step, b_rs); });
      finish_rows(i0);
    }
    return;
  }
  for (int64_t p0 = 0; p0 < K; p0 += kc)  // each K block of B (packed here unless it is already), read by all rows
    k_block(p0, [&](const float* bp, int64_t b_step, int64_t b_rs) {
      for (int64_t i0 = 0; i0 < rows; i0 += mc) {
        block(p0, i0, bp, b_step, b_rs);
        if (p0 + kc >= K) finish_rows(i0);
      }
    });
}

// Columns [0, w) of a small-M product, w the right edge of B (the view ends at B's last column),
// with a kernel `vecs` vectors wide (vw floats >= w). A full-width read of a row of B runs past
// the edge into the next row, which is inside B for all rows up to `inside`; those rows are read
// in place, the last few from a zero-padded copy, continuing the same chains (all rows when B's
// rows are `padded` to whole vectors). Lanes past w are never stored. `run` is the kernel.
template <typename Run>
void small_edge(MatmulIsa isa, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t w, int64_t vw, int64_t K,
                bool padded, Run run) {
  const int64_t inside = w == vw || padded ? K : std::max<int64_t>(0, K - ceil_div(vw - w, B.rs));
  auto tile = [&](const TileArgs& e) {
    if (w == vw) run(e);
    else edge_tile(e, w, vw, run);
  };
  TileArgs t{.rows = M, .k = inside, .a = A.data, .a_rs = A.rs, .a_cs = A.cs, .b = B.data, .b_rs = B.rs, .c = C,
             .ldc = ldc, .accumulate = false};
  if (inside > 0) tile(t);
  if (inside == K) return;
  float* tail = t_scratch.get(Scratch::kEdge, (K - inside) * vw);
  pack_b(isa, {B.data + inside * B.rs, B.rs, 1}, K - inside, w, vw, tail);
  t = {.rows = M, .k = K - inside, .a = A.data + inside * A.cs, .a_rs = A.rs, .a_cs = A.cs, .b = tail, .b_rs = vw, .c = C,
       .ldc = ldc, .accumulate = inside > 0};
  tile(t);
}

// One task of the small-M path (M <= 4, row-major B): C[M, cols] = A @ B[:, cols] with B
// read in place, all of K in one pass (each row of C stays in registers). The right edge runs
// row by row through one kernel as wide as it is (all its chains interleaved: for N = 65 the
// last column's chain overlaps the others), or one vector at a time where there is no such kernel.
// `padded`: B's rows are readable to the next whole vector past cols.
void small_block(MatmulIsa isa, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t cols, int64_t K,
                 bool padded = false) {
  // One or two rows: the wide tile (more chains per row). More rows: the half tile, so each
  // pass over B serves twice the rows (B is the weight matrix, read from L2 or L3).
  const bool wide = M <= matmul_small_rows(isa, true);
  const int64_t sc = matmul_small_cols(isa, wide), sr = matmul_small_rows(isa, wide), nw = matmul_narrow_cols(isa);
  int64_t j = 0;
  for (; j + sc <= cols; j += sc)
    for (int64_t i = 0; i < M; i += sr)
      run_small_tile(isa, wide, {.rows = std::min(sr, M - i), .k = K, .a = A.data + i * A.rs, .a_rs = A.rs, .a_cs = A.cs,
                                 .b = B.data + j, .b_rs = B.rs, .c = C + i * ldc + j, .ldc = ldc, .accumulate = false});
  if (j == cols) return;
  const int64_t w = cols - j, vecs = ceil_div(w, nw);
  if (vecs <= matmul_row_tile_vectors(isa)) {
    if (w % nw != 0 && !padded) {  // B's last vector through a lane mask, all of K in place
      bool done = true;
      for (int64_t i = 0; i < M && done; ++i)
        done = run_masked_row_tile(isa, vecs, w % nw,
                                   {.rows = 1, .k = K, .a = A.data + i * A.rs, .a_rs = A.rs, .a_cs = A.cs, .b = B.data + j,
                                    .b_rs = B.rs, .c = C + i * ldc + j, .ldc = ldc, .accumulate = false});
      if (done) return;
    }
    for (int64_t i = 0; i < M; ++i)
      small_edge(isa, {A.data + i * A.rs, A.rs, A.cs}, {B.data + j, B.rs, 1}, C + i * ldc + j, ldc, 1, w, vecs * nw, K,
                 padded, [isa, vecs](const TileArgs& e) { run_row_tile(isa, vecs, e); });
    return;
  }
  for (; j < cols; j += nw)
    small_edge(isa, A, {B.data + j, B.rs, 1}, C + j, ldc, M, std::min(nw, cols - j), nw, K, padded,
               [isa](const TileArgs& e) { run_narrow_tile(isa, e); });
}

constexpr int64_t kSmallBlockRows = 4;  // rows one small_block takes (its kernels' limit)

// small_block over M rows, kSmallBlockRows at a time (each pass reads B[:, cols] once).
void small_blocks(MatmulIsa isa, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t cols, int64_t K,
                  bool padded = false) {
  for (int64_t i = 0; i < M; i += kSmallBlockRows)
    small_block(isa, {A.data + i * A.rs, A.rs, A.cs}, B, C + i * ldc, ldc, std::min(kSmallBlockRows, M - i), cols, K, padded);
}

// Small M with a transposed B (decode: q @ k_cache^T, x @ wte^T): the task's columns of B are
// transposed into a k-major buffer with rows padded to whole vectors, read by the same kernels.
void small_block_transposed_b(MatmulIsa isa, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t cols,
                              int64_t K) {
  const int64_t ld = round_up(cols, matmul_narrow_cols(isa));
  float* bt = t_scratch.get(Scratch::kB, K * ld);
  pack_b(isa, B, K, cols, ld, bt);  // one zero-padded panel ld wide: (p, c) at [p * ld + c]
  small_blocks(isa, A, {bt, ld, 1}, C, ldc, M, cols, K, /*padded=*/true);
}

constexpr int64_t kSmallM = 8;                // decode-like shapes (batch <= 8): a row-major B read in place
constexpr int64_t kSmallTaskCols = 128;       // columns of C per small-M task...
// ...unless the product is smaller: then one task. Decode's GEMVs (1 x 128 x 384 is 2^16.6 FLOP)
// are split, so that at two threads each core reads its own columns of every weight, token after
// token, instead of one core taking the whole of each of the smaller ones (batch-1 decode of the
// shakespeare model at 2 threads: 11.3-11.6k -> 13.9-14.2k tokens/s; 1 thread unchanged).
constexpr double kSmallSplitFlops = 1 << 14;
// Up to kSmallWideM rows (batched decode) take the small-M path too when C is at least a task
// of columns wide: its wide kernels reading B in place beat the packed path's 12 x 32 tiles
// there (12 x 512 x 128 with the weight in L2: 15.7 -> 9.8 us; batch-12 decode at 1 thread
// 29.4k -> 36-37k tokens/s). Narrower products (attention's heads) measured slower that way.
constexpr int64_t kSmallWideM = 16;
bool small_m(int64_t M, int64_t N) { return M <= kSmallM || (M <= kSmallWideM && N >= kSmallTaskCols); }

constexpr int64_t kMinTasks = 4;        // enough tasks to share out over a few threads...
constexpr double kSplitFlops = 1 << 20;  // ...for problems big enough to be worth it
constexpr int64_t kMaxSharedB = int64_t{1} << 23;  // floats of B packed for all tasks at most (32 MiB)
constexpr int64_t kMaxSharedA = int64_t{1} << 23;  // and of a transposed A
constexpr int64_t kSharedPackPanels = 4;           // panels of B per task of that packing pass
constexpr double kSharedPackFlops = 1 << 24;       // products smaller than this pack nothing for all tasks

// Task blocks of C for the packed path: all rows by nc columns (rounded to the tile), cut (the
// larger side first) while the batch has fewer than kMinTasks tasks. Rows are cut into equal
// parts of whole tiles, so the tasks a thread takes weigh the same (768 rows in 4 parts of 192,
// not 144-row blocks and a 48-row rest, which left one of two threads idle a fifth of the time).
// Rows that fit one mc block (a weight gradient's M, a layer's width) keep together while the
// columns can be cut down to two panels: halving 128 rows gave tiles of 72 and 56 rows and a
// separate pass packing B for both (the 128 x 512 x 768 weight gradient: 0.50 -> 0.37 ms at 2
// threads). Depends on the shape and the blocking only.
std::pair<int64_t, int64_t> task_blocks(MatmulIsa isa, const MatmulBlocking& bl, int64_t mats, int64_t M, int64_t N,
                                        int64_t K) {
  const MatmulTile tile = matmul_tile(isa);
  int64_t mb = round_up(M, tile.rows), row_parts = 1;
  int64_t nb = std::min(round_up(bl.nc, tile.cols), round_up(N, tile.cols));
  const double flops = 2.0 * static_cast<double>(mats) * static_cast<double>(M * N) * static_cast<double>(K);
  while (mats * ceil_div(M, mb) * ceil_div(N, nb) < kMinTasks && flops >= kSplitFlops) {
    const bool rows_fit = mb <= matmul_row_block(bl.mc, mb, tile.rows) && nb > 2 * tile.cols;
    if ((nb / tile.cols >= mb / tile.rows || rows_fit) && nb > tile.cols) nb = round_up(nb / 2, tile.cols);
    else if (mb > tile.rows) mb = round_up(ceil_div(M, row_parts *= 2), tile.rows);
    else break;
  }
  return {mb, nb};
}

// Packs B of every matrix for all tasks, in the layout PackedB describes (`ld` padded columns per
// K block), as tasks of one K block by kSharedPackPanels panels: a parallel pass of its own.
void pack_shared_b(MatmulIsa isa, const MatmulBlocking& bl, std::span<const GemmOperands> mats, int64_t N, int64_t K,
                   int64_t ld, float* dst) {
  const int64_t nr = matmul_tile(isa).cols, kc = std::min(bl.kc, K), group = kSharedPackPanels * nr;
  const int64_t kblocks = ceil_div(K, kc), groups = ceil_div(N, group);
  parallel_for(static_cast<int64_t>(mats.size()) * kblocks * groups, [&](int64_t t) {
    const int64_t mat = t / (kblocks * groups), p0 = t / groups % kblocks * kc, j0 = t % groups * group;
    const MatView B = mats[static_cast<size_t>(mat)].B;
    const int64_t kb = std::min(kc, K - p0);
    pack_b(isa, {B.data + p0 * B.rs + j0 * B.cs, B.rs, B.cs}, kb, std::min(group, N - j0), nr,
           dst + mat * ld * K + p0 * ld + j0 * kb);
  });
}

}  // namespace

bool matmul_reads_packed_b(MatmulIsa isa, int64_t M, int64_t N, int64_t nr) {
  return nr == matmul_tile(isa).cols && (!small_m(M, N) || isa != MatmulIsa::kScalar);
}

bool matmul_small_packed(MatmulIsa isa, int64_t M, int64_t N) { return small_m(M, N) && isa != MatmulIsa::kScalar; }

void gemm_batch(MatmulIsa isa, MatmulBlocking bl, std::span<const GemmOperands> mats, int64_t ldc, int64_t M,
                int64_t N, int64_t K, const MatmulEpilogue* ep, const float* packed_b) {
  // In a team, an empty sum and the packed path (writes outside tasks; shared buffers) run on one rank.
  if (M == 0 || N == 0) return;
  const bool small = K > 0 && (packed_b ? matmul_small_packed(isa, M, N) : small_m(M, N) && (mats[0].B.cs == 1 || mats[0].B.rs == 1));
  if (!small && in_team()) return run_alone([&](int64_t) { gemm_batch(isa, bl, mats, ldc, M, N, K, ep, packed_b); });
  if (ep && !ep->active()) ep = nullptr;
  if (K == 0) {  // an empty sum
    for (const GemmOperands& g : mats) {
      for (int64_t m = 0; m < M; ++m) std::fill_n(g.C + m * ldc, N, 0.0f);
      if (ep) ep->apply(g.C, M, N);
    }
    return;
  }
  bl = {std::max<int64_t>(bl.kc, 1), std::max<int64_t>(bl.mc, 1), std::max<int64_t>(bl.nc, 1)};
  const auto count = static_cast<int64_t>(mats.size());
  const double flops = 2.0 * static_cast<double>(count * M * N) * static_cast<double>(K);
  if (small && packed_b) {  // (the scalar tile reads no panels) one matrix from gemm; any more, one after another
    for (const GemmOperands& g : mats) gemm_small_packed_all(isa, DType::f32, g.A, packed_b, bl.kc, g.C, ldc, M, N, K, ep);
    return;
  }
  if (small) {
    // A product this small is over before a second thread would join in: one task.
    // Past the wide kernels' rows the kernels are half as wide, and so may the tasks be: a
    // 128-wide product (an attention projection, an MLP's down-projection) then spreads over
    // two threads too.
    const int64_t task_cols = flops < kSmallSplitFlops ? N
                              : M > matmul_small_rows(isa, true) ? kSmallTaskCols / 2 : kSmallTaskCols;
    const int64_t nt = ceil_div(N, task_cols);
    auto task = [&](int64_t t) {
      const GemmOperands& g = mats[static_cast<size_t>(t / nt)];
      const int64_t n0 = (t % nt) * task_cols;
      const int64_t cols = std::min(task_cols, N - n0);
      if (g.B.cs == 1) small_blocks(isa, g.A, {g.B.data + n0, g.B.rs, 1}, g.C + n0, ldc, M, cols, K);
      else small_block_transposed_b(isa, g.A, {g.B.data + n0 * g.B.cs, 1, g.B.cs}, g.C + n0, ldc, M, cols, K);
      if (ep) ep->apply(g.C + n0, M, cols);
    };
    // One weight (a decode step's): its tasks stay on the same cores from call to call.
    if (count == 1) parallel_for_resident(mats[0].B.data, task_cols * K * static_cast<int64_t>(sizeof(float)), nt, task);
    else parallel_for(count * nt, task);
    return;
  }
  const std::pair<int64_t, int64_t> blocks = task_blocks(isa, bl, count, M, N, K);
  const int64_t mb = blocks.first, nb = blocks.second;  // not a structured binding: clang 14 cannot capture one
  const int64_t tm = ceil_div(M, mb), tn = ceil_div(N, nb);
  // Several row blocks read the same columns of B: pack B once, shared, instead of once per task.
  const int64_t ld = round_up(N, matmul_tile(isa).cols);
  // Packing for all tasks is a parallel pass of its own (a round a thread waits in), and its
  // panels are read by other cores than the ones that wrote them: a small product on several
  // threads packs in each task what the task reads (128^3 at 2 threads, three sets of rounds:
  // 42-110 -> 116-175 GFLOP/s). On one thread the shared pass only saves work.
  const bool pack_shared = num_threads() == 1 || flops >= kSharedPackFlops;
  // A weight packed when the plan was made (b_packed) is read as such by every task.
  const bool share_b = packed_b || (pack_shared && tm > 1 && count * ld * K <= kMaxSharedB);
  const float* shared = packed_b;
  if (share_b && !packed_b) {
    float* own = t_scratch.get(Scratch::kSharedB, count * ld * K);
    pack_shared_b(isa, bl, mats, N, K, ld, own);
    shared = own;
  }
  // A transposed A read by several tasks: packed once for all, in a pass of its own that reads
  // each K block's rows of the stored matrix in order. Read in place (as before when one task
  // reads it), such an operand is fetched in short pieces 4 KiB or more apart; cold (the weight
  // gradient's activation, written long before) that cost a third of the product.
  const MatView A0 = mats[0].A;
  const int64_t mr = matmul_tile(isa).rows, lda = round_up(M, mr), kc = std::min(bl.kc, K);
  // A row-major A whose rows several column tasks read is packed once for all of them too: each
  // task would otherwise read it in place through the strided kernel (its columns too few to pay
  // for packing their own copy), about a tenth slower per FLOP than the packed one.
  const bool transposed_a = A0.rs == 1 && A0.cs != 1, row_major_a = A0.cs == 1 && A0.rs != 1 && tn > 1;
  const bool share_a = pack_shared && count == 1 && tm * tn > 1 && (transposed_a || row_major_a) && lda * K <= kMaxSharedA;
  float* shared_a = share_a ? t_scratch.get(Scratch::kSharedA, lda * K) : nullptr;
  if (share_a) {
    // A transposed A in tasks of half a K block, each copying whole rows of the stored matrix in
    // order: the weight gradients' K of 768 is three blocks, and whole blocks left one of two
    // threads idle a third of the pass. (Halves of the rows instead measured up to a tenth
    // slower for 512 x 128 x 768, whose stored rows were then read in 1 KiB pieces.)
    const int64_t parts = transposed_a ? 2 : 1;
    parallel_for(parts * ceil_div(K, kc), [&](int64_t t) {
      const int64_t p0 = t / parts * kc, kb = std::min(kc, K - p0), half = ceil_div(kb, parts);
      const int64_t ka = t % parts * half, k = std::min(half, kb - ka);
      if (transposed_a) pack_a_transposed(A0.data + (p0 + ka) * A0.cs, A0.cs, M, k, kb, mr, shared_a + p0 * lda + ka * mr);
      else pack_a(isa, {A0.data + p0, A0.rs, 1}, M, kb, mr, shared_a + p0 * lda);
    });
  }
  parallel_for(count * tm * tn, [&](int64_t t) {
    const int64_t mat = t / (tm * tn);
    const GemmOperands& g = mats[static_cast<size_t>(mat)];
    const int64_t m0 = (t / tn % tm) * mb, n0 = t % tn * nb;
    const PackedB pb = share_b ? PackedB{shared + (packed_b ? 0 : mat * ld * K), ld, n0} : PackedB{};
    packed_block(isa, bl, {g.A.data + m0 * g.A.rs, g.A.rs, g.A.cs}, {g.B.data + n0 * g.B.cs, g.B.rs, g.B.cs}, pb,
                 g.C + m0 * ldc + n0, ldc, std::min(mb, M - m0), std::min(nb, N - n0), K,
                 share_a ? PackedA{shared_a, lda, m0} : PackedA{}, ep);
  });
}

void gemm(MatmulIsa isa, const MatmulBlocking& bl, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t N,
          int64_t K, const MatmulEpilogue* ep, const float* packed_b) {
  const GemmOperands g{A, B, C};
  gemm_batch(isa, bl, std::span(&g, 1), ldc, M, N, K, ep, packed_b);
}

void gemm_small(MatmulIsa isa, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t cols, int64_t K,
                bool padded) {
  small_blocks(isa, A, B, C, ldc, M, cols, K, padded);
}

int64_t matmul_packed_b_floats(MatmulIsa isa, int64_t N, int64_t K) { return round_up(N, matmul_tile(isa).cols) * K; }

void pack_b_once(MatmulIsa isa, const MatmulBlocking& bl, MatView B, int64_t N, int64_t K, float* dst) {
  const int64_t nr = matmul_tile(isa).cols, ld = round_up(N, nr), kc = std::min(std::max<int64_t>(bl.kc, 1), K);
  for (int64_t p0 = 0; p0 < K; p0 += kc)  // PackedB's layout: K block at p0 * ld, its panels side by side
    pack_b(isa, {B.data + p0 * B.rs, B.rs, B.cs}, std::min(kc, K - p0), N, nr, dst + p0 * ld);
}

void gemm_packed_b(MatmulIsa isa, const MatmulBlocking& bl, MatView A, const float* packed_b, int64_t N_packed, float* C,
                   int64_t ldc, int64_t M, int64_t n, int64_t K) {
  if (M == 0 || n == 0) return;
  if (K == 0) {
    for (int64_t m = 0; m < M; ++m) std::fill_n(C + m * ldc, n, 0.0f);
    return;
  }
  const MatmulBlocking b{std::max<int64_t>(bl.kc, 1), std::max<int64_t>(bl.mc, 1), std::max<int64_t>(bl.nc, 1)};
  // All of K in one block: column j's panel at packed_b + j * K, straight through the tiles.
  if (K <= b.kc && gemm_tiles(isa, A, packed_b, K, matmul_tile(isa).cols, C, ldc, M, n, K)) return;
  packed_block(isa, b, A, {nullptr, 0, 0}, PackedB{packed_b, round_up(N_packed, matmul_tile(isa).cols), 0}, C, ldc, M, n, K);
}

bool gemm_tiles(MatmulIsa isa, MatView A, const float* b, int64_t b_step, int64_t b_rs, float* C, int64_t ldc, int64_t rows,
                int64_t cols, int64_t K) {
  const MatmulTile tile = matmul_tile(isa);
  const int64_t narrow = matmul_narrow_cols(isa);
  if (K <= 0 || cols % narrow != 0) return false;
  TileArgs t;  // field by field: a brace initializer zeroed the whole struct first (a `rep stos` a call)
  t.k = K, t.a_rs = A.rs, t.a_cs = A.cs, t.b_rs = b_rs, t.ldc = ldc, t.accumulate = false;
  for (int64_t j = 0; j < cols;) {
    const bool full = cols - j >= tile.cols;
    t.b = b + j * b_step;
    for (int64_t i = 0; i < rows; i += tile.rows) {
      t.rows = std::min(tile.rows, rows - i);
      t.a = A.data + i * A.rs;
      t.c = C + i * ldc + j;
      if (full) run_tile(isa, t);
      else run_narrow_tile(isa, t);
    }
    j += full ? tile.cols : narrow;
  }
  return true;
}

float* half_weights_scratch(int64_t floats) { return t_scratch.get(Scratch::kHalfWeights, floats); }

}  // namespace volta::cpu
