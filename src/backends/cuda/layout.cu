// Layout kernels, mirroring ref_layout.cpp: permutes, gathers and the cache write move elements,
// never change them (slice, concat and reshape are strided copies done with cudaMemcpy2DAsync in
// cuda_backend.cpp). The embedding gradient gives each strip of an output row one owner block
// that sums its positions in index order (no atomics), so it has the CPU reference's summation
// order and bits.
#include "backends/cuda/launch.cuh"

namespace volta::cuda {
namespace {

template <typename E, typename I>
__global__ void permute_kernel(const E* x, E* out, int64_t n, StridedIndex idx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = x[strided_offset<I>(idx, 0, static_cast<I>(i))];
}

template <typename E>
void permute(const void* x, void* out, int64_t n, const StridedIndex& idx, cudaStream_t stream) {
  if (index_fits_32(idx, n, 1))
    permute_kernel<E, int32_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(out), n, idx);
  else
    permute_kernel<E, int64_t><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(out), n, idx);
}

// An id outside the table (which check_indices reports) reads nothing: its row is nan.
template <typename Id>
__global__ void gather_rows_kernel(const uint32_t* table, const Id* ids, uint32_t* out, int64_t n, int64_t words,
                                   int64_t table_rows) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / words, w = i % words, id = static_cast<int64_t>(ids[row]);
    out[i] = id >= 0 && id < table_rows ? table[id * words + w] : 0x7fc00000u;
  }
}

// One block: the lowest position whose id is outside [0, bound) (and not `skip`), and how many
// ids are not `skip`. The first error of the run stays recorded.
template <typename Id>
__global__ void __launch_bounds__(kThreads) check_indices_kernel(const Id* ids, int64_t n, int64_t bound, bool has_skip,
                                                                 int64_t skip, int64_t token, IndexError* record,
                                                                 int64_t* counted) {
  __shared__ int64_t buf[kThreads];
  int64_t first = n, kept = 0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const int64_t v = static_cast<int64_t>(ids[i]);
    if (has_skip && v == skip) continue;
    ++kept;
    if ((v < 0 || v >= bound) && i < first) first = i;
  }
  first = block_reduce(first, buf, [](int64_t a, int64_t b) { return a < b ? a : b; });
  kept = block_reduce(kept, buf, [](int64_t a, int64_t b) { return a + b; });
  if (threadIdx.x != 0) return;
  if (counted != nullptr) *counted = kept;
  if (first < n && record->token < 0) *record = IndexError{token, first, static_cast<int64_t>(ids[first])};
}

__global__ void cache_write_kernel(uint32_t* cache, const uint32_t* rows, const int32_t* position, int64_t outer, int64_t S,
                                   int64_t T, int64_t words) {
  const int64_t p = *position;
  if (p < 0 || p > S - T) return;
  const int64_t n = outer * T * words;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t o = i / (T * words), rest = i % (T * words);
    cache[(o * S + p) * words + rest] = rows[i];
  }
}

