// Reductions, mirroring ref_reduce.cpp, in double. Where the reduced axes are one contiguous
// band the tensor is viewed as [O, R, I] (out[o, i] over r) and read coalesced:
//   - I == 1 (rows): one block per output, thread t takes r = t, t + 256, ... in order, then a
//     fixed shared-memory tree;
//   - I > 1 (columns): one block per (o, strip of 32 i), 32 lanes of rows (lane l takes r = l,
//     l + 32, ... in order), then a fixed tree over the lanes.
// Anything else walks its reduced elements in row-major order, one thread per output. The order
// depends only on the shape, so sums repeat bitwise; they differ from the reference's strictly
// sequential sum by double rounding at most, before the one rounding to f32.
#include <cmath>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

template <ReduceOp op>
__device__ inline double combine(double acc, double v) {
  if constexpr (op == ReduceOp::Max) return v > acc || isnan(v) ? v : acc;  // once NaN, stays NaN
  else return acc + v;
}

template <ReduceOp op>
__device__ inline float finish(double acc, int64_t n) {
  if constexpr (op == ReduceOp::Mean) acc /= static_cast<double>(n);  // 0/0 = nan for an empty mean
  return static_cast<float>(acc);
}

template <ReduceOp op>
__device__ inline double identity() {
  return op == ReduceOp::Max ? -INFINITY : 0.0;
}

template <ReduceOp op>
__global__ void reduce_kernel(const float* __restrict__ x, float* __restrict__ out, StridedIndex kept, int64_t n_out,
                              StridedIndex reduced, int64_t n_reduced) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_out; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = strided_offset(kept, 0, i);
    double acc = identity<op>();
    for (int64_t k = 0; k < n_reduced; ++k) acc = combine<op>(acc, x[base + strided_offset(reduced, 0, k)]);
    out[i] = finish<op>(acc, n_reduced);
  }
}

// [O, R] -> [O]: one block per row.
template <ReduceOp op>
__global__ void __launch_bounds__(kThreads) reduce_rows_kernel(const float* __restrict__ x, float* __restrict__ out,
                                                               int64_t O, int64_t R) {
  __shared__ double buf[kThreads];
  for (int64_t o = blockIdx.x; o < O; o += gridDim.x) {
    const float* row = x + o * R;
    double acc = identity<op>();
    for (int64_t r = threadIdx.x; r < R; r += kThreads) acc = combine<op>(acc, row[r]);
    acc = block_reduce(acc, buf, [](double a, double b) { return combine<op>(a, b); });
    if (threadIdx.x == 0) out[o] = finish<op>(acc, R);
  }
}

constexpr int kStrip = 32, kLanes = 32;  // a column block: 32 columns x 32 row lanes
constexpr int kColumnLoads = 16;

// [O, R, I] -> [O, I]: block (o, strip) of kStrip x kLanes threads.
template <ReduceOp op>
__global__ void __launch_bounds__(kStrip* kLanes) reduce_columns_kernel(const float* __restrict__ x, float* __restrict__ out,
                                                                        int64_t O, int64_t R, int64_t I) {
  __shared__ double buf[kLanes][kStrip + 1];
  const int c = static_cast<int>(threadIdx.x % kStrip), lane = static_cast<int>(threadIdx.x / kStrip);
  const int64_t strips = (I + kStrip - 1) / kStrip;
  for (int64_t b = blockIdx.x; b < O * strips; b += gridDim.x) {
    const int64_t o = b / strips, i = (b % strips) * kStrip + c;
    double acc = identity<op>();
    if (i < I) {
      // The lane's rows in order, kColumnLoads loads issued before their combines: the same
      // chain, with enough bytes in flight for a grid of one block per strip.
      const float* col = x + o * R * I + i;
      int64_t r = lane;
      for (; r + (kColumnLoads - 1) * kLanes < R; r += kColumnLoads * kLanes) {
        float v[kColumnLoads];
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u) v[u] = col[(r + u * kLanes) * I];
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u) acc = combine<op>(acc, v[u]);
      }
      for (; r < R; r += kLanes) acc = combine<op>(acc, col[r * I]);
    }
    buf[lane][c] = acc;
    __syncthreads();
    for (int s = kLanes / 2; s > 0; s >>= 1) {
      if (lane < s) buf[lane][c] = combine<op>(buf[lane][c], buf[lane + s][c]);
      __syncthreads();
    }
    if (lane == 0 && i < I) out[o * I + i] = finish<op>(buf[0][c], R);
    __syncthreads();
  }
}

template <ReduceOp op>
cudaError_t reduce_band(const float* x, float* out, int64_t O, int64_t R, int64_t I, cudaStream_t stream) {
  if (I == 1) {
    reduce_rows_kernel<op><<<row_grid(O), kThreads, 0, stream>>>(x, out, O, R);
  } else {
    reduce_columns_kernel<op><<<row_grid(O * ((I + kStrip - 1) / kStrip)), kStrip * kLanes, 0, stream>>>(x, out, O, R, I);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reduce(ReduceOp op, const float* x, float* out, const StridedIndex& kept, int64_t n_out,
                          const StridedIndex& reduced, int64_t n_reduced, cudaStream_t stream) {
  if (n_out == 0) return cudaSuccess;
  switch (op) {
    case ReduceOp::Sum: reduce_kernel<ReduceOp::Sum><<<grid_for(n_out), kThreads, 0, stream>>>(x, out, kept, n_out, reduced, n_reduced); break;
    case ReduceOp::Mean: reduce_kernel<ReduceOp::Mean><<<grid_for(n_out), kThreads, 0, stream>>>(x, out, kept, n_out, reduced, n_reduced); break;
    case ReduceOp::Max: reduce_kernel<ReduceOp::Max><<<grid_for(n_out), kThreads, 0, stream>>>(x, out, kept, n_out, reduced, n_reduced); break;
  }
  return cudaGetLastError();
}

cudaError_t launch_reduce_band(ReduceOp op, const float* x, float* out, int64_t O, int64_t R, int64_t I, cudaStream_t stream) {
  if (O * I == 0) return cudaSuccess;
  switch (op) {
    case ReduceOp::Sum: return reduce_band<ReduceOp::Sum>(x, out, O, R, I, stream);
    case ReduceOp::Mean: return reduce_band<ReduceOp::Mean>(x, out, O, R, I, stream);
    case ReduceOp::Max: return reduce_band<ReduceOp::Max>(x, out, O, R, I, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace volta::cuda
