// The CUDA backend slot, built when the toolkit is found. It owns device memory and reports
// no kernels yet, so planning any graph for it fails naming the first op without a kernel;
// without a driver or device it reports that instead. It never falls back to the CPU.
#include <cuda_runtime_api.h>

#include "volta/backend.h"

namespace volta {

namespace {

Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  return unavailable(std::string(what) + ": " + cudaGetErrorString(err));
}

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    caps_.dtypes = {DType::f32, DType::i32, DType::i64};
    caps_.determinism = DeterminismLevel::Bitwise;
  }
  std::string name() const override { return "cuda"; }
  const Capabilities& capabilities() const override { return caps_; }

  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) override {
    void* p = nullptr;
    VOLTA_RETURN_IF_ERROR(cuda_status(cudaMalloc(&p, align_up(bytes == 0 ? 1 : bytes)), "cudaMalloc"));
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { cudaFree(q); });
  }
  Status copy_in(std::byte* dst, const std::byte* src, size_t bytes) override {
    return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy host to device");
  }
  Status copy_out(std::byte* dst, const std::byte* src, size_t bytes) override {
    return cuda_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy device to host");
  }
  size_t workspace_bytes(const ir::Graph&, const ir::Node&) const override { return 0; }
  Status execute(const ir::Node& node, std::span<const TensorRef>, const TensorRef&, std::span<std::byte>) override {
    return unimplemented("[" + std::string(ir::op_name(node.op)) + "] no CUDA kernel " + ir::node_ref(node));
  }
  Result<double> sum_of_squares(const TensorRef&) override { return unimplemented("CUDA backend: no training kernels yet"); }
  Status optimizer_update(const optim::UpdateStep&, const TensorRef&, const TensorRef&, std::span<const TensorRef>) override {
    return unimplemented("CUDA backend: no optimizer kernels yet");
  }

 private:
  Capabilities caps_;
};

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess)
    return unavailable(std::string("--device cuda: no usable CUDA driver or device (") + cudaGetErrorString(err) + ")");
  if (count == 0) return unavailable("--device cuda: no CUDA device is present");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>());
}

}  // namespace volta
