// A caching pool for device memory. Freed blocks go back to a free list keyed by size class
// and are handed out again instead of calling cudaMalloc / cudaFree (each of which
// synchronises the device). The bookkeeping is plain host code over an injectable allocator,
// so it is unit-tested with a fake allocator on machines without a GPU.
//
// Reuse is safe because the CUDA backend issues every copy and kernel on one stream: work that
// reads a block is ordered before any later work that reuses it.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "volta/status.h"

namespace volta::cuda {

// Where the pool gets raw memory from (cudaMalloc / cudaFree on a GPU, a fake in tests).
class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual Result<void*> allocate(size_t bytes) = 0;  // kOutOfMemory when the device is full
  virtual Status free(void* p) = 0;
};

struct PoolStats {
  size_t bytes_in_use = 0;       // size-class bytes of the blocks handed out
  size_t bytes_cached = 0;       // bytes held in free lists, ready for reuse
  size_t peak_bytes_in_use = 0;  // high-water mark of bytes_in_use
  size_t device_allocations = 0; // calls to DeviceAllocator::allocate that succeeded
  size_t reuses = 0;             // acquisitions served from a free list
};

class MemoryPool {
 public:
  explicit MemoryPool(std::unique_ptr<DeviceAllocator> allocator);
  ~MemoryPool();  // returns every cached block to the allocator
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // Bytes actually reserved for a request: at least 512, powers of two up to 1 MiB, then
  // multiples of 2 MiB (so a block fits every request of its class and waste stays < 2x).
  static size_t size_class(size_t bytes);

  // A block of at least `bytes`; a cached block of the same class when one is free. On
  // allocation failure the cache is released and the allocation tried once more.
  Result<void*> acquire(size_t bytes);
  // Returns a block to its free list; a pointer the pool did not hand out is an internal error.
  Status release(void* p);
  // Frees every cached block (in-use blocks are untouched).
  Status trim();

  PoolStats stats() const;

 private:
  Status trim_locked();

  mutable std::mutex mu_;
  std::unique_ptr<DeviceAllocator> allocator_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks (ordered: deterministic)
  std::map<void*, size_t> in_use_;             // block -> size class
  PoolStats stats_;
};

// A block from the pool, returned to it when the owner goes away. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> make(std::shared_ptr<MemoryPool> pool, size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept { swap(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    DeviceBuffer tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  std::byte* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  void reset();  // a release failure can only be a pool bug; it is dropped here, not thrown

 private:
  void swap(DeviceBuffer& o) noexcept {
    std::swap(pool_, o.pool_);
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
  }
  std::shared_ptr<MemoryPool> pool_;
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace volta::cuda
