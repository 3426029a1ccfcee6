// Reductions, mirroring ref_reduce.cpp: one thread per output element walks its reduced
// elements in row-major order in double, the reference's order, so sums have the CPU
// reference's bits.
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

}  // namespace volta::cuda
