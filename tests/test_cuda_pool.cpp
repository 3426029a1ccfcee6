// The CUDA backend's caching memory pool: its bookkeeping on the host, with a fake allocator, so
// it runs on any machine.
#include <map>

#include "backends/cuda/memory_pool.h"
#include "test_util.h"

namespace volta {
namespace {

// ---- Memory pool (host bookkeeping) -----------------------------------------------------

// Hands out fake addresses, fails beyond `capacity` bytes, and records every call.
class FakeAllocator final : public cuda::DeviceAllocator {
 public:
  explicit FakeAllocator(size_t capacity, size_t* live) : capacity_(capacity), live_(live) {}
  Result<void*> allocate(size_t bytes) override {
    if (*live_ + bytes > capacity_) return out_of_memory("fake device full");
    *live_ += bytes;
    next_ += bytes + 4096;
    sizes_[next_] = bytes;
    return reinterpret_cast<void*>(next_);
  }
  Status free(void* p) override {
    auto it = sizes_.find(reinterpret_cast<uintptr_t>(p));
    if (it == sizes_.end()) return internal_error("fake: double free");
    *live_ -= it->second;
    sizes_.erase(it);
    return Status::ok();
  }

 private:
  size_t capacity_;
  size_t* live_;
  uintptr_t next_ = 0x10000;
  std::map<uintptr_t, size_t> sizes_;
};

TEST(CudaPool, SizeClasses) {
  using cuda::MemoryPool;
  EXPECT_EQ(MemoryPool::size_class(0), 512u);
  EXPECT_EQ(MemoryPool::size_class(512), 512u);
  EXPECT_EQ(MemoryPool::size_class(513), 1024u);
  EXPECT_EQ(MemoryPool::size_class(3000), 4096u);
  EXPECT_EQ(MemoryPool::size_class(size_t{1} << 20), size_t{1} << 20);
  EXPECT_EQ(MemoryPool::size_class((size_t{1} << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(MemoryPool::size_class((size_t{5} << 20) + 7), size_t{6} << 20);
  for (size_t b : {1u, 700u, 65537u, 3000000u}) EXPECT_GE(MemoryPool::size_class(b), b);
}

TEST(CudaPool, ReusesCachedBlocksAndKeepsStats) {
  size_t live = 0;
  cuda::MemoryPool pool(std::make_unique<FakeAllocator>(size_t{1} << 30, &live));
  auto a = pool.acquire(1000);  // class 1024
  auto b = pool.acquire(3000);  // class 4096
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(pool.stats().bytes_in_use, 1024u + 4096u);
  EXPECT_EQ(pool.stats().device_allocations, 2u);
  ASSERT_OK(pool.release(*a));
  EXPECT_EQ(pool.stats().bytes_in_use, 4096u);
  EXPECT_EQ(pool.stats().bytes_cached, 1024u);
  auto c = pool.acquire(900);  // same class: the cached block comes back, no new allocation
  ASSERT_OK(c);
  EXPECT_EQ(*c, *a);
  EXPECT_EQ(pool.stats().device_allocations, 2u);
  EXPECT_EQ(pool.stats().reuses, 1u);
  EXPECT_EQ(pool.stats().bytes_cached, 0u);
  auto d = pool.acquire(100);  // another class: a new allocation
  ASSERT_OK(d);
  EXPECT_EQ(pool.stats().device_allocations, 3u);
  EXPECT_EQ(pool.stats().peak_bytes_in_use, 1024u + 4096u + 512u);
  for (void* p : {*b, *c, *d}) ASSERT_OK(pool.release(p));
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
  EXPECT_EQ(pool.stats().bytes_cached, 1024u + 4096u + 512u);
  EXPECT_EQ(live, 1024u + 4096u + 512u);  // cached, not freed
  ASSERT_OK(pool.trim());
  EXPECT_EQ(pool.stats().bytes_cached, 0u);
  EXPECT_EQ(live, 0u);
  EXPECT_EQ(pool.stats().peak_bytes_in_use, 1024u + 4096u + 512u);
}

TEST(CudaPool, FreesTheCacheAndRetriesWhenTheDeviceIsFull) {
  size_t live = 0;
  cuda::MemoryPool pool(std::make_unique<FakeAllocator>(8192, &live));
  auto a = pool.acquire(4096);
  ASSERT_OK(a);
  ASSERT_OK(pool.release(*a));  // cached: the fake device now has 4096 of 8192 left
  auto b = pool.acquire(8000);  // class 8192: only fits once the cache is released
  ASSERT_OK(b);
  EXPECT_EQ(pool.stats().bytes_cached, 0u);
  EXPECT_EQ(live, 8192u);
  auto c = pool.acquire(1);  // really full: the allocator's error comes back as a value
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), StatusCode::kOutOfMemory);
  ASSERT_OK(pool.release(*b));
}

TEST(CudaPool, RejectsBlocksItDidNotHandOut) {
  size_t live = 0;
  cuda::MemoryPool pool(std::make_unique<FakeAllocator>(1 << 20, &live));
  int x = 0;
  EXPECT_ERROR_CONTAINS(pool.release(&x), "did not hand out");
  auto a = pool.acquire(10);
  ASSERT_OK(a);
  ASSERT_OK(pool.release(*a));
  EXPECT_ERROR_CONTAINS(pool.release(*a), "did not hand out");  // a double release
}

TEST(CudaPool, DeviceBufferReturnsItsBlock) {
  size_t live = 0;
  auto pool = std::make_shared<cuda::MemoryPool>(std::make_unique<FakeAllocator>(1 << 20, &live));
  {
    auto buf = cuda::DeviceBuffer::make(pool, 2000);
    ASSERT_OK(buf);
    EXPECT_EQ(buf->bytes(), 2000u);
    EXPECT_EQ(pool->stats().bytes_in_use, 2048u);
    cuda::DeviceBuffer moved = std::move(*buf);
    EXPECT_EQ(buf->data(), nullptr);
    EXPECT_NE(moved.data(), nullptr);
    EXPECT_EQ(pool->stats().bytes_in_use, 2048u);
  }
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
  EXPECT_EQ(pool->stats().bytes_cached, 2048u);
}

}  // namespace
}  // namespace volta
