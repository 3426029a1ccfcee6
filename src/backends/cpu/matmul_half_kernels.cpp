// Decode tiles on bf16 / f16 weights (run_small_half_tile) and the widening of half values
// (widen_half): the f32 decode tile of matmul_kernels.cpp with B read at 2 bytes per value and
// widened in registers (exact), so each element is the same FMA chain as the f32 tile on the
// widened weights.
#include <array>
#include <bit>
#include <cstring>
#include <utility>

#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_tile.h"
#include "volta/tensor.h"

namespace volta::cpu {

namespace {

using namespace tile;  // NOLINT: the tile sizes and vector helpers of matmul_tile.h

#ifdef VOLTA_MATMUL_X86

using TileFn = void (*)(const TileArgs&);

// GCC 12's widening intrinsics pass _mm512_undefined as the (unused) merge source, which
// -Wmaybe-uninitialized reports once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
VOLTA_TARGET_AVX512 inline __m512 widen16(const uint16_t* p, bool bf16) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}
#define VOLTA_TARGET_AVX2_F16C __attribute__((target("avx2,fma,f16c")))
VOLTA_TARGET_AVX2_F16C inline __m256 widen8(const uint16_t* p, bool bf16) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

struct Avx512HalfOps {
  using V = VecOf<16>::type;
  VOLTA_TARGET_AVX512 V widen(const uint16_t* p, bool bf16) const { return std::bit_cast<V>(widen16(p, bf16)); }
  VOLTA_TARGET_AVX512 V fma(V x, V b, V c) const { return fmadd(x, b, c); }
};
struct Avx2HalfOps {
  using V = VecOf<8>::type;
  VOLTA_TARGET_AVX2_F16C V widen(const uint16_t* p, bool bf16) const { return std::bit_cast<V>(widen8(p, bf16)); }
  VOLTA_TARGET_AVX2_F16C V fma(V x, V b, V c) const {
    return std::bit_cast<V>(_mm256_fmadd_ps(std::bit_cast<__m256>(x), std::bit_cast<__m256>(b), std::bit_cast<__m256>(c)));
  }
};

// Panels: B is a weight in the packed layout (ir/packed_weight.h), each row's vectors kPanelVecs
// at a time from panels t.b_ps values apart (as the f32 small tiles read it).
template <typename V, int W, int R, int NV, bool BF16, bool Panels, typename Ops>
[[gnu::always_inline]] inline void half_tile_once(const TileArgs& t, Ops ops) {
  V acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) {
      acc[r][j] = V{};
      if (t.accumulate) std::memcpy(&acc[r][j], t.c + r * t.ldc + j * W, sizeof(V));
    }
  const float* a = t.a;
  const auto* b = reinterpret_cast<const uint16_t*>(t.b);
  for (int64_t p = 0; p < t.k; ++p, a += t.a_cs, b += t.b_rs) {
    V bv[NV];
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) bv[j] = ops.widen(b + (Panels ? j / kPanelVecs * t.b_ps + j % kPanelVecs * W : j * W), BF16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V x = splat<W>(a[r * t.a_rs]);
#pragma GCC unroll 16
      for (int j = 0; j < NV; ++j) acc[r][j] = ops.fma(x, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) std::memcpy(t.c + r * t.ldc + j * W, &acc[r][j], sizeof(V));
}
// Panels: t.tiles tiles side by side (tile_at).
template <typename V, int W, int R, int NV, bool BF16, bool Panels, typename Ops>
[[gnu::always_inline]] inline void half_tile_body(const TileArgs& t, Ops ops) {
  if constexpr (Panels)
    for (int64_t s = 0; s < t.tiles; ++s)
      half_tile_once<V, W, R, NV, BF16, true>(tile_at<uint16_t>(t, s, NV * W, NV / kPanelVecs), ops);
  else
    half_tile_once<V, W, R, NV, BF16, false>(t, ops);
}

template <int R, int NV, bool BF16, bool Panels>
VOLTA_TARGET_AVX512 void half_tile_avx512(const TileArgs& t) {
  half_tile_body<VecOf<16>::type, 16, R, NV, BF16, Panels>(t, Avx512HalfOps{});
}

template <int R, int NV, bool BF16, bool Panels>
VOLTA_TARGET_AVX2_F16C void half_tile_avx2(const TileArgs& t) {
  half_tile_body<VecOf<8>::type, 8, R, NV, BF16, Panels>(t, Avx2HalfOps{});
}

// bf16 weights, a pair of columns per 32-bit word (2i in its low half, 2i + 1 in its high half):
// the odd column is already an f32 once its low half is masked off and the even one once shifted
// up, so one single-uop operation widens a vector of values, where widening takes a zero-extension
// and a shift otherwise. The accumulators hold the even and the odd columns apart; C's columns
// are split into them at the start and interleaved once at the end. Each column is the same FMA
// chain on the same widened weight as in half_tile_body. Ops: one load of 2 vectors' columns, a
// whole panel of a packed weight (Panels: loads t.b_ps values apart). RowBroadcasts (batched
// decode's row groups, up to 6 rows): each row's broadcast is made as its FMAs use it, so 12
// accumulators, a pair and one broadcast fit AVX2's 16 registers (all rows' broadcasts first
// spilled at 6 rows: 12 rows 289 -> 465 us in BM_DecodeGemvsBf16).
template <typename Ops, int R, int NV, bool Panels, bool RowBroadcasts>
[[gnu::always_inline]] inline void bf16_pair_once(const TileArgs& t, Ops ops) {
  static_assert(NV % 2 == 0, "columns come in loads of two vectors");
  constexpr int P = NV / 2, C = Ops::kCols;  // loads per row of B, columns per load
  using V = typename Ops::V;
  V even[R][P], odd[R][P];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < P; ++j) {
      even[r][j] = ops.zero(), odd[r][j] = ops.zero();
      if (t.accumulate) ops.split(t.c + r * t.ldc + j * C, even[r][j], odd[r][j]);
    }
  const float* a = t.a;
  const auto* b = reinterpret_cast<const uint16_t*>(t.b);
  // Each load's values go into their FMAs at once (loads first kept 2 P widened vectors live
  // and spilled two of them with AVX2's 16 registers); every accumulator still takes one FMA per k.
  for (int64_t p = 0; p < t.k; ++p, a += t.a_cs, b += t.b_rs) {
    V x[RowBroadcasts ? 1 : R];
    if constexpr (!RowBroadcasts)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) x[r] = ops.splat(a[r * t.a_rs]);
#pragma GCC unroll 16
    for (int j = 0; j < P; ++j) {
      V be, bo;
      ops.widen_pairs(b + (Panels ? j * t.b_ps : j * C), be, bo);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        V xr;
        if constexpr (RowBroadcasts) xr = ops.splat(a[r * t.a_rs]);
        else xr = x[r];
        even[r][j] = ops.fma(xr, be, even[r][j]);
        odd[r][j] = ops.fma(xr, bo, odd[r][j]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < P; ++j) ops.join(t.c + r * t.ldc + j * C, even[r][j], odd[r][j]);
}
// Panels: t.tiles tiles side by side (tile_at), each a load's columns per panel.
template <typename Ops, int R, int NV, bool Panels, bool RowBroadcasts = false>
[[gnu::always_inline]] inline void bf16_pair_body(const TileArgs& t, Ops ops) {
  if constexpr (Panels)
    for (int64_t s = 0; s < t.tiles; ++s)
      bf16_pair_once<Ops, R, NV, true, RowBroadcasts>(tile_at<uint16_t>(t, s, NV / 2 * Ops::kCols, NV / 2), ops);
  else
    bf16_pair_once<Ops, R, NV, false, RowBroadcasts>(t, ops);
}

// 32 columns per 64-byte load; permutex2var splits and joins the columns.
struct Avx512PairOps {
  using V = __m512;
  static constexpr int kCols = 32;
  VOLTA_TARGET_AVX512 V zero() const { return _mm512_setzero_ps(); }
  VOLTA_TARGET_AVX512 V splat(float x) const { return _mm512_set1_ps(x); }
  VOLTA_TARGET_AVX512 V fma(V x, V b, V c) const { return _mm512_fmadd_ps(x, b, c); }
  VOLTA_TARGET_AVX512 void widen_pairs(const uint16_t* b, V& even, V& odd) const {
    __m512i w = _mm512_loadu_si512(b);
    asm("" : "+v"(w));  // one load for both halves (see Avx2PairOps)
    even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  VOLTA_TARGET_AVX512 void split(const float* c, V& even, V& odd) const {
    const V c0 = _mm512_loadu_ps(c), c1 = _mm512_loadu_ps(c + 16);
    even = _mm512_permutex2var_ps(c0, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), c1);
    odd = _mm512_permutex2var_ps(c0, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), c1);
  }
  VOLTA_TARGET_AVX512 void join(float* c, V even, V odd) const {
    _mm512_storeu_ps(c, _mm512_permutex2var_ps(even, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), odd));
    _mm512_storeu_ps(c + 16, _mm512_permutex2var_ps(even, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), odd));
  }
};

