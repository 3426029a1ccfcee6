// The tiled f32 attention kernels' shared parts (attention_tiled.cu: the forward,
// attention_tiled_grad.cu: the gradient): the block's layout, tiles read from global memory, the
// dot products, weighted sums and softmax rows they are built from, the shared-memory sizes.
//
// A block of 4 warps takes 32 rows (queries; keys for dk and dv), 8 per warp. Scores are dot
// products in f32, one fused multiply-add chain per score over d in order: a thread takes 4 of
// its warp's rows against 2 keys of a 32-key tile, rows and keys read as float4s from shared
// memory padded to an odd count of float4s. The block keeps its rows' scores whole in shared
// memory, so a row's softmax is exact (max, then exp and sum, then the division), as the
// reference's; weighted sums run over the keys (queries) in order. Every output's arithmetic is
// fixed by the shapes alone: the bits repeat run to run and do not depend on the batch, nor on
// which thread computes which output.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/attention_tiled.cuh"

namespace volta::cuda::tiled {

constexpr int kWarps = 4, kRowsPerWarp = 8, kRows = kWarps * kRowsPerWarp, kTile = 32;
constexpr int kThreadsPerBlock = kWarps * 32;
// The dk/dv kernel at 3 blocks a multiprocessor (168 registers): left free, ptxas takes 194 at
// head widths 33-64, which fits 2, and the step ran 2% slower on an H100.
constexpr int kDkvMinBlocks = 3;
constexpr int kPs = kTile + 4;  // the dk/dv kernel's p and ds rows: 16-byte aligned for weighted_rows' float4 reads

__device__ inline bool aligned16(const float* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Whether a tile of `src` (cols of its `width` floats a row) can be read as float4s: rows of a
// multiple of 4 floats at 16-byte aligned bases and strides, nothing to pad.
__device__ inline bool float4_rows(const AttentionRows& src, int cols, int width) {
  return width % 4 == 0 && src.stride % 4 == 0 && cols == width && aligned16(src.a) && (src.b == nullptr || aligned16(src.b));
}

// dst[r][c] (row stride `stride`) = src row r0 + r, column c, for r < kTile and c < cols; zeros
// past `count` rows or `width` columns (the padding the float4 reads and the odd strides need).
// Rows float4_rows takes are read as float4, several in flight.
__device__ inline void load_tile(float* dst, int stride, int cols, const AttentionRows& src, int64_t r0, int64_t count, int width) {
  if (float4_rows(src, cols, width)) {
    const int quads = cols / 4;
#pragma unroll 4
    for (int t = static_cast<int>(threadIdx.x); t < kTile * quads; t += blockDim.x) {
      const int r = t / quads, c = t % quads * 4;
      const float4 x = r < count ? *reinterpret_cast<const float4*>(src.row(r0 + r) + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float* d = dst + r * stride + c;
      if (stride % 4 == 0) {
        *reinterpret_cast<float4*>(d) = x;
      } else {
        d[0] = x.x, d[1] = x.y, d[2] = x.z, d[3] = x.w;
      }
    }
    return;
  }
  for (int t = static_cast<int>(threadIdx.x); t < kTile * cols; t += blockDim.x) {
    const int r = t / cols, c = t % cols;
    dst[r * stride + c] = r < count && c < width ? src.row(r0 + r)[c] : 0.0f;
  }
}

// The tiles of rows [start, end) of `src`, kTile rows at a time, into shared memory (row stride
// `stride`, `cols` floats a row). Where float4_rows holds, each thread keeps its float4s of the
// next tile in registers (P of them: the tile's 32 rows of up to 128 floats over the block's 128
// threads), loaded while the block works on the current one; otherwise load_tile, in place.
// Each float4's tile row and column are worked out once, when the stream starts (`at`: row << 16
// | column, -1 past the tile): dividing by a run-time quad count cost a score tile as many
// instructions as a fifth of its dot products.
template <int P>
struct TileStream {
  AttentionRows src;
  int64_t end;
  int cols, width, stride;
  bool vec;
  float4 regs[P];
  int at[P];

  __device__ TileStream(const AttentionRows& rows, int64_t start, int64_t end_, int cols_, int width_, int stride_)
      : src(rows), end(end_), cols(cols_), width(width_), stride(stride_), vec(float4_rows(rows, cols_, width_)) {
    const int quads = cols / 4;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int t = static_cast<int>(threadIdx.x) + i * kThreadsPerBlock;
      at[i] = t < kTile * quads ? t / quads << 16 | t % quads * 4 : -1;
    }
    if (vec && start < end) fetch(start);
  }
  __device__ void fetch(int64_t r0) {
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int r = at[i] >> 16, c = at[i] & 0xffff;
      regs[i] = at[i] >= 0 && r0 + r < end ? *reinterpret_cast<const float4*>(src.row(r0 + r) + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  // dst = the tile of rows t0.. (the one fetched last), then the next one's loads are issued.
  __device__ void fill(float* dst, int64_t t0) {
    if (!vec) {
      load_tile(dst, stride, cols, src, t0, end - t0, width);
      return;
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
      if (at[i] < 0) continue;
      float* d = dst + (at[i] >> 16) * stride + (at[i] & 0xffff);
      if (stride % 4 == 0) {
        *reinterpret_cast<float4*>(d) = regs[i];
      } else {
        d[0] = regs[i].x, d[1] = regs[i].y, d[2] = regs[i].z, d[3] = regs[i].w;
      }
    }
    if (t0 + kTile < end) fetch(t0 + kTile);
  }
};

// s[r] = dot(rows[r], col) for the warp's 8 rows (row stride Dq, read as float4 broadcasts) and
// the lane's row `col` (16-byte aligned, read as float4): each one chain of fmaf over d in order.
// The dk/dv kernel's recomputed scores use it, where the stored ones do not fit.
__device__ inline void dots8(const float* rows, int Dq, const float* col, float (&s)[kRowsPerWarp]) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) s[r] = 0.0f;
  for (int d = 0; d < Dq; d += 4) {
    const float4 c = *reinterpret_cast<const float4*>(col + d);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float4 a = *reinterpret_cast<const float4*>(rows + r * Dq + d);
      s[r] = fmaf(a.x, c.x, s[r]);
      s[r] = fmaf(a.y, c.y, s[r]);
      s[r] = fmaf(a.z, c.z, s[r]);
      s[r] = fmaf(a.w, c.w, s[r]);
    }
  }
}

// s[a][b] = dot(row a, key b) for 4 rows (`rows`, `rs` floats apart) and 2 keys (k0, k1), each
// 16-byte aligned and read as float4: each score one chain of fmaf over d in order, as dots8's.
// A thread's 8 scores take 6 reads per 4 d where dots8's take 9.
__device__ inline void dots4x2(const float* rows, int rs, const float* k0, const float* k1, int Dq, float (&s)[4][2]) {
#pragma unroll
  for (int a = 0; a < 4; ++a) s[a][0] = s[a][1] = 0.0f;
#pragma unroll 2
  for (int d = 0; d < Dq; d += 4) {
    const float4 c0 = *reinterpret_cast<const float4*>(k0 + d), c1 = *reinterpret_cast<const float4*>(k1 + d);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const float4 x = *reinterpret_cast<const float4*>(rows + a * rs + d);
      s[a][0] = fmaf(x.x, c0.x, s[a][0]);
      s[a][0] = fmaf(x.y, c0.y, s[a][0]);
      s[a][0] = fmaf(x.z, c0.z, s[a][0]);
      s[a][0] = fmaf(x.w, c0.w, s[a][0]);
      s[a][1] = fmaf(x.x, c1.x, s[a][1]);
      s[a][1] = fmaf(x.y, c1.y, s[a][1]);
      s[a][1] = fmaf(x.z, c1.z, s[a][1]);
      s[a][1] = fmaf(x.w, c1.w, s[a][1]);
    }
  }
}

