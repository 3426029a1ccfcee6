// The training step's kernels, mirroring ref_optim.cpp: the global gradient norm's sum of squares
// over a fixed two-level tree, the step counter, and the optimizer updates (semantics in
// include/volta/optim.h): every
// element is updated in double from its own values only, so the bits never depend on the
// launch shape. The run-time scalars (norm, lr, step) are read on the device; thread 0 of each
// block turns them into the clipping factor and bias corrections, as optimizer_update_node does
// on the CPU.
#include <cmath>

#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

struct Scalars {
  double lr, grad_scale, c1, c2;
};

__device__ inline void load_scalars(const OptimDesc& d, Scalars* s) {
  if (threadIdx.x == 0) {
    const double norm = d.norm[0];
    const double t = static_cast<double>(d.step[0] + 1);
    s->lr = d.lr[0];
    s->grad_scale = d.clip > 0 && norm > d.clip ? d.clip / (norm + 1e-6) : 1.0;
    s->c1 = 1.0 - pow(d.beta1, t);
    s->c2 = 1.0 - pow(d.beta2, t);
  }
  __syncthreads();
}

__global__ void sgd_kernel(OptimDesc d, float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf, int64_t n) {
  __shared__ Scalars s;
  load_scalars(d, &s);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    double step = static_cast<double>(g[i]) * s.grad_scale + d.weight_decay * p[i];
    if (buf) {
      step = d.momentum * buf[i] + step;
      buf[i] = static_cast<float>(step);
    }
    p[i] = static_cast<float>(p[i] - s.lr * step);
  }
}

__global__ void adam_kernel(OptimDesc d, float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, int64_t n) {
  __shared__ Scalars s;
  load_scalars(d, &s);
  const bool decoupled = d.kind == 2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    double w = p[i];
    double grad = static_cast<double>(g[i]) * s.grad_scale;
    if (decoupled) w *= 1.0 - s.lr * d.weight_decay;
    else grad += d.weight_decay * w;
    const double mi = d.beta1 * m[i] + (1.0 - d.beta1) * grad;
    const double vi = d.beta2 * v[i] + (1.0 - d.beta2) * grad * grad;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    p[i] = static_cast<float>(w - s.lr * (mi / s.c1) / (sqrt(vi / s.c2) + d.eps));
  }
}

// Block b: chunk b - first[t] of the tensor t whose chunks hold b; each chunk's fixed tree.
__global__ void __launch_bounds__(kThreads) squares_chunk_kernel(SquaresBatch sb) {
  __shared__ double buf[kThreads];
  const int64_t b = blockIdx.x;
  int t = 0;
  while (b >= sb.first[t + 1]) ++t;
  const float* x = sb.x[t];
  const int64_t n = sb.n[t], begin = (b - sb.first[t]) * kSquaresChunk;
  const int64_t end = begin + kSquaresChunk < n ? begin + kSquaresChunk : n;
  double s = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) s += static_cast<double>(x[i]) * x[i];
  s = block_reduce(s, buf, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) sb.partials[b] = s;
}

// Block t: tensor t's chunks, one fixed tree.
__global__ void __launch_bounds__(kThreads) sum_kernel(SquaresBatch sb) {
  __shared__ double buf[kThreads];
  const double* partials = sb.partials + sb.first[blockIdx.x];
  const int64_t n = sb.first[blockIdx.x + 1] - sb.first[blockIdx.x];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) s += partials[i];
  s = block_reduce(s, buf, [](double a, double b) { return a + b; });
  if (threadIdx.x == 0) sb.sums[blockIdx.x] = s;
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

cudaError_t launch_optimizer_update(const OptimDesc& d, float* param, const float* grad, float* state0, float* state1,
                                    int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (d.kind == 0) sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(d, param, grad, state0, n);
  else adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(d, param, grad, state0, state1, n);
  return cudaGetLastError();
}

cudaError_t launch_norm_of_sums(const double* sums, int64_t n, double* out, cudaStream_t stream) {
  norm_of_sums_kernel<<<1, 1, 0, stream>>>(sums, n, out);
  return cudaGetLastError();
}

cudaError_t launch_increment(int64_t* counter, int64_t* out, cudaStream_t stream) {
  increment_kernel<<<1, 1, 0, stream>>>(counter, out);
  return cudaGetLastError();
}

cudaError_t launch_sums_of_squares(const SquaresBatch& b, cudaStream_t stream) {
  if (b.count == 0) return cudaSuccess;
  if (b.count > kSquaresBatch || b.first[b.count] > int64_t{0x7fffffff}) return cudaErrorInvalidValue;
  squares_chunk_kernel<<<static_cast<unsigned>(b.first[b.count]), kThreads, 0, stream>>>(b);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  sum_kernel<<<static_cast<unsigned>(b.count), kThreads, 0, stream>>>(b);
  return cudaGetLastError();
}

}  // namespace volta::cuda
