// Matmul microkernels: one register tile of C per call, every element a chain of fused
// multiply-adds in k order. The vector kernels are written once on GCC vector types of W floats
// and compiled per ISA through target attributes (W = 16 is one zmm register with AVX-512, W = 8
// one ymm with AVX2); -ffp-contract=fast (set for the backend's files) turns `acc += x * b` into FMA.
// The scalar kernel calls std::fma, so it gives the same bits as the vector ones.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/cpu/isa.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_tile.h"

namespace volta::cpu {

namespace {

using namespace tile;  // NOLINT: the tile sizes and vector helpers of matmul_tile.h

#ifdef VOLTA_MATMUL_X86

// C[R, NV * W] = or += A[R, k] @ B[k, NV * W]. Inlined into each ISA's entry, whose target
// attribute decides the registers the vectors live in.
// The loops over rows and vectors are unrolled by pragma: unrolled only later, GCC keeps acc in a
// stack array, stored and reloaded around the k loop on every call (about 100 memory operations,
// several percent of a tile when k is short, as in attention).
// Panels: B is a weight in the packed path's layout (ir/packed_weight.h), read by the small tiles
// in place: each row's vectors come kPanelVecs at a time from panels t.b_ps apart.

template <int W, int R, int NV, bool PackedA, bool Panels>
[[gnu::always_inline]] inline void tile_once(const TileArgs& t) {
  using V = typename VecOf<W>::type;
  const auto load = [](const float* p) {  // unaligned load
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  };
  V acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) acc[r][j] = t.accumulate ? load(t.c + r * t.ldc + j * W) : V{};  // continue the chain
  const int64_t a_rs = PackedA ? 1 : t.a_rs;  // packed panels: the R values of one k are adjacent
  const float* a = t.a;
  const float* b = t.b;
  // One cache line of the next C tile per k step, while there are lines left (R rows of NV
  // vectors: NV * W * 4 / 64 lines per row).
  constexpr int64_t kLinesPerRow = (NV * W * 4 + 63) / 64, kLines = R * kLinesPerRow;
  const float* next = t.c_next;
  const float* b_next = t.b_next;
  const int64_t b_lines = b_next ? t.b_next_lines : 0;
  const auto step = [&] [[gnu::always_inline]] () {  // one k: an FMA per accumulator
    V bv[NV];
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) bv[j] = load(b + (Panels ? j / kPanelVecs * t.b_ps + j % kPanelVecs * W : j * W));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V x = splat<W>(a[r * a_rs]);
#pragma GCC unroll 16
      for (int j = 0; j < NV; ++j) acc[r][j] = fmadd(x, bv[j], acc[r][j]);
    }
    a += t.a_cs, b += t.b_rs;
  };
  if constexpr (W == 8) {
    // AVX2's 12 FMAs a k leave no room for two prefetch tests (measured 5-10% slower on a Zen 3,
    // and bimodal): the next C tile's lines are prefetched up front, and k goes two at a time.
    if (next)
#pragma GCC unroll 16
      for (int64_t l = 0; l < kLines; ++l) __builtin_prefetch(next + l / kLinesPerRow * t.ldc + l % kLinesPerRow * 16, 1, 3);
    int64_t p = 0;
    for (; p + 2 <= t.k; p += 2) {
      if (p < b_lines) {
        __builtin_prefetch(b_next + p * 16, 0, 2);
        if (p + 1 < b_lines) __builtin_prefetch(b_next + (p + 1) * 16, 0, 2);
      }
      step();
      step();
    }
    if (p < t.k) {
      if (p < b_lines) __builtin_prefetch(b_next + p * 16, 0, 2);
      step();
    }
  } else {
    for (int64_t p = 0; p < t.k; ++p) {
      if (next && p < kLines) __builtin_prefetch(next + p / kLinesPerRow * t.ldc + p % kLinesPerRow * 16, 1, 3);
      if (p < b_lines) __builtin_prefetch(b_next + p * 16, 0, 2);
      step();
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) std::memcpy(t.c + r * t.ldc + j * W, &acc[r][j], sizeof(V));
}