// acc[r][c] += w[r][jj] * tile[jj][lane + 32 c] over jj = 0..n-1 in order: the warp's 8 rows
// of weights (row stride w_stride, a multiple of 4 from a 16-byte aligned w: four weights a
// read) times a tile's rows (stride t_stride), `width` columns.
template <int C>
__device__ inline void weighted_rows(const float* w, int w_stride, const float* tile, int t_stride, int width, int n, int lane,
                                     float (&acc)[kRowsPerWarp][C]) {
  int jj = 0;
  for (; jj + 4 <= n; jj += 4) {
    float t[4][C];
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int c = 0; c < C; ++c) t[u][c] = lane + 32 * c < width ? tile[(jj + u) * t_stride + lane + 32 * c] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float4 wr = *reinterpret_cast<const float4*>(w + r * w_stride + jj);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        acc[r][c] = fmaf(wr.x, t[0][c], acc[r][c]);
        acc[r][c] = fmaf(wr.y, t[1][c], acc[r][c]);
        acc[r][c] = fmaf(wr.z, t[2][c], acc[r][c]);
        acc[r][c] = fmaf(wr.w, t[3][c], acc[r][c]);
      }
    }
  }
  for (; jj < n; ++jj) {
    float t[C];
#pragma unroll
    for (int c = 0; c < C; ++c) t[c] = lane + 32 * c < width ? tile[jj * t_stride + lane + 32 * c] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float wr = w[r * w_stride + jj];
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = fmaf(wr, t[c], acc[r][c]);
    }
  }
}

