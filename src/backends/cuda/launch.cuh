// Helpers shared by the .cu files: grid sizing and index walks. Device code only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "backends/cuda/kernels.h"

namespace volta::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements; the cap keeps the grid legal for any n.
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(blocks, int64_t{1} << 20));
}

// Blocks for one block per row (a grid-stride loop over rows past the cap).
inline unsigned row_grid(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20)); }

// Offset of operand k at flat row-major index i of idx.dims, in the index type I: int32_t
// where index_fits_32 holds (the GPU divides 32-bit integers several times faster than 64-bit
// ones, and a permute or a broadcast add spends its time there), else int64_t.
template <typename I>
__device__ inline I strided_offset(const StridedIndex& idx, int k, I i) {
  I off = 0;
  for (int d = idx.rank - 1; d >= 0; --d) {
    const I dim = static_cast<I>(idx.dims[d]);
    off += (i % dim) * static_cast<I>(idx.strides[k][d]);
    i /= dim;
  }
  return off;
}

// Whether every flat index below n and every offset of operands [0, operands) fit int32_t.
inline bool index_fits_32(const StridedIndex& idx, int64_t n, int operands) {
  constexpr int64_t kMax = 0x7fffffff;
  if (n > kMax) return false;
  for (int k = 0; k < operands; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < idx.rank; ++d) reach += (idx.dims[d] > 0 ? idx.dims[d] - 1 : 0) * (idx.strides[k][d] < 0 ? -idx.strides[k][d] : idx.strides[k][d]);
    if (reach > kMax) return false;
  }
  return true;
}

// Butterflies over a warp's 32 lanes: one fixed xor pattern in which every lane combines the
// same pairs, so every lane ends with the same bits. warp_max ignores NaN, as fmax.
template <typename T>
__device__ inline T warp_sum(T v) {
  for (int s = 16; s > 0; s >>= 1) v += __shfl_xor_sync(0xffffffffu, v, s);
  return v;
}
template <typename T>
__device__ inline T warp_max(T v) {
  for (int s = 16; s > 0; s >>= 1) {
    const T o = __shfl_xor_sync(0xffffffffu, v, s);
    if constexpr (sizeof(T) == sizeof(float)) v = fmaxf(v, o);
    else v = fmax(v, o);
  }
  return v;
}

// Whether n floats from each of the pointers can be walked as float4s (n a multiple of 4 below
// 2^31 floats, every pointer 16-byte aligned): elementwise kernels then take four elements a thread,
// each with its own expression, so the bits are those of one a thread.
inline bool float4_walk(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % 4 != 0 || n > 0x7fffffff) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Dynamic shared memory past the default 48 KB needs the kernel's limit raised first.
template <typename Kernel>
cudaError_t allow_shared(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

// Tree reduction of one value per thread over a kThreads block, always in the same order.
// `buf` holds kThreads entries; every thread gets the result.
template <typename T, typename Op>
__device__ T block_reduce(T v, T* buf, Op op) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = buf[0];
  __syncthreads();  // buf may be reused right after
  return r;
}

}  // namespace volta::cuda