// Panels: t.tiles tiles side by side (tile_at).
template <int W, int R, int NV, bool PackedA, bool Panels = false>
[[gnu::always_inline]] inline void tile_body(const TileArgs& t) {
  if constexpr (Panels)
    for (int64_t s = 0; s < t.tiles; ++s) tile_once<W, R, NV, PackedA, true>(tile_at<float>(t, s, NV * W, NV / kPanelVecs));
  else
    tile_once<W, R, NV, PackedA, false>(t);
}

using TileFn = void (*)(const TileArgs&);

template <int R, int NV, bool PackedA, bool Panels = false>
VOLTA_TARGET_AVX512 void tile_avx512(const TileArgs& t) {
  tile_body<16, R, NV, PackedA, Panels>(t);
}
template <int R, int NV, bool PackedA, bool Panels = false>
VOLTA_TARGET_AVX2 void tile_avx2(const TileArgs& t) {
  tile_body<8, R, NV, PackedA, Panels>(t);
}

// Tables of the kernels for 1..R rows, indexed by rows - 1.
template <int NV, bool PackedA, bool Panels = false, int... R>
constexpr std::array<TileFn, sizeof...(R)> avx512_table(std::integer_sequence<int, R...>) {
  return {&tile_avx512<R + 1, NV, PackedA, Panels>...};
}
template <int NV, bool PackedA, bool Panels = false, int... R>
constexpr std::array<TileFn, sizeof...(R)> avx2_table(std::integer_sequence<int, R...>) {
  return {&tile_avx2<R + 1, NV, PackedA, Panels>...};
}

constexpr auto kAvx512Tiles = avx512_table<kAvx512Vecs, true>(std::make_integer_sequence<int, kAvx512Rows>());
constexpr auto kAvx512Strided = avx512_table<kAvx512Vecs, false>(std::make_integer_sequence<int, kAvx512Rows>());
constexpr auto kAvx512Narrow = avx512_table<1, true>(std::make_integer_sequence<int, kAvx512Rows>());
constexpr auto kAvx512NarrowStrided = avx512_table<1, false>(std::make_integer_sequence<int, kAvx512Rows>());
constexpr auto kAvx512Wide = avx512_table<kWideVecs, false>(std::make_integer_sequence<int, kAvx512WideRows>());
constexpr auto kAvx512Half = avx512_table<kHalfVecs, false>(std::make_integer_sequence<int, kAvx512HalfRows>());
constexpr auto kAvx2Tiles = avx2_table<kAvx2Vecs, true>(std::make_integer_sequence<int, kAvx2Rows>());
constexpr auto kAvx2Strided = avx2_table<kAvx2Vecs, false>(std::make_integer_sequence<int, kAvx2Rows>());
constexpr auto kAvx2Narrow = avx2_table<1, true>(std::make_integer_sequence<int, kAvx2Rows>());
constexpr auto kAvx2NarrowStrided = avx2_table<1, false>(std::make_integer_sequence<int, kAvx2Rows>());
// One row, 1..8 vectors (index vecs - 1): the right edge of a small-M product in one pass.
template <int... V>
constexpr std::array<TileFn, sizeof...(V)> avx512_row_table(std::integer_sequence<int, V...>) {
  return {&tile_avx512<1, V + 1, false>...};
}
template <int... V>
constexpr std::array<TileFn, sizeof...(V)> avx2_row_table(std::integer_sequence<int, V...>) {
  return {&tile_avx2<1, V + 1, false>...};
}
constexpr auto kAvx512Row = avx512_row_table(std::make_integer_sequence<int, kWideVecs>());
constexpr auto kAvx2Row = avx2_row_table(std::make_integer_sequence<int, kWideVecs>());

