// Matmul microkernels: one register tile of C per call, every element a chain of fused
// multiply-adds in k order. The vector kernels are written once on GCC vector types of W floats
// and compiled per ISA through target attributes (W = 16 is one zmm register with AVX-512, W = 8
// one ymm with AVX2); -ffp-contract=fast (set for matmul*.cpp) turns `acc += x * b` into FMA.
// The scalar kernel calls std::fma, so it gives the same bits as the vector ones.
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/cpu/matmul.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VOLTA_MATMUL_X86 1
#define VOLTA_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define VOLTA_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace volta::cpu {

namespace {

// Register tiles. AVX-512: 12 x 32 = 24 zmm accumulators + 2 for B + 1 broadcast of the 32
// registers. AVX2: 6 x 16 = 12 ymm accumulators + 2 + 1 of 16. The small-M (decode) tiles use
// 4 vectors per row so a single row still has 4 independent FMA chains to hide the latency.
constexpr int kAvx512Rows = 12, kAvx512Vecs = 2;
constexpr int kAvx2Rows = 6, kAvx2Vecs = 2;
// Small-M tiles, wide (8 vectors: long contiguous reads of B) and half as wide (run_small_tile with
// wide = false; the driver currently uses the wide ones and the one-row edge kernels).
constexpr int kWideVecs = 8, kAvx512WideRows = 2, kAvx2WideRows = 1;
constexpr int kHalfVecs = 4, kAvx512HalfRows = 4, kAvx2HalfRows = 2;
constexpr int kScalarRows = 4, kScalarCols = 16;

#ifdef VOLTA_MATMUL_X86

template <int W>
struct VecOf {
  typedef float type __attribute__((vector_size(4 * W)));
};

// C[R, NV * W] = or += A[R, k] @ B[k, NV * W]. Inlined into each ISA's entry, whose target
// attribute decides the registers the vectors live in.
template <int W, int R, int NV, bool PackedA>
[[gnu::always_inline]] inline void tile_body(const TileArgs& t) {
  using V = typename VecOf<W>::type;
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NV; ++j) {
      if (t.accumulate) std::memcpy(&acc[r][j], t.c + r * t.ldc + j * W, sizeof(V));  // continue the chain
      else acc[r][j] = V{};
    }
  const int64_t a_rs = PackedA ? 1 : t.a_rs;  // packed panels: the R values of one k are adjacent
  const float* a = t.a;
  const float* b = t.b;
  for (int64_t p = 0; p < t.k; ++p, a += t.a_cs, b += t.b_rs) {
    V bv[NV];
    for (int j = 0; j < NV; ++j) std::memcpy(&bv[j], b + j * W, sizeof(V));  // unaligned load
    for (int r = 0; r < R; ++r) {
      const float x = a[r * a_rs];
      for (int j = 0; j < NV; ++j) acc[r][j] += x * bv[j];  // one FMA per k
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < NV; ++j) std::memcpy(t.c + r * t.ldc + j * W, &acc[r][j], sizeof(V));
}

using TileFn = void (*)(const TileArgs&);

template <int R, int NV, bool PackedA>
VOLTA_TARGET_AVX512 void tile_avx512(const TileArgs& t) {
  tile_body<16, R, NV, PackedA>(t);
}
template <int R, int NV, bool PackedA>
VOLTA_TARGET_AVX2 void tile_avx2(const TileArgs& t) {
  tile_body<8, R, NV, PackedA>(t);
}

// Tables of the kernels for 1..R rows, indexed by rows - 1.
template <int NV, bool PackedA, int... R>
constexpr std::array<TileFn, sizeof...(R)> avx512_table(std::integer_sequence<int, R...>) {
  return {&tile_avx512<R + 1, NV, PackedA>...};
}
template <int NV, bool PackedA, int... R>
constexpr std::array<TileFn, sizeof...(R)> avx2_table(std::integer_sequence<int, R...>) {
  return {&tile_avx2<R + 1, NV, PackedA>...};
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

void run_small_tile(MatmulIsa isa, bool wide, const TileArgs& t) {
  const auto row = static_cast<size_t>(t.rows - 1);
  switch (isa) {
#ifdef VOLTA_MATMUL_X86
    case MatmulIsa::kAvx512: return (wide ? kAvx512Wide[row] : kAvx512Half[row])(t);
    case MatmulIsa::kAvx2: return (wide ? kAvx2Wide[row] : kAvx2Half[row])(t);
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
