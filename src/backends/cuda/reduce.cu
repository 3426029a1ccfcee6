// Reductions, mirroring ref_reduce.cpp: one thread per output element walks its reduced
// elements in row-major order in double, the reference's order, so sums have the CPU
// reference's bits. The sum of squares (the global gradient norm) uses a fixed two-level tree.
#include <cmath>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

template <ReduceOp op>
__global__ void reduce_kernel(const float* __restrict__ x, float* __restrict__ out, StridedIndex kept, int64_t n_out,
                              StridedIndex reduced, int64_t n_reduced) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_out; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t base = strided_offset(kept, 0, i);
    double acc = op == ReduceOp::Max ? -INFINITY : 0.0;
    for (int64_t k = 0; k < n_reduced; ++k) {
      const double v = x[base + strided_offset(reduced, 0, k)];
      if constexpr (op == ReduceOp::Max) {
        if (v > acc || isnan(v)) acc = v;  // once NaN, stays NaN: nothing compares greater
      } else {
        acc += v;
      }
    }
    if constexpr (op == ReduceOp::Mean) acc /= static_cast<double>(n_reduced);  // 0/0 = nan for an empty mean
    out[i] = static_cast<float>(acc);
  }
}

__global__ void __launch_bounds__(kThreads) squares_chunk_kernel(const float* __restrict__ x, int64_t n,
                                                                 double* __restrict__ partials) {
  __shared__ double buf[kThreads];
  const int64_t begin = blockIdx.x * kSquaresChunk;
  const int64_t end = begin + kSquaresChunk < n ? begin + kSquaresChunk : n;
  double s = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) s += static_cast<double>(x[i]) * x[i];
  s = block_reduce(s, buf, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void __launch_bounds__(kThreads) sum_kernel(const double* __restrict__ partials, int64_t n, double* __restrict__ out) {
  __shared__ double buf[kThreads];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) s += partials[i];
  s = block_reduce(s, buf, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) out[0] = s;
}

__global__ void norm_of_sums_kernel(const double* sums, int64_t n, double* out) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += sums[i];
  out[0] = sqrt(s);
}

__global__ void increment_kernel(int64_t* counter, int64_t* out) {
  counter[0] += 1;
  out[0] = counter[0];
}

}  // namespace

cudaError_t launch_norm_of_sums(const double* sums, int64_t n, double* out, cudaStream_t stream) {
  norm_of_sums_kernel<<<1, 1, 0, stream>>>(sums, n, out);
  return cudaGetLastError();
}

cudaError_t launch_increment(int64_t* counter, int64_t* out, cudaStream_t stream) {
  increment_kernel<<<1, 1, 0, stream>>>(counter, out);
  return cudaGetLastError();
}

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

cudaError_t launch_sum_of_squares(const float* x, int64_t n, double* partials, double* out, cudaStream_t stream) {
  const int64_t chunks = squares_partials(n);
  squares_chunk_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(x, n, partials);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  sum_kernel<<<1, kThreads, 0, stream>>>(partials, chunks, out);
  return cudaGetLastError();
}

}  // namespace volta::cuda
