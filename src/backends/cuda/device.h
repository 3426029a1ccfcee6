// The CUDA runtime, wrapped: every call's error becomes a volta Status (never an abort), the
// stream and event are RAII objects, and cudaMalloc / cudaFree serve the memory pool.
// Internal to the CUDA backend: nothing here is in include/volta.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "backends/cuda/memory_pool.h"

namespace volta::cuda {

// ok for cudaSuccess; otherwise "<what>: <CUDA error name>: <description>", with out-of-memory
// as kOutOfMemory and everything else as kUnavailable (a device or driver problem).
Status check(cudaError_t err, const std::string& what);

// cudaMalloc / cudaFree on the current device.
class CudaAllocator final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t bytes) override;
  Status free(void* p) override;
};

// A non-blocking stream; all of the backend's work goes on one so it runs in issue order.
class Stream {
 public:
  static Result<Stream> create();
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  ~Stream();
  cudaStream_t get() const { return s_; }
  Status synchronize(const std::string& what) const;

 private:
  Stream() = default;
  cudaStream_t s_ = nullptr;
};

// An event with timing, for benchmarks and cross-stream ordering.
class Event {
 public:
  static Result<Event> create();
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  ~Event();
  Status record(const Stream& s);
  Status synchronize();
  Result<float> elapsed_ms_since(const Event& start) const;

 private:
  Event() = default;
  cudaEvent_t e_ = nullptr;
};

}  // namespace volta::cuda