constexpr auto kAvx2Wide = avx2_table<kWideVecs, false>(std::make_integer_sequence<int, kAvx2WideRows>());
constexpr auto kAvx2Half = avx2_table<kHalfVecs, false>(std::make_integer_sequence<int, kAvx2HalfRows>());
constexpr auto kAvx512WidePanels = avx512_table<kWideVecs, false, true>(std::make_integer_sequence<int, kAvx512WideRows>());
constexpr auto kAvx512HalfPanels = avx512_table<kHalfVecs, false, true>(std::make_integer_sequence<int, kAvx512HalfRows>());
constexpr auto kAvx2WidePanels = avx2_table<kWideVecs, false, true>(std::make_integer_sequence<int, kAvx2WideRows>());
constexpr auto kAvx2HalfPanels = avx2_table<kHalfVecs, false, true>(std::make_integer_sequence<int, kAvx2HalfRows>());
// Three rows across two panels: 12 chains, as many as the 6 x 2 tile keeps (run_row_group_tile).
constexpr TileFn kAvx2ThreeRowPanels = &tile_avx2<3, kHalfVecs, false, true>;

// ---- Narrow right edges, lanes along the rows (run_column_edge) ---------------------------
// Panels in groups of kEdgeGroup, so as many independent chains hide the FMA latency; the rows of
// a panel past `rows` are masked off in the loads and never stored.

constexpr int kEdgeGroup = 4;

template <typename V, typename Ops>
[[gnu::always_inline]] inline void column_edge_body(const ColumnEdgeArgs& e, int R, Ops ops) {
  const int64_t panels = (e.rows + R - 1) / R;
  for (int64_t p0 = 0; p0 < panels; p0 += kEdgeGroup) {
    const int g = static_cast<int>(std::min<int64_t>(kEdgeGroup, panels - p0));
    int valid[kEdgeGroup];
    for (int i = 0; i < g; ++i) valid[i] = static_cast<int>(std::min<int64_t>(R, e.rows - (p0 + i) * R));
    for (int64_t c = 0; c < e.cols; ++c) {
      V acc[kEdgeGroup];
      for (int i = 0; i < kEdgeGroup; ++i) {
        alignas(64) float col[16] = {};
        if (i < g && e.accumulate)
          for (int r = 0; r < valid[i]; ++r) col[r] = e.c[((p0 + i) * R + r) * e.ldc + c];
        acc[i] = ops.load(col, 16);
      }
      const float* b = e.b + c;
      if (g == kEdgeGroup) {
        const float* a = e.a + p0 * e.panel_stride;
        for (int64_t p = 0; p < e.k; ++p, b += e.b_rs) {
          const V bv = ops.splat(*b);
#pragma GCC unroll 4
          for (int i = 0; i < kEdgeGroup; ++i) acc[i] = ops.fma(ops.load(a + i * e.panel_stride + p * e.a_cs, valid[i]), bv, acc[i]);
        }
      } else {
        for (int i = 0; i < g; ++i) {
          const float* a = e.a + (p0 + i) * e.panel_stride;
          b = e.b + c;
          for (int64_t p = 0; p < e.k; ++p, b += e.b_rs) acc[i] = ops.fma(ops.load(a + p * e.a_cs, valid[i]), ops.splat(*b), acc[i]);
        }
      }
      for (int i = 0; i < g; ++i) {
        alignas(64) float col[16] = {};
        ops.store(col, acc[i]);
        for (int r = 0; r < valid[i]; ++r) e.c[((p0 + i) * R + r) * e.ldc + c] = col[r];
      }
    }
  }
}

struct Avx512EdgeOps {
  static constexpr int kLanes = 16;
  VOLTA_TARGET_AVX512 __m512 load(const float* p, int n) const {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);  // masked lanes are not read
  }
  VOLTA_TARGET_AVX512 __m512 loadu(const float* p) const { return _mm512_loadu_ps(p); }
  VOLTA_TARGET_AVX512 void storeu(float* p, __m512 v) const { _mm512_storeu_ps(p, v); }
  VOLTA_TARGET_AVX512 void store_n(float* p, __m512 v, int n) const {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);  // masked lanes are not written
  }
  VOLTA_TARGET_AVX512 __m512 splat(float x) const { return _mm512_set1_ps(x); }
  VOLTA_TARGET_AVX512 __m512 fma(__m512 a, __m512 b, __m512 c) const { return _mm512_fmadd_ps(a, b, c); }
  VOLTA_TARGET_AVX512 void store(float* p, __m512 v) const { _mm512_store_ps(p, v); }
};