// weighted_4x4 with the weights stored transposed, w[jj][a]: the thread's 4 rows' weights of a
// tile row are one float4.
__device__ inline void weighted_cols_4x4(const float* w, int w_stride, const float* tile, int t_stride, int c, int n, float4 (&acc)[4]) {
#pragma unroll 4
  for (int jj = 0; jj < n; ++jj) {
    const float4 wv = *reinterpret_cast<const float4*>(w + jj * w_stride);
    const float4 t = *reinterpret_cast<const float4*>(tile + jj * t_stride + c);
    const float ws[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      acc[a].x = fmaf(ws[a], t.x, acc[a].x);
      acc[a].y = fmaf(ws[a], t.y, acc[a].y);
      acc[a].z = fmaf(ws[a], t.z, acc[a].z);
      acc[a].w = fmaf(ws[a], t.w, acc[a].w);
    }
  }
}

// weighted_rows with the weights stored transposed: w[jj][r] (row stride w_stride, a multiple of
// 4 from a 16-byte aligned w: the warp's 8 weights of a tile row as two float4 broadcasts). Each
// acc[r][c] is the same chain, over jj in order, as weighted_rows'.
template <int C>
__device__ inline void weighted_cols(const float* w, int w_stride, const float* tile, int t_stride, int width, int n, int lane,
                                     float (&acc)[kRowsPerWarp][C]) {
#pragma unroll 2
  for (int jj = 0; jj < n; ++jj) {
    const float4 w0 = *reinterpret_cast<const float4*>(w + jj * w_stride);
    const float4 w1 = *reinterpret_cast<const float4*>(w + jj * w_stride + 4);
    const float wr[kRowsPerWarp] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    float t[C];
#pragma unroll
    for (int c = 0; c < C; ++c) t[c] = lane + 32 * c < width ? tile[jj * t_stride + lane + 32 * c] : 0.0f;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = fmaf(wr[r], t[c], acc[r][c]);
  }
}

// The score of query i against key j: scale * q.k, -inf where the causal mask drops it or past
// `end` (keys the block does not read).
__device__ inline float masked_score(float s, int64_t i, int64_t j, int64_t end, const AttentionDesc& d, float scale) {
  return j >= end || (d.causal && j > i + d.offset) ? -INFINITY : scale * s;
}
__device__ inline float probability(float z, float m, float l) { return expf(z - m) / l; }
__device__ inline float score_grad(float p, float dp, float pdp, float scale) { return scale * p * (dp - pdp); }

