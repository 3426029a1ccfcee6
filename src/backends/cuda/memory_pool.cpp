// Caching device-memory pool: host bookkeeping only (see memory_pool.h).
#include "backends/cuda/memory_pool.h"

#include <algorithm>
#include <bit>
#include <string>

namespace volta::cuda {

MemoryPool::MemoryPool(std::unique_ptr<DeviceAllocator> allocator) : allocator_(std::move(allocator)) {}

MemoryPool::~MemoryPool() {
  std::lock_guard lock(mu_);
  (void)trim_locked();  // nothing to report to at destruction; the allocator frees what it can
}

size_t MemoryPool::size_class(size_t bytes) {
  constexpr size_t kMin = 512, kSmallMax = size_t{1} << 20, kLargeStep = size_t{2} << 20;
  if (bytes <= kMin) return kMin;
  if (bytes <= kSmallMax) return std::bit_ceil(bytes);
  return (bytes + kLargeStep - 1) / kLargeStep * kLargeStep;
}

Result<void*> MemoryPool::acquire(size_t bytes) {
  const size_t cls = size_class(bytes);
  std::lock_guard lock(mu_);
  void* p = nullptr;
  if (auto it = free_.find(cls); it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= cls;
    ++stats_.reuses;
  } else {
    Result<void*> fresh = allocator_->allocate(cls);
    if (!fresh.is_ok() && stats_.bytes_cached > 0) {  // cached blocks of other classes may be what is missing
      VOLTA_RETURN_IF_ERROR(trim_locked());
      fresh = allocator_->allocate(cls);
    }
    if (!fresh.is_ok()) return fresh.status();
    p = *fresh;
    ++stats_.device_allocations;
  }
  in_use_.emplace(p, cls);
  stats_.bytes_in_use += cls;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return p;
}

Status MemoryPool::release(void* p) {
  if (p == nullptr) return Status::ok();
  std::lock_guard lock(mu_);
  auto it = in_use_.find(p);
  if (it == in_use_.end()) return internal_error("CUDA memory pool: released a block it did not hand out");
  const size_t cls = it->second;
  in_use_.erase(it);
  stats_.bytes_in_use -= cls;
  free_[cls].push_back(p);
  stats_.bytes_cached += cls;
  return Status::ok();
}

Status MemoryPool::trim() {
  std::lock_guard lock(mu_);
  return trim_locked();
}

Status MemoryPool::trim_locked() {
  Status first;  // keep freeing after an error so the cache empties; report the first one
  for (auto& [cls, blocks] : free_) {
    for (void* p : blocks) {
      Status s = allocator_->free(p);
      if (!s.is_ok() && first.is_ok()) first = s;
      stats_.bytes_cached -= cls;
    }
  }
  free_.clear();
  return first;
}

PoolStats MemoryPool::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

Result<DeviceBuffer> DeviceBuffer::make(std::shared_ptr<MemoryPool> pool, size_t bytes) {
  VOLTA_ASSIGN_OR_RETURN(void* p, pool->acquire(bytes));
  DeviceBuffer b;
  b.pool_ = std::move(pool);
  b.data_ = static_cast<std::byte*>(p);
  b.bytes_ = bytes;
  return b;
}

void DeviceBuffer::reset() {
  if (pool_ && data_) (void)pool_->release(data_);
  pool_.reset();
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace volta::cuda