struct Avx2EdgeOps {
  static constexpr int kLanes = 8;
  VOLTA_TARGET_AVX2 static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::min(n, 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  VOLTA_TARGET_AVX2 __m256 load(const float* p, int n) const { return _mm256_maskload_ps(p, mask(n)); }  // masked lanes are not read
  VOLTA_TARGET_AVX2 __m256 loadu(const float* p) const { return _mm256_loadu_ps(p); }
  VOLTA_TARGET_AVX2 void storeu(float* p, __m256 v) const { _mm256_storeu_ps(p, v); }
  VOLTA_TARGET_AVX2 void store_n(float* p, __m256 v, int n) const { _mm256_maskstore_ps(p, mask(n), v); }
  VOLTA_TARGET_AVX2 __m256 splat(float x) const { return _mm256_set1_ps(x); }
  VOLTA_TARGET_AVX2 __m256 fma(__m256 a, __m256 b, __m256 c) const { return _mm256_fmadd_ps(a, b, c); }
  VOLTA_TARGET_AVX2 void store(float* p, __m256 v) const { _mm256_store_ps(p, v); }
};

// One row of C, NV vectors, the last with only `tail` (1 .. lanes - 1) valid lanes: its part of
// B's rows and of C is read and written through a lane mask, so nothing past the edge is touched
// and B is read in place to the last k. The small-M path's right edge (N = 65: 4 + 1 vectors).
template <typename V, int NV, typename Ops>
[[gnu::always_inline]] inline void masked_row_body(const TileArgs& t, int tail, Ops ops) {
  constexpr int W = Ops::kLanes;
  V acc[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j)
    acc[j] = !t.accumulate ? V{} : j + 1 < NV ? ops.loadu(t.c + j * W) : ops.load(t.c + j * W, tail);
  const float* a = t.a;
  const float* b = t.b;
  for (int64_t p = 0; p < t.k; ++p, a += t.a_cs, b += t.b_rs) {
    const V x = ops.splat(*a);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[j] = ops.fma(x, j + 1 < NV ? ops.loadu(b + j * W) : ops.load(b + j * W, tail), acc[j]);
  }
#pragma GCC unroll 8
  for (int j = 0; j + 1 < NV; ++j) ops.storeu(t.c + j * W, acc[j]);
  ops.store_n(t.c + (NV - 1) * W, acc[NV - 1], tail);
}

template <int NV>
VOLTA_TARGET_AVX512 void masked_row_avx512(const TileArgs& t, int tail) { masked_row_body<__m512, NV>(t, tail, Avx512EdgeOps{}); }
template <int NV>
VOLTA_TARGET_AVX2 void masked_row_avx2(const TileArgs& t, int tail) { masked_row_body<__m256, NV>(t, tail, Avx2EdgeOps{}); }
using MaskedRowFn = void (*)(const TileArgs&, int);
template <int... V>
constexpr std::array<MaskedRowFn, sizeof...(V)> masked_avx512_table(std::integer_sequence<int, V...>) {
  return {&masked_row_avx512<V + 1>...};
}
template <int... V>
constexpr std::array<MaskedRowFn, sizeof...(V)> masked_avx2_table(std::integer_sequence<int, V...>) {
  return {&masked_row_avx2<V + 1>...};
}
constexpr auto kAvx512MaskedRow = masked_avx512_table(std::make_integer_sequence<int, kWideVecs>());
constexpr auto kAvx2MaskedRow = masked_avx2_table(std::make_integer_sequence<int, kWideVecs>());

VOLTA_TARGET_AVX512 void column_edge_avx512(const ColumnEdgeArgs& e) { column_edge_body<__m512>(e, kAvx512Rows, Avx512EdgeOps{}); }
VOLTA_TARGET_AVX2 void column_edge_avx2(const ColumnEdgeArgs& e) { column_edge_body<__m256>(e, kAvx2Rows, Avx2EdgeOps{}); }


#endif  // VOLTA_MATMUL_X86

// Portable kernel: rows <= kScalarRows, kScalarCols columns.
void tile_scalar(const TileArgs& t) {
  float acc[kScalarRows][kScalarCols];
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < kScalarCols; ++c) acc[r][c] = t.accumulate ? t.c[r * t.ldc + c] : 0.0f;
  for (int64_t p = 0; p < t.k; ++p) {
    const float* b = t.b + p * t.b_rs;
    for (int64_t r = 0; r < t.rows; ++r) {
      const float x = t.a[r * t.a_rs + p * t.a_cs];
      for (int64_t c = 0; c < kScalarCols; ++c) acc[r][c] = std::fma(x, b[c], acc[r][c]);
    }
  }
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < kScalarCols; ++c) t.c[r * t.ldc + c] = acc[r][c];
}

}  // namespace

