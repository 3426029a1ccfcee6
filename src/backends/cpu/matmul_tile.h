// The GEMM microkernels' shared pieces: register-tile sizes, GCC vector types per ISA, and the
// FMA and broadcast helpers, for matmul_kernels.cpp (f32 weights) and matmul_half_kernels.cpp
// (bf16 / f16 weights). Internal to the CPU backend.
#pragma once

#include <bit>
#include <cstdint>

#include "backends/cpu/isa.h"
#include "backends/cpu/matmul.h"

namespace volta::cpu::tile {

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
// A packed weight's panels (ir/packed_weight.h) are two vectors wide on both ISAs.
constexpr int kPanelVecs = 2;
static_assert(kAvx2Vecs == kPanelVecs && kAvx512Vecs == kPanelVecs, "both ISAs' packed panels are two vectors wide");

// Tile s of a call's t.tiles side by side on packed panels (TileArgs::tiles): C `cols * s`
// columns on, B `panels * s` panels of Elem on. One call per task's K block rather than per tile
// (a Zen 3's bf16 decode token: gemm_small_packed and the tile dispatch 3.6% -> 2.1% of it).
template <typename Elem>
[[gnu::always_inline]] inline TileArgs tile_at(const TileArgs& t, int64_t s, int64_t cols, int64_t panels) {
  TileArgs u = t;
  u.c = t.c + s * cols;
  u.b = reinterpret_cast<const float*>(reinterpret_cast<const Elem*>(t.b) + s * panels * t.b_ps);
  return u;
}

#ifdef VOLTA_MATMUL_X86

template <int W>
struct VecOf {
  typedef float type __attribute__((vector_size(4 * W)));
};

// acc + a * b rounded once, spelled out: whether a compiler contracts `acc += x * b` into an
// FMA is its choice (g++ 13 left some uncontracted where g++ 12 did not), and the bits of the
// chain must not depend on it.
VOLTA_TARGET_AVX512 inline VecOf<16>::type fmadd(VecOf<16>::type a, VecOf<16>::type b,
                                                                         VecOf<16>::type c) {
  return std::bit_cast<VecOf<16>::type>(
      _mm512_fmadd_ps(std::bit_cast<__m512>(a), std::bit_cast<__m512>(b), std::bit_cast<__m512>(c)));
}
VOLTA_TARGET_AVX2 inline VecOf<8>::type fmadd(VecOf<8>::type a, VecOf<8>::type b, VecOf<8>::type c) {
  return std::bit_cast<VecOf<8>::type>(
      _mm256_fmadd_ps(std::bit_cast<__m256>(a), std::bit_cast<__m256>(b), std::bit_cast<__m256>(c)));
}

// x in every lane, as a broadcast. `V{} + x` would also add +0 (the compiler must keep the add:
// it turns a -0 into +0), one more vector op per FMA row, which held the 12 x 32 tile to about
// half of the FMA peak.
template <int W>
inline typename VecOf<W>::type splat(float x);
template <>
VOLTA_TARGET_AVX512 inline VecOf<16>::type splat<16>(float x) {
  return std::bit_cast<VecOf<16>::type>(_mm512_set1_ps(x));
}
template <>
VOLTA_TARGET_AVX2 inline VecOf<8>::type splat<8>(float x) {
  return std::bit_cast<VecOf<8>::type>(_mm256_set1_ps(x));
}

#endif  // VOLTA_MATMUL_X86

}  // namespace volta::cpu::tile
