// cuBLAS, loaded on first use with dlopen: the matmul variant of the run-to-run level
// ("cuda.cublas"). Volta's own GEMM is the strict kernel; below strict, planning may pick cuBLAS's
// SGEMM (TF32 off) where the batch dims allow one strided call. cuBLAS repeats its bits from run
// to run on the same GPU model with the same library, one stream and a fixed workspace, which
// this handle has (docs/determinism.md). The library is not linked, so binaries without a GPU
// never load it; a machine without it gets an error naming the library and the way around it.
#pragma once

#include <cstdint>
#include <memory>

#include <cuda_runtime_api.h>

#include "volta/status.h"

namespace volta::cuda {

// One column-major strided-batched SGEMM as cuBLAS takes it: C = op(A) op(B), beta 0.
struct GemmCall {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const float* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  float* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
};

class Blas {
 public:
  // The library, and a handle that issues on `stream` with TF32 off and `workspace` as its
  // only workspace.
  static Result<std::unique_ptr<Blas>> create(cudaStream_t stream, void* workspace, size_t bytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  Status sgemm(const GemmCall& c, const std::string& what);

  struct Api;

 private:
  explicit Blas(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
};

}  // namespace volta::cuda
