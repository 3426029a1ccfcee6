// CUDA runtime wrappers (see device.h).
#include "backends/cuda/device.h"

namespace volta::cuda {

Status check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::ok();
  std::string msg = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return out_of_memory("CUDA " + msg);
  return unavailable("CUDA " + msg);
}

Result<void*> CudaAllocator::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // an allocation failure must not stay the sticky "last error"
    return check(err, "cudaMalloc of " + std::to_string(bytes) + " bytes");
  }
  return p;
}

Status CudaAllocator::free(void* p) { return check(cudaFree(p), "cudaFree"); }

Result<Stream> Stream::create() {
  Stream s;
  VOLTA_RETURN_IF_ERROR(check(cudaStreamCreateWithFlags(&s.s_, cudaStreamNonBlocking), "cudaStreamCreate"));
  return s;
}

Stream::~Stream() {
  if (s_) (void)cudaStreamDestroy(s_);  // a failure here leaves nothing the caller could do
}

Status Stream::synchronize(const std::string& what) const { return check(cudaStreamSynchronize(s_), what); }

Result<Event> Event::create() {
  Event e;
  VOLTA_RETURN_IF_ERROR(check(cudaEventCreate(&e.e_), "cudaEventCreate"));
  return e;
}

Event::~Event() {
  if (e_) (void)cudaEventDestroy(e_);
}

Status Event::record(const Stream& s) { return check(cudaEventRecord(e_, s.get()), "cudaEventRecord"); }
Status Event::synchronize() { return check(cudaEventSynchronize(e_), "cudaEventSynchronize"); }

Result<float> Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  VOLTA_RETURN_IF_ERROR(check(cudaEventElapsedTime(&ms, start.e_, e_), "cudaEventElapsedTime"));
  return ms;
}

}  // namespace volta::cuda
