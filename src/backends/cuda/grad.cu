// Backward kernels, mirroring ref_grad.cpp: the same formulas in double, rounded once. Row
// kernels use one block per row with fixed-order tree reductions; the embedding gradient gives
// each output row one owner block that walks the positions in index order (no atomics), so it
// has the CPU reference's summation order and bits.
#include "backends/cuda/launch.cuh"
#include "ir/scalar_math.h"

namespace volta::cuda {
namespace {

__global__ void relu_grad_kernel(const float* x, const float* dy, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void gelu_grad_kernel(const float* x, const float* dy, float* out, int64_t n, bool tanh_form) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const double v = x[i];
    const double d = tanh_form ? ir::gelu_tanh_derivative(v) : ir::gelu_erf_derivative(v);
    out[i] = static_cast<float>(d * dy[i]);
  }
}

__global__ void silu_grad_kernel(const float* x, const float* dy, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<float>(ir::silu_derivative(x[i]) * dy[i]);
}

__global__ void __launch_bounds__(kThreads) softmax_grad_kernel(const float* __restrict__ y, const float* __restrict__ dy,
                                                                float* __restrict__ out, int64_t outer, int64_t n,
                                                                int64_t inner, double scale) {
  __shared__ double buf[kThreads];
  for (int64_t r = blockIdx.x; r < outer * inner; r += gridDim.x) {
    const int64_t base = (r / inner) * n * inner + r % inner;
    double dot = 0.0;
    for (int64_t k = threadIdx.x; k < n; k += kThreads) dot += static_cast<double>(dy[base + k * inner]) * y[base + k * inner];
    dot = block_reduce(dot, buf, [](double a, double b) { return a + b; });
    for (int64_t k = threadIdx.x; k < n; k += kThreads) {
      const int64_t e = base + k * inner;
      out[e] = static_cast<float>(scale * y[e] * (dy[e] - dot));
    }
  }
}

// g = dy * gamma, xhat = (x - mean) * rstd (mean 0 for rms_norm):
//   dx = rstd * (g - [mean(g)] - xhat * mean(g * xhat))
__global__ void __launch_bounds__(kThreads) norm_grad_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                                             const float* __restrict__ dy, float* __restrict__ out,
                                                             int64_t rows, int64_t D, double eps, bool center) {
  __shared__ double buf[kThreads];
  auto add = [](double a, double b) { return a + b; };
  const double inv_d = 1.0 / static_cast<double>(D);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * D;
    const float* dyr = dy + r * D;
    double mean = 0.0;
    if (center) {
      double s = 0.0;
      for (int64_t d = threadIdx.x; d < D; d += kThreads) s += xr[d];
      mean = block_reduce(s, buf, add) * inv_d;
    }
    double s2 = 0.0;
    for (int64_t d = threadIdx.x; d < D; d += kThreads) s2 += (xr[d] - mean) * (xr[d] - mean);
    const double rstd = 1.0 / sqrt(block_reduce(s2, buf, add) * inv_d + eps);
    double g_sum = 0.0, gx_sum = 0.0;
    for (int64_t d = threadIdx.x; d < D; d += kThreads) {
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      g_sum += g;
      gx_sum += g * ((xr[d] - mean) * rstd);
    }
    const double g_mean = block_reduce(g_sum, buf, add) * inv_d;
    const double gx_mean = block_reduce(gx_sum, buf, add) * inv_d;
    for (int64_t d = threadIdx.x; d < D; d += kThreads) {
      const double g = static_cast<double>(dyr[d]) * gamma[d];
      const double centered = center ? g - g_mean : g;
      out[r * D + d] = static_cast<float>(rstd * (centered - (xr[d] - mean) * rstd * gx_mean));
    }
  }
}

// Block b owns output rows b, b + grid, ...; the ids pass through shared memory a tile at a time.
template <typename Id>
__global__ void __launch_bounds__(kThreads) embedding_grad_kernel(const Id* __restrict__ ids, int64_t P,
                                                                  const float* __restrict__ dy, float* __restrict__ out,
                                                                  int64_t rows, int64_t D) {
  __shared__ int64_t tile[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (int64_t d0 = 0; d0 < D; d0 += kThreads) {
      const int64_t d = d0 + threadIdx.x;
      double acc = 0.0;
      for (int64_t p0 = 0; p0 < P; p0 += kThreads) {
        const int64_t count = P - p0 < kThreads ? P - p0 : kThreads;
        __syncthreads();  // the previous tile has been read
        if (threadIdx.x < count) tile[threadIdx.x] = static_cast<int64_t>(ids[p0 + threadIdx.x]);
        __syncthreads();
        if (d < D)
          for (int64_t j = 0; j < count; ++j)
            if (tile[j] == r) acc += dy[(p0 + j) * D + d];
      }
      if (d < D) out[r * D + d] = static_cast<float>(acc);
    }
  }
}

unsigned row_grid(int64_t rows) { return static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20)); }

}  // namespace

cudaError_t launch_relu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  relu_grad_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, n);
  return cudaGetLastError();
}

cudaError_t launch_silu_grad(const float* x, const float* dy, float* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  silu_grad_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, n);
  return cudaGetLastError();
}

cudaError_t launch_gelu_grad(const float* x, const float* dy, float* out, int64_t n, bool tanh_form, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  gelu_grad_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, dy, out, n, tanh_form);
  return cudaGetLastError();
}

cudaError_t launch_softmax_grad(const float* y, const float* dy, float* out, int64_t outer, int64_t n, int64_t inner,
                                double scale, cudaStream_t stream) {
  if (outer * inner == 0 || n == 0) return cudaSuccess;
  softmax_grad_kernel<<<row_grid(outer * inner), kThreads, 0, stream>>>(y, dy, out, outer, n, inner, scale);
  return cudaGetLastError();
}

cudaError_t launch_norm_grad(const float* x, const float* gamma, const float* dy, float* out, int64_t rows, int64_t D,
                             double eps, bool center, cudaStream_t stream) {
  if (rows == 0 || D == 0) return cudaSuccess;
  norm_grad_kernel<<<row_grid(rows), kThreads, 0, stream>>>(x, gamma, dy, out, rows, D, eps, center);
  return cudaGetLastError();
}

cudaError_t launch_embedding_grad(const void* ids, bool ids_i64, int64_t n_ids, const float* dy, float* out, int64_t rows,
                                  int64_t D, cudaStream_t stream) {
  if (rows == 0 || D == 0) return cudaSuccess;
  if (ids_i64)
    embedding_grad_kernel<<<row_grid(rows), kThreads, 0, stream>>>(static_cast<const int64_t*>(ids), n_ids, dy, out, rows, D);
  else
    embedding_grad_kernel<<<row_grid(rows), kThreads, 0, stream>>>(static_cast<const int32_t*>(ids), n_ids, dy, out, rows, D);
  return cudaGetLastError();
}

}  // namespace volta::cuda