// 16 columns per 32-byte load; a 128-bit lane of the even and the odd accumulators interleaves
// into 8 columns (unpack), which permute2f128 puts in order (and shuffle + permute4x64 split).
struct Avx2PairOps {
  using V = __m256;
  static constexpr int kCols = 16;
  VOLTA_TARGET_AVX2_F16C V zero() const { return _mm256_setzero_ps(); }
  VOLTA_TARGET_AVX2_F16C V splat(float x) const { return _mm256_set1_ps(x); }
  VOLTA_TARGET_AVX2_F16C V fma(V x, V b, V c) const { return _mm256_fmadd_ps(x, b, c); }
  VOLTA_TARGET_AVX2_F16C void widen_pairs(const uint16_t* b, V& even, V& odd) const {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    // One load for both halves: GCC otherwise folds a second load of the same bytes into the
    // and, nine loads a k for the wide tile where five do (with the loop order below, hot on a
    // Zen 3: 29 -> 34 GMAC/s; without the pin 24-28).
    asm("" : "+x"(w));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  VOLTA_TARGET_AVX2_F16C void split(const float* c, V& even, V& odd) const {
    const V c0 = _mm256_loadu_ps(c), c1 = _mm256_loadu_ps(c + 8);
    even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(c0, c1, 0x88)), 0xd8));
    odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(c0, c1, 0xdd)), 0xd8));
  }
  VOLTA_TARGET_AVX2_F16C void join(float* c, V even, V odd) const {
    const V lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    _mm256_storeu_ps(c, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(c + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
  }
};

template <int R, int NV, bool Panels>
VOLTA_TARGET_AVX512 void bf16_pair_tile_avx512(const TileArgs& t) {
  bf16_pair_body<Avx512PairOps, R, NV, Panels>(t, Avx512PairOps{});
}
template <int R, int NV, bool Panels>
VOLTA_TARGET_AVX2_F16C void bf16_pair_tile_avx2(const TileArgs& t) {
  bf16_pair_body<Avx2PairOps, R, NV, Panels>(t, Avx2PairOps{});
}
#pragma GCC diagnostic pop
// The wide and the half-width decode tiles, as run_small_tile has them: [panels][bf16][rows - 1].
template <int NV, bool BF16, bool Panels, int... R>
constexpr std::array<TileFn, sizeof...(R)> half_b_avx512(std::integer_sequence<int, R...>) {
  if constexpr (BF16) return {&bf16_pair_tile_avx512<R + 1, NV, Panels>...};
  else return {&half_tile_avx512<R + 1, NV, BF16, Panels>...};
}
template <int NV, bool BF16, bool Panels, int... R>
constexpr std::array<TileFn, sizeof...(R)> half_b_avx2(std::integer_sequence<int, R...>) {
  if constexpr (BF16) return {&bf16_pair_tile_avx2<R + 1, NV, Panels>...};
  else return {&half_tile_avx2<R + 1, NV, BF16, Panels>...};
}
template <int NV, int Rows>
struct HalfBTables {
  using Seq = std::make_integer_sequence<int, Rows>;
  static constexpr std::array<TileFn, Rows> avx512[2][2] = {
      {half_b_avx512<NV, false, false>(Seq()), half_b_avx512<NV, true, false>(Seq())},
      {half_b_avx512<NV, false, true>(Seq()), half_b_avx512<NV, true, true>(Seq())}};
};
template <int NV, int Rows>
struct HalfBTablesAvx2 {
  using Seq = std::make_integer_sequence<int, Rows>;
  static constexpr std::array<TileFn, Rows> avx2[2][2] = {
      {half_b_avx2<NV, false, false>(Seq()), half_b_avx2<NV, true, false>(Seq())},
      {half_b_avx2<NV, false, true>(Seq()), half_b_avx2<NV, true, true>(Seq())}};
};

// Batched decode's row-group tiles (run_row_group_tile) on half weights, AVX2: up to 6 rows on
// one panel; [bf16][rows - 1].
template <bool BF16, int R>
VOLTA_TARGET_AVX2_F16C void group_tile_avx2(const TileArgs& t) {
  if constexpr (BF16) bf16_pair_body<Avx2PairOps, R, kAvx2Vecs, false, true>(t, Avx2PairOps{});
  else half_tile_body<VecOf<8>::type, 8, R, kAvx2Vecs, false, false>(t, Avx2HalfOps{});
}
template <bool BF16, int... R>
constexpr std::array<TileFn, sizeof...(R)> group_tiles_avx2(std::integer_sequence<int, R...>) {
  return {&group_tile_avx2<BF16, R + 1>...};
}
constexpr std::array<TileFn, kAvx2Rows> kAvx2GroupTiles[2] = {
    group_tiles_avx2<false>(std::make_integer_sequence<int, kAvx2Rows>()),
    group_tiles_avx2<true>(std::make_integer_sequence<int, kAvx2Rows>())};

#endif  // VOLTA_MATMUL_X86

void widen_scalar(bool bf16, const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16 ? bf16_to_f32(src[i]) : f16_to_f32(src[i]);
}
#ifdef VOLTA_MATMUL_X86
VOLTA_TARGET_AVX512 void widen_avx512(bool bf16, const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, widen16(src + i, bf16));
  widen_scalar(bf16, src + i, dst + i, n - i);
}
VOLTA_TARGET_AVX2_F16C void widen_avx2(bool bf16, const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, widen8(src + i, bf16));
  widen_scalar(bf16, src + i, dst + i, n - i);
}
#endif
}  // namespace