// For each tile of rows [0, end): the stream's next tile into `tile`, then f(t0, rows in it), the
// block synchronised before (the tile written) and after (read before it is overwritten).
template <int P, typename F>
__device__ inline void each_tile(TileStream<P>& in, float* tile, int64_t end, F&& f) {
  for (int64_t t0 = 0; t0 < end; t0 += kTile) {
    in.fill(tile, t0);
    __syncthreads();
    f(t0, static_cast<int>(min(int64_t{kTile}, end - t0)));
    __syncthreads();
  }
}

// One output row's 4 columns, as weighted_4x4 and weighted_cols_4x4 sum them.
__device__ inline void store4(float* o, float4 v) { o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w; }

// Scores of the block's 32 rows (`rows`, [32][Dt]: rows four apart fall in different banks)
// against keys [0, end) into sc [32][Sp]: tiles of 32 keys through `tile` ([32][Dt]). A thread
// takes 4 of its warp's rows (first `rg`) and keys kk and kk + 16 of the tile.
template <int C>
__device__ inline void score_rows(const float* rows, int Dq, int Dt, float* tile, const AttentionRows& keys, int64_t end, int64_t i0,
                                  const AttentionDesc& d, float scale, float* sc, int Sp, int warp, int lane) {
  TileStream<2 * C> in(keys, 0, end, Dq, static_cast<int>(keys.width), Dt);
  const int rg = warp * kRowsPerWarp + lane / 16 * 4, kk = lane % 16;
  each_tile(in, tile, end, [&](int64_t t0, int) {
    float s[4][2];
    dots4x2(rows + rg * Dt, Dt, tile + kk * Dt, tile + (kk + 16) * Dt, Dq, s);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        const int64_t j = t0 + kk + 16 * b;
        sc[(rg + a) * Sp + j] = masked_score(s[a][b], i0 + rg + a, j, end, d, scale);
      }
  });
}

// A warp's score row over [0, n_keys) becomes its softmax; its max and sum come back in m and l
// (scalars, not arrays a loop indexes: those went to local memory).
__device__ inline void softmax_row(float* row, int n_keys, int lane, float& m, float& l) {
  float mx = -INFINITY;
  for (int j = lane; j < n_keys; j += 32) mx = fmaxf(mx, row[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j < n_keys; j += 32) {
    const float e = expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
  sum = warp_sum(sum);
  // e / sum: the bits of probability(z, mx, sum), which the dk/dv kernel recomputes
  for (int j = lane; j < n_keys; j += 32) row[j] = row[j] / sum;
  m = mx, l = sum;
}

// acc[a] += w[a][jj] * tile[jj][c..c+4) over jj = 0..n-1 in order, for 4 rows of weights
// (`w_stride` apart, a multiple of 4 from a 16-byte aligned w) and 4 columns from c (a multiple
// of 4; tile rows t_stride apart, a multiple of 4): each output weighted_rows' chain, from 8 reads
// per 4 weights where weighted_rows takes 16.
__device__ inline void weighted_4x4(const float* w, int w_stride, const float* tile, int t_stride, int c, int n, float4 (&acc)[4]) {
  int jj = 0;
  for (; jj + 4 <= n; jj += 4) {
    float4 t[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) t[u] = *reinterpret_cast<const float4*>(tile + (jj + u) * t_stride + c);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const float4 wa = *reinterpret_cast<const float4*>(w + a * w_stride + jj);
      const float ws[4] = {wa.x, wa.y, wa.z, wa.w};
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        acc[a].x = fmaf(ws[u], t[u].x, acc[a].x);
        acc[a].y = fmaf(ws[u], t[u].y, acc[a].y);
        acc[a].z = fmaf(ws[u], t[u].z, acc[a].z);
        acc[a].w = fmaf(ws[u], t[u].w, acc[a].w);
      }
    }
  }
  for (; jj < n; ++jj) {
    const float4 t = *reinterpret_cast<const float4*>(tile + jj * t_stride + c);
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const float wa = w[a * w_stride + jj];
      acc[a].x = fmaf(wa, t.x, acc[a].x);
      acc[a].y = fmaf(wa, t.y, acc[a].y);
      acc[a].z = fmaf(wa, t.z, acc[a].z);
      acc[a].w = fmaf(wa, t.w, acc[a].w);
    }
  }
}

