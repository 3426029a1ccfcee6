#include "backends/cuda/blas.h"

#include "backends/cuda/workspace.h"

#include <dlfcn.h>

#include <string>

#include <cublas_v2.h>

namespace volta::cuda {

struct Blas::Api {
  void* lib = nullptr;
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*, const float*,
                          int, long long, const float*, int, long long, const float*, float*, int, long long, int) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
  ~Api() {
    if (lib) dlclose(lib);
  }
};

namespace {

template <typename F>
bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

Status blas_status(const Blas::Api& api, cublasStatus_t s, const std::string& what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const std::string text = api.status_string ? api.status_string(s) : "cuBLAS error " + std::to_string(static_cast<int>(s));
  if (s == CUBLAS_STATUS_ALLOC_FAILED) return out_of_memory(what + ": " + text);
  return unavailable(what + ": " + text);
}

}  // namespace

Result<std::unique_ptr<Blas>> Blas::create(cudaStream_t stream, void* workspace, size_t bytes) {
  auto api = std::make_unique<Api>();
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    api->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (api->lib) break;
  }
  if (!api->lib)
    return unavailable("the cuda.cublas matmul (below --deterministic strict) needs libcublas.so, which could not be loaded (" +
                       std::string(dlerror()) + "); --deterministic strict runs Volta's own GEMM");
  if (!bind(api->lib, "cublasCreate_v2", api->create) || !bind(api->lib, "cublasDestroy_v2", api->destroy) ||
      !bind(api->lib, "cublasSetStream_v2", api->set_stream) || !bind(api->lib, "cublasSetWorkspace_v2", api->set_workspace) ||
      !bind(api->lib, "cublasSetMathMode", api->set_math_mode) || !bind(api->lib, "cublasSgemmStridedBatched", api->sgemm))
    return unavailable("libcublas.so lacks a function the cuda.cublas matmul calls (cuBLAS 12 or newer is needed)");
  bind(api->lib, "cublasGetStatusString", api->status_string);
  std::unique_ptr<Blas> blas(new Blas(std::move(api)));
  const Api& a = *blas->api_;
  cublasHandle_t h = nullptr;
  VOLTA_RETURN_IF_ERROR(blas_status(a, a.create(&h), "cublasCreate"));
  blas->handle_ = h;
  VOLTA_RETURN_IF_ERROR(blas_status(a, a.set_stream(h, stream), "cublasSetStream"));
  VOLTA_RETURN_IF_ERROR(blas_status(a, a.set_workspace(h, workspace, bytes), "cublasSetWorkspace"));
  // No TF32: fp32 products, as the strict kernel and the peers' fp32 runs (TF32 off).
  VOLTA_RETURN_IF_ERROR(blas_status(a, a.set_math_mode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  return blas;
}

Blas::Blas(std::unique_ptr<Api> api) : api_(std::move(api)) {}

Blas::~Blas() {
  if (handle_) (void)api_->destroy(static_cast<cublasHandle_t>(handle_));
}

Status Blas::sgemm(const GemmCall& c, const std::string& what) {
  if (!gemm_fits(c.m, c.n, c.k, c.batch)) return internal_error(what + ": dims exceed cuBLAS's int");
  const float one = 1.0f, zero = 0.0f;
  return blas_status(*api_,
                     api_->sgemm(static_cast<cublasHandle_t>(handle_), c.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 c.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(c.m), static_cast<int>(c.n),
                                 static_cast<int>(c.k), &one, c.a, static_cast<int>(c.lda), c.stride_a, c.b,
                                 static_cast<int>(c.ldb), c.stride_b, &zero, c.c, static_cast<int>(c.ldc), c.stride_c,
                                 static_cast<int>(c.batch)),
                     what);
}

}  // namespace volta::cuda