void widen_half(MatmulIsa isa, bool bf16, const uint16_t* src, float* dst, int64_t n) {
#ifdef VOLTA_MATMUL_X86
  static const bool f16c = __builtin_cpu_supports("f16c");
  if (isa == MatmulIsa::kAvx512) return widen_avx512(bf16, src, dst, n);
  if (isa == MatmulIsa::kAvx2 && f16c) return widen_avx2(bf16, src, dst, n);
#endif
  (void)isa;
  widen_scalar(bf16, src, dst, n);
}

bool matmul_has_half_tiles(MatmulIsa isa) {
#ifdef VOLTA_MATMUL_X86
  static const bool f16c = __builtin_cpu_supports("f16c");
  return isa == MatmulIsa::kAvx512 || (isa == MatmulIsa::kAvx2 && f16c);
#else
  (void)isa;
  return false;
#endif
}

bool run_row_group_half_tile(MatmulIsa isa, bool bf16, const TileArgs& t) {
#ifdef VOLTA_MATMUL_X86
  if (isa != MatmulIsa::kAvx2 || !matmul_has_half_tiles(isa) || t.rows < 1 || t.rows > kAvx2Rows || t.b_ps) return false;
  kAvx2GroupTiles[bf16][static_cast<size_t>(t.rows - 1)](t);
  return true;
#else
  (void)isa, (void)bf16, (void)t;
  return false;
#endif
}

bool run_small_half_tile(MatmulIsa isa, bool wide, bool bf16, const TileArgs& t) {
#ifdef VOLTA_MATMUL_X86
  if (!matmul_has_half_tiles(isa) || t.rows < 1 || t.rows > matmul_small_rows(isa, wide)) return false;
  const auto r = static_cast<size_t>(t.rows - 1);
  const bool panels = t.b_ps != 0;
  if (isa == MatmulIsa::kAvx512) {
    (wide ? HalfBTables<kWideVecs, kAvx512WideRows>::avx512[panels][bf16][r]
          : HalfBTables<kHalfVecs, kAvx512HalfRows>::avx512[panels][bf16][r])(t);
    return true;
  }
  (wide ? HalfBTablesAvx2<kWideVecs, kAvx2WideRows>::avx2[panels][bf16][r]
        : HalfBTablesAvx2<kHalfVecs, kAvx2HalfRows>::avx2[panels][bf16][r])(t);
  return true;
#else
  (void)isa, (void)wide, (void)bf16, (void)t;
  return false;
#endif
}

}  // namespace volta::cpu