// out rows [i0, i0 + 32) (< T, `stride` apart) = the block's weights sc [32][Sp] over keys
// [0, end) times their rows of `vals`, through `tile` ([32][width]). Rows 64 wide (a head width
// of 64) take weighted_4x4: a thread's 4 rows (first rg) by 4 columns (from cq); others
// weighted_rows, a warp's 8 rows by the lane's columns.
template <int C>
__device__ inline void weighted_sum(const float* sc, int Sp, float* tile, const AttentionRows& vals, int64_t end, int64_t i0,
                                    int64_t T, float* out, int64_t stride, int warp, int lane) {
  const int width = static_cast<int>(vals.width);
  TileStream<2 * C> in(vals, 0, end, width, width, width);
  if (C == 2 && width == 64) {
    const int rg = warp * kRowsPerWarp + lane / 16 * 4, cq = lane % 16 * 4;
    float4 acc[4] = {};
    each_tile(in, tile, end, [&](int64_t t0, int n) { weighted_4x4(sc + rg * Sp + t0, Sp, tile, width, cq, n, acc); });
#pragma unroll
    for (int a = 0; a < 4; ++a)
      if (i0 + rg + a < T) store4(out + (i0 + rg + a) * stride + cq, acc[a]);
    return;
  }
  float acc[kRowsPerWarp][C] = {};
  each_tile(in, tile, end,
            [&](int64_t t0, int n) { weighted_rows<C>(sc + warp * kRowsPerWarp * Sp + t0, Sp, tile, width, width, n, lane, acc); });
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    if (i >= T) continue;
#pragma unroll
    for (int c = 0; c < C; ++c)
      if (lane + 32 * c < width) out[i * stride + lane + 32 * c] = acc[r][c];
  }
}

// The block's keys: those past the last row's causal limit are left out when the group is finite
// (`finite` non-null only for a causal mask with offset >= 0).
__device__ inline int64_t keys_end(const AttentionDesc& d, const int* finite, int64_t g, int64_t i0, int64_t S) {
  return finite != nullptr && finite[g] != 0 ? min(max(i0 + kRows + d.offset, int64_t{0}), S) : S;
}

inline TiledShape tiled_shape(const AttentionDesc& d, int64_t keys) {
  TiledShape ts;
  ts.Dq = static_cast<int>((d.D + 3) / 4 * 4);
  ts.Dt = (ts.Dq / 4 | 1) * 4;
  // score rows four apart (a thread's rows in dots4x2 and weighted_4x4) start 16 banks apart
  ts.Sp = static_cast<int>((keys + kTile - 1) / kTile * kTile) + 4;
  ts.tile_floats = static_cast<int>(std::max<int64_t>(kTile * ts.Dt, kTile * d.E) + 3) / 4 * 4;
  return ts;
}

inline size_t forward_shared(const TiledShape& ts) { return sizeof(float) * (size_t{kRows} * ts.Dt + ts.tile_floats + size_t{kRows} * ts.Sp); }
inline size_t dq_shared(const TiledShape& ts) { return sizeof(float) * (2 * size_t{kRows} * ts.Dt + ts.tile_floats + 2 * size_t{kRows} * ts.Sp); }
inline size_t dkv_shared(const TiledShape& ts) {
  return sizeof(float) * (2 * size_t{kRows} * ts.Dq + 2 * size_t{kTile} * ts.Dt + 2 * size_t{kRows} * kPs + kTile * 3);
}

template <template <int> class Launch, typename... Args>
cudaError_t by_lane_dims(int64_t width, Args&&... args) {
  switch ((width + 31) / 32) {
    case 1: return Launch<1>::run(args...);
    case 2: return Launch<2>::run(args...);
    case 3: return Launch<3>::run(args...);
    case 4: return Launch<4>::run(args...);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace volta::cuda::tiled