std::string_view matmul_isa_name(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::kAvx512: return "avx512";
    case MatmulIsa::kAvx2: return "avx2";
    case MatmulIsa::kScalar: break;
  }
  return "scalar";
}

bool matmul_isa_supported(MatmulIsa isa) {
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    // libgcc's checks include the OS saving the wide registers (XCR0).
    case MatmulIsa::kAvx512: return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
    case MatmulIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2: return false;
#endif
    case MatmulIsa::kScalar: break;
  }
  return true;
}

MatmulTile matmul_tile(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::kAvx512: return {kAvx512Rows, 16 * kAvx512Vecs};
    case MatmulIsa::kAvx2: return {kAvx2Rows, 8 * kAvx2Vecs};
    case MatmulIsa::kScalar: break;
  }
  return {kScalarRows, kScalarCols};
}

int64_t matmul_small_rows(MatmulIsa isa, bool wide) {
  switch (isa) {
    case MatmulIsa::kAvx512: return wide ? kAvx512WideRows : kAvx512HalfRows;
    case MatmulIsa::kAvx2: return wide ? kAvx2WideRows : kAvx2HalfRows;
    case MatmulIsa::kScalar: break;
  }
  return kScalarRows;
}

int64_t matmul_small_cols(MatmulIsa isa, bool wide) {
  switch (isa) {
    case MatmulIsa::kAvx512: return 16 * (wide ? kWideVecs : kHalfVecs);
    case MatmulIsa::kAvx2: return 8 * (wide ? kWideVecs : kHalfVecs);
    case MatmulIsa::kScalar: break;
  }
  return kScalarCols;
}

void run_tile(MatmulIsa isa, const TileArgs& t) {
  const auto row = static_cast<size_t>(t.rows - 1);
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    case MatmulIsa::kAvx512: return (t.a_rs == 1 ? kAvx512Tiles : kAvx512Strided)[row](t);
    case MatmulIsa::kAvx2: return (t.a_rs == 1 ? kAvx2Tiles : kAvx2Strided)[row](t);
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2:
#endif
    case MatmulIsa::kScalar: break;
  }
  (void)row;
  tile_scalar(t);
}

int64_t matmul_narrow_cols(MatmulIsa isa) {
  switch (isa) {
    case MatmulIsa::kAvx512: return 16;
    case MatmulIsa::kAvx2: return 8;
    case MatmulIsa::kScalar: break;
  }
  return kScalarCols;
}