// Block b owns the kGradCols columns (b % strips) of output row b / strips (and b + grid, ...):
// each thread one column, summing the positions whose id is the row in index order, in double.
// The block reads the ids a window of kGradWindow at a time (kGradIds per thread, coalesced, in
// flight together), lists the window's hits in position order in shared memory (ballots, then
// one warp's prefix sum over their counts), then walks the list kGradLoads loads at a time,
// adding in order: a block neither walks the ids one by one nor waits on each load.
constexpr int kGradCols = 128, kGradIds = 8, kGradWindow = kGradCols * kGradIds, kGradLoads = 8;
template <typename Id>
__global__ void __launch_bounds__(kGradCols) embedding_grad_kernel(const Id* __restrict__ ids, int64_t P,
                                                                   const float* __restrict__ dy, float* __restrict__ out,
                                                                   int64_t rows, int64_t D) {
  constexpr int kMasks = kGradWindow / 32;
  static_assert(kMasks == 32, "one warp's prefix sum covers the window's masks");
  __shared__ unsigned masks[kMasks];
  __shared__ int offsets[kMasks + 1];
  __shared__ int64_t hits[kGradWindow];
  const int64_t strips = (D + kGradCols - 1) / kGradCols;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  for (int64_t b = blockIdx.x; b < rows * strips; b += gridDim.x) {
    const int64_t r = b / strips, d = b % strips * kGradCols + threadIdx.x;
    double acc = 0.0;
    for (int64_t p0 = 0; p0 < P; p0 += kGradWindow) {
      // Position p0 + 128 u + 32 warp + lane is bit `lane` of mask u * 4 + warp: masks in position order.
      bool hit[kGradIds];
#pragma unroll
      for (int u = 0; u < kGradIds; ++u) {
        const int64_t p = p0 + u * kGradCols + threadIdx.x;
        hit[u] = p < P && static_cast<int64_t>(ids[p]) == r;
      }
#pragma unroll
      for (int u = 0; u < kGradIds; ++u) {
        const unsigned m = __ballot_sync(0xffffffffu, hit[u]);
        if (lane == 0) masks[u * (kGradCols / 32) + warp] = m;
      }
      __syncthreads();
      if (warp == 0) {  // exclusive prefix sum of the masks' counts (kMasks == 32: one per lane)
        const int count = __popc(masks[lane]);
        int sum = count;
        for (int s = 1; s < 32; s <<= 1) {
          const int o = __shfl_up_sync(0xffffffffu, sum, s);
          if (lane >= s) sum += o;
        }
        offsets[lane] = sum - count;
        if (lane == 31) offsets[kMasks] = sum;
      }
      __syncthreads();
#pragma unroll
      for (int u = 0; u < kGradIds; ++u)
        if (hit[u]) {
          const int k = u * (kGradCols / 32) + warp;
          hits[offsets[k] + __popc(masks[k] & ((1u << lane) - 1u))] = p0 + u * kGradCols + threadIdx.x;
        }
      __syncthreads();
      const int n = offsets[kMasks];
      for (int h = 0; h < n; h += kGradLoads) {
        float v[kGradLoads];
#pragma unroll
        for (int u = 0; u < kGradLoads; ++u) v[u] = h + u < n && d < D ? dy[hits[h + u] * D + d] : 0.0f;
#pragma unroll
        for (int u = 0; u < kGradLoads; ++u)
          if (h + u < n) acc += v[u];
      }
      __syncthreads();  // masks, offsets and hits are rewritten by the next window
    }
    if (d < D) out[r * D + d] = static_cast<float>(acc);
  }
}

}  // namespace

cudaError_t launch_cache_write(void* cache, const void* rows, const int32_t* position, int64_t outer, int64_t S, int64_t T,
                               int64_t words, cudaStream_t stream) {
  const int64_t n = outer * T * words;
  if (n == 0) return cudaSuccess;
  cache_write_kernel<<<grid_for(n), kThreads, 0, stream>>>(static_cast<uint32_t*>(cache), static_cast<const uint32_t*>(rows),
                                                           position, outer, S, T, words);
  return cudaGetLastError();
}

cudaError_t launch_permute(const void* x, void* out, int64_t n, int elem_bytes, const StridedIndex& idx,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (elem_bytes == 4) {
    permute<uint32_t>(x, out, n, idx, stream);
  } else if (elem_bytes == 8) {
    permute<uint64_t>(x, out, n, idx, stream);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(const void* table, int64_t table_rows, const void* ids, bool ids_i64, void* out, int64_t n_ids,
                               int64_t words, cudaStream_t stream) {
  const int64_t n = n_ids * words;
  if (n == 0) return cudaSuccess;
  const auto* t = static_cast<const uint32_t*>(table);
  auto* o = static_cast<uint32_t*>(out);
  if (ids_i64) {
    gather_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(t, static_cast<const int64_t*>(ids), o, n, words, table_rows);
  } else {
    gather_rows_kernel<<<grid_for(n), kThreads, 0, stream>>>(t, static_cast<const int32_t*>(ids), o, n, words, table_rows);
  }
  return cudaGetLastError();
}

cudaError_t launch_check_indices(const void* ids, bool ids_i64, int64_t n, int64_t bound, bool has_skip, int64_t skip,
                                 int64_t token, IndexError* record, int64_t* counted, cudaStream_t stream) {
  if (ids_i64)
    check_indices_kernel<<<1, kThreads, 0, stream>>>(static_cast<const int64_t*>(ids), n, bound, has_skip, skip, token, record,
                                                    counted);
  else
    check_indices_kernel<<<1, kThreads, 0, stream>>>(static_cast<const int32_t*>(ids), n, bound, has_skip, skip, token, record,
                                                    counted);
  return cudaGetLastError();
}

cudaError_t launch_embedding_grad(const void* ids, bool ids_i64, int64_t n_ids, const float* dy, float* out, int64_t rows,
                                  int64_t D, cudaStream_t stream) {
  if (rows == 0 || D == 0) return cudaSuccess;
  const unsigned grid = row_grid(rows * ((D + kGradCols - 1) / kGradCols));
  if (ids_i64)
    embedding_grad_kernel<<<grid, kGradCols, 0, stream>>>(static_cast<const int64_t*>(ids), n_ids, dy, out, rows, D);
  else
    embedding_grad_kernel<<<grid, kGradCols, 0, stream>>>(static_cast<const int32_t*>(ids), n_ids, dy, out, rows, D);
  return cudaGetLastError();
}

}  // namespace volta::cuda
