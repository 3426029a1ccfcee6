// Internals of the CPU backend's f32 GEMM, shared by the op kernel (matmul.cpp; bf16 / f16
// weights: matmul_half.cpp), the microkernels (matmul_kernels.cpp, matmul_half_kernels.cpp), the
// packing and key-score transposes (matmul_transpose.cpp), the tuning cache (matmul_tuning.cpp),
// `volta tune matmul` and the tests.
//
// Contract of every path: each element of C is one chain of fused multiply-adds in k order,
// starting from +0; a K block continues the chain from the value stored in C. So the bits do not
// depend on blocking parameters, tile shapes, the ISA (all use FMA), the task split or threads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "volta/status.h"
#include "volta/tensor.h"

namespace volta::cpu {

// Counts of tiles, tasks and padded widths (positive b).
constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Microkernel families, best last. Chosen once from the CPU's features.
enum class MatmulIsa { kScalar, kAvx2, kAvx512 };

std::string_view matmul_isa_name(MatmulIsa isa);  // "scalar", "avx2", "avx512"
bool matmul_isa_supported(MatmulIsa isa);
MatmulIsa matmul_best_isa();
// The ISA the op kernel uses: the best one unless overridden (tests compare ISAs bit for bit).
MatmulIsa matmul_active_isa();
void set_matmul_isa_override(std::optional<MatmulIsa> isa);

// Register tile of C computed by one microkernel call: rows x cols.
struct MatmulTile {
  int64_t rows, cols;
};
MatmulTile matmul_tile(MatmulIsa isa);

// Cache blocking: a kc-deep slice of K at a time; A packed mc rows at a time (one task's rows),
// B packed nc columns at a time (one task's columns). mc and nc are rounded up to the tile.
struct MatmulBlocking {
  int64_t kc = 0, mc = 0, nc = 0;
  bool operator==(const MatmulBlocking&) const = default;
};
MatmulBlocking matmul_default_blocking(MatmulIsa isa);
// Bytes of this CPU's L2 (per core), as the C library reads them from CPUID; 1 MiB where it
// says nothing. The packed path's loop order depends on it (speed only: no bit does).
int64_t cpu_l2_bytes();
// Tuned blocking for this shape's class when the tuning cache has it, else the default.
MatmulBlocking matmul_blocking_for(MatmulIsa isa, int64_t M, int64_t N, int64_t K);
// Rows of A one block of the packed path holds, for `rows` rows and tiles of `tile_rows`: mc
// rounded to whole tiles, or all the rows where they are at most half a block more (a short
// second block would sweep all of B again for a few rows).
int64_t matmul_row_block(int64_t mc, int64_t rows, int64_t tile_rows);

// Element (i, j) of a strided f32 matrix is data[i * rs + j * cs].
struct MatView {
  const float* data;
  int64_t rs, cs;
};

// A matmul node's epilogue, applied by each task of the product to its own block of C as soon
// as the block is final (while it is still in cache): the bias on every row, then relu, gelu,
// gelu_grad (C times gelu'(pre)) or mul (pre times C), then the residual, each element with the
// bits of the separate add / relu / gelu / gelu_grad / mul / add kernels. `out` is the node's
// whole output, dense rows of N (where a block lies in it says which bias, pre and residual
// elements are its).
struct MatmulEpilogue {
  enum class Act { kNone, kRelu, kGelu, kGeluGrad, kMul };
  Act act = Act::kNone;
  const float* bias = nullptr;      // [N]
  const float* pre = nullptr;       // gelu_grad's or mul's x, laid out as out
  const float* residual = nullptr;  // added last (the separate add's bits), laid out as out
  const float* out = nullptr;
  int64_t N = 0;
  bool active() const { return bias != nullptr || act != Act::kNone || residual != nullptr; }
  void apply(float* c, int64_t rows, int64_t cols) const;  // c: a block of out, rows of N apart
};

// One matrix product of a batch.
struct GemmOperands {
  MatView A, B;
  float* C;
};
// The products of a batch, all M x N x K with row stride ldc, as one task list over the threads.
// `packed_b`: every matrix's B is this weight, already in the packed layout of
// ir/packed_weight.h with bl.kc rows per block and the ISA's tile columns per panel (see
// matmul_reads_packed_b), so no task packs B.
void gemm_batch(MatmulIsa isa, MatmulBlocking bl, std::span<const GemmOperands> mats, int64_t ldc, int64_t M, int64_t N,
                int64_t K, const MatmulEpilogue* ep = nullptr, const float* packed_b = nullptr);
// Whether gemm_batch reads a weight packed with nr columns per panel for M x N products (the
// packed path: a shape past the small-M path's, nr the ISA's tile width).
bool matmul_reads_packed_b(MatmulIsa isa, int64_t M, int64_t N, int64_t nr);

// C[M, N] (row stride ldc) = A[M, K] @ B[K, N] on the threads of parallel_for, with the given
// microkernels and blocking. The task list depends on (M, N, K, blocking) only. `ep` (when
// active; C must then lie in its output) is applied to each task's block.
void gemm(MatmulIsa isa, const MatmulBlocking& bl, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t N,
          int64_t K, const MatmulEpilogue* ep = nullptr, const float* packed_b = nullptr);

// B[K, N] packed once for several products that each read its first columns (a causal
// attention group's keys, against blocks of query rows): pack_b_once fills `dst` (at least
// matmul_packed_b_floats(isa, N, K) floats) for blocking `bl`; gemm_packed_b then computes
// C[M, n] = A @ B[:, :n] for any n <= N on the calling thread alone, with the bits of gemm
// (through gemm_tiles where all of K is one block and n ends on a whole vector).
int64_t matmul_packed_b_floats(MatmulIsa isa, int64_t N, int64_t K);
void pack_b_once(MatmulIsa isa, const MatmulBlocking& bl, MatView B, int64_t N, int64_t K, float* dst);
void gemm_packed_b(MatmulIsa isa, const MatmulBlocking& bl, MatView A, const float* packed_b, int64_t N_packed, float* C,
                   int64_t ldc, int64_t M, int64_t n, int64_t K);

// The small-M path over columns [n0, n0 + cols) of C[M, N] (row stride ldc) = A @ B, B [K, N] a
// weight packed when the plan was made (ir/packed_weight.h: blocks of kc rows, panels of the
// ISA's tile width), f32, bf16 or f16 (`dtype`; half weights need matmul_has_half_tiles), read in
// place: the wide tiles, the half-width ones, then single panels (half ones widened whole), each
// taking its vectors panel by panel (TileArgs::b_ps) and continuing each chain from C across the
// K blocks, so every element has the bits of the plain weight's product. n0 and cols are whole
// panels. A task's columns are then one contiguous piece of each K block: read in place from a
// row-major weight they are a band of every row, which (rows 2 KiB apart) falls into a fraction
// of L2's sets, and the half-weight GEMVs streamed such bands at half the packed f32 bandwidth.
void gemm_small_packed(MatmulIsa isa, DType dtype, MatView A, const void* packed_b, int64_t kc, float* C, int64_t ldc, int64_t M,
                       int64_t n0, int64_t cols, int64_t N, int64_t K);
// The whole small-M product on one packed weight, C = A @ B (+ the epilogue `ep`, each task on
// its own columns), its tasks placed by parallel_for_resident: what gemm_batch runs for a decode
// product, entered directly from the op kernels, which then skip the blocking lookup and the
// batch's general path on every token. M is a decode batch's (matmul_small_packed, or the half
// weights' own bound); an empty sum (K = 0) writes zeros, then the epilogue.
void gemm_small_packed_all(MatmulIsa isa, DType dtype, MatView A, const void* packed_b, int64_t kc, float* C, int64_t ldc,
                           int64_t M, int64_t N, int64_t K, const MatmulEpilogue* ep);
// Whether an M x N product on a packed weight takes the small-M path (gemm_small_packed).
bool matmul_small_packed(MatmulIsa isa, int64_t M, int64_t N);
// Whether the ISA has decode tiles on bf16 / f16 weights (run_small_half_tile).
bool matmul_has_half_tiles(MatmulIsa isa);

// C[rows, cols] = A[rows, K] @ B[K, cols] on the calling thread straight through the register
// tiles, with the bits of gemm: for products so small (attention's blocks of one head) that
// gemm's task list, blocking and packing cost more than they save. Column j of B is at
// b + j * b_step, its rows b_rs apart: a row-major B read in place (b_step 1), or panels from
// pack_b_once holding all of K in one block (b_step K, b_rs the tile width). False, with nothing
// done, where the kernels cannot read it so: cols not a multiple of matmul_narrow_cols(isa), or
// K = 0.
bool gemm_tiles(MatmulIsa isa, MatView A, const float* b, int64_t b_step, int64_t b_rs, float* C, int64_t ldc, int64_t rows,
                int64_t cols, int64_t K);

// The small-M path of gemm (decode shapes; any M, four rows per pass over B) for one task's
// columns: C[M, cols] (row stride ldc) = A @ B[:, cols] with a row-major B read in place;
// `padded`: B's rows are readable (zeros) up to the next whole vector past cols.
void gemm_small(MatmulIsa isa, MatView A, MatView B, float* C, int64_t ldc, int64_t M, int64_t cols, int64_t K,
                bool padded);
// This thread's buffer (64-byte aligned, at least `floats` long, one of the packing buffers) for
// the widened right edge of a decode task on half weights (matmul_half.cpp).
float* half_weights_scratch(int64_t floats);

// dst[i] = the f32 value of bf16 or f16 (`bf16`) src[i] for i < n, exactly, with the ISA's
// conversions (F16C, AVX-512) where it has them.
void widen_half(MatmulIsa isa, bool bf16, const uint16_t* src, float* dst, int64_t n);

// C[M, N] = A^T @ B for A stored [K, M] and B [K, N] (both row-major, C dense), K cut into
// `parts` slices, each a strict GEMM into its own partial C, the partials then added in slice
// order (matmul_split_k.cpp). The bits depend on `parts`, so run-to-run only unless it is fixed.
void gemm_split_k(MatmulIsa isa, const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K,
                  int64_t parts);

// ---- Microkernels (matmul_kernels.cpp) -------------------------------------------------------

// One register tile: C[rows, cols] (row stride ldc) = or += A[rows, k] @ B[k, cols].
// A(r, p) = a[r * a_rs + p * a_cs]; B(p, c) = b[p * b_rs + c], readable for a full tile width
// (packed panels are zero-padded). rows <= tile rows (small_rows for the small-M kernel);
// cols == the kernel's full width: the caller handles narrower edges through a scratch tile.
struct TileArgs {
  int64_t rows, k;
  const float* a;
  int64_t a_rs, a_cs;
  const float* b;
  int64_t b_rs;
  float* c;
  int64_t ldc;
  bool accumulate;
  // The C tile the caller runs next (rows x kernel width, row stride ldc), prefetched during
  // this one's k loop: a K block after the first starts by loading it. nullptr: none.
  const float* c_next = nullptr;
  // Lines of packed B the caller reads next (a weight streamed from memory), prefetched into
  // L2 one 64-byte line per k step: `b_next_lines` lines from b_next on. nullptr: none.
  const float* b_next = nullptr;
  int64_t b_next_lines = 0;
  // Small tiles only: B is a packed weight's panels (matmul_tile(isa).cols wide, rows b_rs
  // apart), the next panel b_ps floats on; 0: B's rows are contiguous.
  int64_t b_ps = 0;
  // Small tiles on panels only: this many tiles side by side in one call (columns and panels on
  // from c and b; matmul_tile.h's tile_at); other tiles run one.
  int64_t tiles = 1;
};
// Tile width matmul_tile(isa).cols; A packed or with unit row stride (a_rs == 1) or any strides.
void run_tile(MatmulIsa isa, const TileArgs& t);
// The same rows, matmul_narrow_cols(isa) columns (one vector): right edges of C.
void run_narrow_tile(MatmulIsa isa, const TileArgs& t);
int64_t matmul_narrow_cols(MatmulIsa isa);
// Unpacked A (any strides), B read in place; rows <= matmul_small_rows(isa, wide), width
// matmul_small_cols(isa, wide). The M = 1 (decode) path: many independent chains per row. Not
// for the scalar ISA when b_ps is set.
void run_small_tile(MatmulIsa isa, bool wide, const TileArgs& t);
int64_t matmul_small_rows(MatmulIsa isa, bool wide);
// Batched decode's tiles on a packed f32 weight, for more rows than the half tile holds: rows in
// groups of at most matmul_row_group_rows(isa) (0: the ISA keeps its half tiles), each group one
// panel at a time through the packed path's register tile with A read in place (t.b_ps == 0, B
// one panel: b_rs the panel width), or a group of exactly 3 rows two panels at a time (t.b_ps
// set). Either way 12 FMA chains, where AVX2's half tile (2 rows of 4 vectors) runs 8.
int64_t matmul_row_group_rows(MatmulIsa isa);
void run_row_group_tile(MatmulIsa isa, const TileArgs& t);
// The same on bf16 or f16 weights, one panel at a time only (t.b points at their values, b_rs in
// values), widened in registers as run_small_half_tile does. False where the ISA has no such tile.
bool run_row_group_half_tile(MatmulIsa isa, bool bf16, const TileArgs& t);
// run_small_tile (wide or half-width) on bf16 or f16 (`bf16`) weights: t.b points at the
// uint16_t values (b_rs and b_ps in values; b_ps set: a packed weight's panels), widened in
// registers, the bits of the f32 tile on the widened weights. False when the ISA has no such
// kernel (scalar; AVX2 without F16C).
bool run_small_half_tile(MatmulIsa isa, bool wide, bool bf16, const TileArgs& t);
// One row of C, `vecs` vectors of matmul_narrow_cols(isa) wide, A any strides, B in place;
// vecs <= matmul_row_tile_vectors(isa) (0: the ISA has none).
void run_row_tile(MatmulIsa isa, int64_t vecs, const TileArgs& t);
// The same with only `tail` (1 .. width - 1) lanes of the last vector in C and B, read and
// written through a lane mask (A(0, p) = a[p * a_cs]). False when the ISA has no such kernel.
bool run_masked_row_tile(MatmulIsa isa, int64_t vecs, int64_t tail, const TileArgs& t);
int64_t matmul_row_tile_vectors(MatmulIsa isa);
int64_t matmul_small_cols(MatmulIsa isa, bool wide);

// The last few columns of C (a right edge narrower than a vector), lanes along the rows: one
// vector holds one column of one panel of matmul_tile(isa).rows rows, whose values at each k
// are adjacent in A (a packed panel, or a transposed A read in place). Per column the kernel does
// one FMA per k for a whole panel where a one-vector tile would do one per row, each vector
// mostly padding. Every element is still its own FMA chain in k order.
struct ColumnEdgeArgs {
  int64_t rows, k, cols;      // rows of C (all panels), depth, columns (<= matmul_column_edge_max)
  const float* a;             // panel i at a + i * panel_stride; (r, p) at [p * a_cs + r]
  int64_t panel_stride, a_cs;
  const float* b;             // (p, c) at b[p * b_rs + c]
  int64_t b_rs;
  float* c;
  int64_t ldc;
  bool accumulate;
};
// The widest edge run_column_edge takes (0: the ISA has no such kernel).
int64_t matmul_column_edge_max(MatmulIsa isa);
void run_column_edge(MatmulIsa isa, const ColumnEdgeArgs& e);

// ---- Packing (matmul_pack.cpp) ----------------------------------------------------------------

// A[rows, kb] -> panels of `mr` rows: panel i holds (r, p) at [p * mr + r]. Rows past the end of
// the last panel are left unset: the kernel for a short panel reads only its rows.
void pack_a(MatmulIsa isa, MatView A, int64_t rows, int64_t kb, int64_t mr, float* dst);
// A transposed A (A(r, p) at a[p * a_cs + r]) of M rows, k of its K block's kb rows -> panels of
// `mr` rows (panel i at dst + i * kb, (r, p) at [p * mr + r] for p < k), reading the operand one
// k at a time: the rows of the stored matrix in order, whole.
void pack_a_transposed(const float* a, int64_t a_cs, int64_t M, int64_t k, int64_t kb, int64_t mr, float* dst);
// B[kb, cols] -> panels of `nr` columns: panel j holds (p, c) at [p * nr + c], zero-padded to a
// full panel because the kernel loads whole vectors.
void pack_b(MatmulIsa isa, MatView B, int64_t kb, int64_t cols, int64_t nr, float* dst);

// dst[p * dst_rs + r] = src[r * src_rs + p] for r < rows, p < k, and 0 for rows <= r < rows_out
// (zero padding of a panel): packs an operand whose k runs along its rows (a row-major A, a
// transposed B) into k-major panels. In-register 8 x 8 transposes for the vector ISAs; it only
// moves values.
void transpose_copy(MatmulIsa isa, const float* src, int64_t src_rs, int64_t rows, int64_t k, float* dst, int64_t dst_rs,
                    int64_t rows_out);

// s[j] = q[0, D) . k[j][0, D) for j < n, each the FMA chain over d from +0 that a matmul element
// is: one query row's attention scores, read from the key rows in place wherever they are (a
// cache and the new position share a block). AVX-512 and AVX2 transpose blocks of keys in
// registers.
void key_scores(MatmulIsa isa, const float* q, int64_t D, const float* const* k, int64_t n, float* s);

// One query row of key_scores_rows: s[j] = q . k[j] for j < n.
struct KeyScoreRow {
  const float* q;
  const float* const* k;
  int64_t n;
  float* s;
};
// key_scores for several query rows at once (a decode step's heads): the blocks of all rows
// run with their FMA chains interleaved, so a row of few keys does not wait alone on its chain's
// latency. Every score has the bits key_scores gives it.
void key_scores_rows(MatmulIsa isa, int64_t D, std::span<const KeyScoreRow> rows);

// One query row's scores against keys stored as columns (a transposed key cache [D, cap]):
// s[j] = q[0, D) . (kt[d ld + j])_d for j < n (n <= ld; rows d < D readable over [0, ld)).
struct KeyColumnRow {
  const float* q;
  const float* kt;
  int64_t ld, n;
  float* s;
};
// key_scores_rows for keys as columns (attention_columns.cpp): the same FMA chain over d from +0 for
// every score, so the same bits as the rows' form of the same keys, without its transposes.
void key_scores_columns(MatmulIsa isa, int64_t D, std::span<const KeyColumnRow> rows);

// ---- Tuning cache (matmul_tuning.cpp) ---------------------------------------------------------

// Shapes are tuned and looked up by class: each dimension rounded up to a power of two.
std::string matmul_shape_class(int64_t M, int64_t N, int64_t K);

// Whose measurements a cache file holds.
struct CpuSignature {
  std::string cpu;      // CPU model name
  std::string isa;      // matmul_isa_name(matmul_best_isa())
  std::string version;  // VOLTA_VERSION
  bool operator==(const CpuSignature&) const = default;
  std::string file_stem() const;  // file-name-safe "cpu_isa_vVERSION"
};
CpuSignature current_cpu_signature();

struct TunedEntry {
  std::string shape_class;
  int64_t m = 0, n = 0, k = 0;  // the shape that was measured
  MatmulBlocking blocking;
  double gflops = 0, default_gflops = 0;
};

// $VOLTA_CACHE_DIR, else $XDG_CACHE_HOME/volta, else $HOME/.cache/volta.
Result<std::string> volta_cache_dir();
// <cache dir>/matmul/<signature stem>.json
Result<std::string> matmul_tuning_path(const CpuSignature& sig);
// Makes the folder of the tuning file at `path` and checks that it takes files: asked before a
// tune's work, whose results it keeps.
Status make_tuning_dir(const std::string& path);
// Reads a cache file; an error when it is unreadable, malformed or has another signature.
Result<std::vector<TunedEntry>> read_matmul_tuning(const std::string& path, const CpuSignature& sig);
// Writes entries (sorted by class) atomically, creating directories.
Status write_matmul_tuning(const std::string& path, const CpuSignature& sig, std::vector<TunedEntry> entries);

// The in-memory cache the kernel consults: loaded from matmul_tuning_path() on first use (a
// missing, corrupt or foreign file leaves it empty). Thread-safe.
std::optional<MatmulBlocking> tuned_blocking(int64_t M, int64_t N, int64_t K);
// Replaces the in-memory entries (the tuner, after writing the file).
void set_tuned_entries(const std::vector<TunedEntry>& entries);
// Forgets the in-memory cache; the next lookup reads the file again (tests, tuner).
void reload_matmul_tuning();

// ---- The tuner (tuner.cpp) ----------------------------------------------------------------------

struct MatmulShape {
  int64_t m, n, k;
};
struct MatmulTuneOptions {
  int64_t runs = 5;     // timed samples of about 20 ms per candidate (the median counts)
  int64_t warmup = 1;   // untimed samples first
  double margin = 0.03;  // a tuned blocking is kept only when it beats the default by this fraction
};
struct MatmulTuneOutcome {
  TunedEntry entry;   // the best blocking found and its GFLOP/s against the default's
  bool kept = false;  // it beat the default by the margin, twice
};
// Searches the blocking of one shape with the best ISA's kernels on this thread count; an error
// if any candidate changes the bits of the product.
Result<MatmulTuneOutcome> tune_matmul_shape(MatmulShape s, const MatmulTuneOptions& options);
struct MatmulTuneSaved {
  std::string path;
  std::vector<TunedEntry> entries;
};
// Writes the winners (one per shape class) into this machine's cache file, replacing the tuned
// classes' old entries and keeping the others, and makes them the in-memory cache.
Result<MatmulTuneSaved> save_matmul_tuning(const std::vector<MatmulTuneOutcome>& outcomes);

}  // namespace volta::cpu