void run_narrow_tile(MatmulIsa isa, const TileArgs& t) {
  const auto row = static_cast<size_t>(t.rows - 1);
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    case MatmulIsa::kAvx512: return (t.a_rs == 1 ? kAvx512Narrow : kAvx512NarrowStrided)[row](t);
    case MatmulIsa::kAvx2: return (t.a_rs == 1 ? kAvx2Narrow : kAvx2NarrowStrided)[row](t);
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2:
#endif
    case MatmulIsa::kScalar: break;
  }
  (void)row;
  tile_scalar(t);
}

int64_t matmul_row_tile_vectors(MatmulIsa isa) {
#ifdef VOLTA_MATMUL_X86
  if (isa != MatmulIsa::kScalar) return kWideVecs;
#endif
  (void)isa;
  return 0;
}

void run_row_tile(MatmulIsa isa, int64_t vecs, const TileArgs& t) {
  const auto v = static_cast<size_t>(vecs - 1);
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    case MatmulIsa::kAvx512: return kAvx512Row[v](t);
    case MatmulIsa::kAvx2: return kAvx2Row[v](t);
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2:
#endif
    case MatmulIsa::kScalar: break;
  }
  (void)v;
  tile_scalar(t);  // not reached: matmul_row_tile_vectors(kScalar) == 0
}

int64_t matmul_column_edge_max(MatmulIsa isa) {
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    // A column costs one FMA per k per panel against `rows` for a one-vector tile of any width.
    case MatmulIsa::kAvx512: return kAvx512Rows / 2;
    case MatmulIsa::kAvx2: return kAvx2Rows / 2;
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2:
#endif
    case MatmulIsa::kScalar: break;
  }
  return 0;
}

void run_column_edge(MatmulIsa isa, const ColumnEdgeArgs& e) {
#ifdef VOLTA_MATMUL_X86
  if (isa == MatmulIsa::kAvx512) return column_edge_avx512(e);
  if (isa == MatmulIsa::kAvx2) return column_edge_avx2(e);
#endif
  (void)isa, (void)e;  // not reached: matmul_column_edge_max(kScalar) == 0
}

bool run_masked_row_tile(MatmulIsa isa, int64_t vecs, int64_t tail, const TileArgs& t) {
  const auto v = static_cast<size_t>(vecs - 1);
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    case MatmulIsa::kAvx512: return kAvx512MaskedRow[v](t, static_cast<int>(tail)), true;
    case MatmulIsa::kAvx2: return kAvx2MaskedRow[v](t, static_cast<int>(tail)), true;
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2:
#endif
    case MatmulIsa::kScalar: break;
  }
  (void)v, (void)tail, (void)t;
  return false;
}

int64_t matmul_row_group_rows(MatmulIsa isa) { return isa == MatmulIsa::kAvx2 ? kAvx2Rows : 0; }

void run_row_group_tile(MatmulIsa isa, const TileArgs& t) {
#ifdef VOLTA_MATMUL_X86
  if (isa == MatmulIsa::kAvx2) {
    if (t.b_ps) return kAvx2ThreeRowPanels(t);
    return kAvx2Strided[static_cast<size_t>(t.rows - 1)](t);
  }
#endif
  tile_scalar(t);  // not reached: matmul_row_group_rows is 0 but on AVX2
}

void run_small_tile(MatmulIsa isa, bool wide, const TileArgs& t) {
  const auto row = static_cast<size_t>(t.rows - 1);
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    case MatmulIsa::kAvx512:
      if (t.b_ps) return (wide ? kAvx512WidePanels[row] : kAvx512HalfPanels[row])(t);
      return (wide ? kAvx512Wide[row] : kAvx512Half[row])(t);
    case MatmulIsa::kAvx2:
      if (t.b_ps) return (wide ? kAvx2WidePanels[row] : kAvx2HalfPanels[row])(t);
      return (wide ? kAvx2Wide[row] : kAvx2Half[row])(t);
#else
    case MatmulIsa::kAvx512:
    case MatmulIsa::kAvx2:
#endif
    case MatmulIsa::kScalar: break;
  }
  (void)row, (void)wide;
  tile_scalar(t);
}

}  // namespace volta::cpu
