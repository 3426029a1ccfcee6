// The CUDA backend: device memory from a caching pool, one stream, and a kernel per op family
// (src/backends/cuda/*.cu). It reads the node's attributes and shapes here, on the host, and
// hands plain numbers to the launchers. It never falls back to the CPU: ops without a kernel
// are refused at plan time (capabilities.cpp, from kernel_list.h), and no driver or device is a clear error.
#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/blas.h"
#include "backends/cuda/capabilities.h"
#include "backends/cuda/device.h"
#include "backends/cuda/host_checks.h"
#include "backends/cuda/kernel_list.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/ops.h"
#include "volta/backend.h"
#include "volta/optim.h"

namespace volta {
namespace cuda {
namespace {

// An instantiated CUDA graph and the index checks it queues.
struct CudaGraph final : Recording {
  cudaGraphExec_t exec = nullptr;
  std::vector<std::string> checks;
  ~CudaGraph() override {
    if (exec) (void)cudaGraphExecDestroy(exec);
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(Stream stream, std::shared_ptr<MemoryPool> pool)
      : caps_(cuda::capabilities()), stream_(std::move(stream)), pool_(std::move(pool)) {}
  ~CudaBackend() override { (void)stream_.synchronize("cudaStreamSynchronize"); }  // pending work may use pooled blocks

  std::string name() const override { return "cuda"; }
  bool host_memory() const override { return false; }
  const Capabilities& capabilities() const override { return caps_; }

  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) override {
    VOLTA_ASSIGN_OR_RETURN(void* p, pool_->acquire(align_up(bytes == 0 ? 1 : bytes)));
    std::shared_ptr<MemoryPool> pool = pool_;  // the block may outlive the backend object
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [pool](std::byte* q) { (void)pool->release(q); });
  }
  // cudaMemcpyDefault: the runtime also copies out of host memory (a graph output that is a
  // view of a bound input), which UVA resolves.
  Status copy_in(std::byte* dst, const std::byte* src, size_t bytes) override {
    if (bytes == 0) return Status::ok();
    VOLTA_RETURN_IF_ERROR(check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_.get()), "cudaMemcpy host to device"));
    return stream_.synchronize("CUDA execution before a host-to-device copy completed");
  }
  Status copy_out(std::byte* dst, const std::byte* src, size_t bytes) override {
    if (bytes == 0) return Status::ok();
    VOLTA_RETURN_IF_ERROR(check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_.get()), "cudaMemcpy device to host"));
    VOLTA_RETURN_IF_ERROR(stream_.synchronize("CUDA execution before a device-to-host copy"));
    return index_errors();
  }
  Status synchronize() override {
    VOLTA_RETURN_IF_ERROR(stream_.synchronize("CUDA execution"));
    return index_errors();
  }
  KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n, Determinism level) const override {
    return cuda::kernel_info(g, n, level);
  }
  Status check_node(const ir::Graph& g, const ir::Node& n) const override { return cuda::check_node(g, n); }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) const override { return cuda::workspace_bytes(g, n); }

  // CUDA graphs: the stream's launches between begin and end are captured (nothing runs), then
  // instantiated; a replay launches the whole graph on the stream. The index checks a recording
  // queued are restored with each replay, so their errors are reported as after a plain run.
  bool can_record() const override { return true; }
  Status begin_recording() override {
    if (!pending_checks_.empty()) VOLTA_RETURN_IF_ERROR(synchronize());  // report, then start from none
    return check(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
  }
  Result<std::unique_ptr<Recording>> end_recording() override {
    cudaGraph_t graph = nullptr;
    std::vector<std::string> checks;
    checks.swap(pending_checks_);  // queued, not run
    cudaError_t err = cudaStreamEndCapture(stream_.get(), &graph);
    auto rec = std::make_unique<CudaGraph>();
    if (err == cudaSuccess) {
      err = cudaGraphInstantiate(&rec->exec, graph, 0);
      (void)cudaGraphDestroy(graph);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // a failed capture must not fail the next launch's check
      return check(err, "recording the plan as a CUDA graph");
    }
    rec->checks = std::move(checks);
    return std::unique_ptr<Recording>(std::move(rec));
  }
  Status replay(const Recording& r) override {
    const auto& rec = static_cast<const CudaGraph&>(r);
    if (!pending_checks_.empty()) VOLTA_RETURN_IF_ERROR(synchronize());  // the tokens count from 0
    VOLTA_RETURN_IF_ERROR(check(cudaGraphLaunch(rec.exec, stream_.get()), "cudaGraphLaunch"));
    pending_checks_ = rec.checks;
    return Status::ok();
  }

  // Every input is in device memory: the runtime binds the state's buffers, resident params and
  // constants, and per-plan copies of the inputs.
  Status execute(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace,
                 const KernelInfo& kernel) override {
    if (kernel.index == kCublasMatmul && n.op == Op::Matmul) return cublas_matmul(n, in, out);
    if (kernel.index == kTf32x3Attention && (n.op == Op::Attention || n.op == Op::AttentionGrad))
      return ops::attention(n, in, out, workspace, stream_.get(), true);
    const Kernel k = kernel_table()[static_cast<size_t>(n.op)];
    if (!k) return unimplemented(prefix(n) + "no CUDA kernel " + ir::node_ref(n));
    return k(*this, Call{n, in, out, workspace});
  }

  // One node's operands, as execute() receives them.
  struct Call {
    const ir::Node& n;
    std::span<const TensorRef> in;
    const TensorRef& out;
    std::span<std::byte> ws;
  };
  using Kernel = Status (*)(CudaBackend&, const Call&);

  // The kernel table: every op of ops.def's Unary and Binary categories runs the one
  // elementwise template over ir/scalar_math.h, the ops of kernel_list.h their own kernels.
  // capabilities.cpp derives the supported ops from kernel_list.h; a static_assert below keeps
  // this table and that list equal.
  static constexpr std::array<Kernel, ir::kNumOps> kernel_table() {
    std::array<Kernel, ir::kNumOps> t{};
    for (size_t i = 0; i < t.size(); ++i) {
      const auto op = static_cast<Op>(i);
      if (ir::op_category(op) == ir::OpCategory::Binary) t[i] = [](CudaBackend& b, const Call& c) { return ops::binary(c.n, c.in, c.out, b.stream_.get()); };
      if (ir::op_category(op) == ir::OpCategory::Unary) t[i] = [](CudaBackend& b, const Call& c) { return ops::unary(c.n, c.in, c.out, b.stream_.get()); };
    }
    auto set = [&](Op op, Kernel k) { t[static_cast<size_t>(op)] = k; };
    set(Op::Matmul, [](CudaBackend& b, const Call& c) { return ops::matmul(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Gelu, [](CudaBackend& b, const Call& c) { return ops::gelu(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Softmax, [](CudaBackend& b, const Call& c) { return ops::softmax(c.n, c.in, c.out, false, b.stream_.get()); });
    set(Op::LogSoftmax, [](CudaBackend& b, const Call& c) { return ops::softmax(c.n, c.in, c.out, true, b.stream_.get()); });
    set(Op::LayerNorm, [](CudaBackend& b, const Call& c) { return ops::norm(c.n, c.in, c.out, true, b.stream_.get()); });
    set(Op::RmsNorm, [](CudaBackend& b, const Call& c) { return ops::norm(c.n, c.in, c.out, false, b.stream_.get()); });
    set(Op::CausalMask, [](CudaBackend& b, const Call& c) { return ops::causal_mask(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Embedding, [](CudaBackend& b, const Call& c) { return b.embedding(c.n, c.in, c.out); });
    set(Op::Reshape, [](CudaBackend& b, const Call& c) { return ops::reshape(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Transpose, [](CudaBackend& b, const Call& c) { return ops::transpose(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Slice, [](CudaBackend& b, const Call& c) { return ops::slice(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Concat, [](CudaBackend& b, const Call& c) { return ops::concat(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Pad, [](CudaBackend& b, const Call& c) { return ops::pad(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Broadcast, [](CudaBackend& b, const Call& c) { return ops::broadcast(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::ReduceSum, [](CudaBackend& b, const Call& c) { return ops::reduce(c.n, c.in, c.out, ReduceOp::Sum, b.stream_.get()); });
    set(Op::ReduceMean, [](CudaBackend& b, const Call& c) { return ops::reduce(c.n, c.in, c.out, ReduceOp::Mean, b.stream_.get()); });
    set(Op::ReduceMax, [](CudaBackend& b, const Call& c) { return ops::reduce(c.n, c.in, c.out, ReduceOp::Max, b.stream_.get()); });
    set(Op::ReluGrad, [](CudaBackend& b, const Call& c) { return ops::relu_grad(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::GeluGrad, [](CudaBackend& b, const Call& c) { return ops::gelu_grad(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::SiluGrad, [](CudaBackend& b, const Call& c) { return ops::silu_grad(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::SoftmaxGrad, [](CudaBackend& b, const Call& c) { return ops::softmax_grad(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::LayerNormGrad, [](CudaBackend& b, const Call& c) { return ops::norm_grad(c.n, c.in, c.out, true, b.stream_.get()); });
    set(Op::RmsNormGrad, [](CudaBackend& b, const Call& c) { return ops::norm_grad(c.n, c.in, c.out, false, b.stream_.get()); });
    set(Op::EmbeddingGrad, [](CudaBackend& b, const Call& c) { return b.embedding_grad(c.n, c.in, c.out); });
    set(Op::CrossEntropy, [](CudaBackend& b, const Call& c) { return b.cross_entropy(c.n, c.in, c.out, c.ws); });
    set(Op::CrossEntropyGrad, [](CudaBackend& b, const Call& c) { return b.cross_entropy(c.n, c.in, c.out, c.ws); });
    set(Op::GradNorm, [](CudaBackend& b, const Call& c) { return ops::grad_norm(c.n, c.in, c.out, c.ws, b.stream_.get()); });
    set(Op::OptimizerUpdate, [](CudaBackend& b, const Call& c) { return ops::optimizer_update(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Increment, [](CudaBackend& b, const Call& c) { return ops::increment(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::CacheWrite, [](CudaBackend& b, const Call& c) { return ops::cache_write(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Rope, [](CudaBackend& b, const Call& c) { return ops::rope(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Swiglu, [](CudaBackend& b, const Call& c) { return ops::swiglu(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::SwigluGrad, [](CudaBackend& b, const Call& c) { return ops::swiglu(c.n, c.in, c.out, b.stream_.get()); });
    set(Op::Attention, [](CudaBackend& b, const Call& c) { return ops::attention(c.n, c.in, c.out, c.ws, b.stream_.get()); });
    set(Op::AttentionGrad, [](CudaBackend& b, const Call& c) { return ops::attention(c.n, c.in, c.out, c.ws, b.stream_.get()); });
    return t;
  }

 private:
  // The run-to-run variant: one strided-batched SGEMM, row-major operands read as cuBLAS's
  // column-major transposes (C^T = op(B)^T op(A)^T). The handle, its workspace and the library
  // come with the first call.
  Status cublas_matmul(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(n));
    const bool ta = at->transpose_a != 0, tb = at->transpose_b != 0;
    const Shape& os = out.shape();
    const auto gb = gemm_batch(in[0].shape(), in[1].shape(), os, ta);
    if (!gb) return internal_error(prefix(n) + "cuda.cublas was chosen for a batch no strided GEMM covers " + ir::node_ref(n));
    if (!blas_) {
      constexpr size_t kWorkspace = size_t{32} << 20;  // fixed for the handle's life: part of the run-to-run promise
      VOLTA_ASSIGN_OR_RETURN(blas_workspace_, allocate(kWorkspace));
      VOLTA_ASSIGN_OR_RETURN(blas_, Blas::create(stream_.get(), blas_workspace_.get(), kWorkspace));
    }
    const int64_t M = os[os.size() - 2], N = os.back();
    const int64_t K = ta ? in[0].shape()[in[0].shape().size() - 2] : in[0].shape().back();
    GemmCall c;
    c.trans_a = tb, c.trans_b = ta;
    c.m = N, c.n = M, c.k = K;
    c.a = in[1].as<const float>(), c.lda = tb ? K : N, c.stride_a = gb->stride_b;
    c.b = in[0].as<const float>(), c.ldb = ta ? M : K, c.stride_b = gb->stride_a;
    c.c = out.as<float>(), c.ldc = N, c.stride_c = M * N;
    c.batch = gb->batch;
    return blas_->sgemm(c, prefix(n) + "cuBLAS SGEMM " + ir::node_ref(n));
  }

  // Ids are range-checked on the device (check_indices): an id out of range is an error naming
  // the node, as on the CPU, and never a wild read.
  Status embedding(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    const TensorRef& table = in[0];
    const TensorRef& ids = in[1];
    if (table.shape().size() != 2 || !is_integer(ids.type.dtype) || table.type.bytes() % 4 != 0)
      return internal_error(prefix(n) + "expects table [V, D] and integer ids " + ir::node_ref(n));
    const int64_t V = table.shape()[0];
    VOLTA_RETURN_IF_ERROR(check_indices(n, ids, "id", V));
    const int64_t count = ids.numel();
    const int64_t words = static_cast<int64_t>(static_cast<size_t>(table.shape()[1]) * dtype_size(table.type.dtype) / 4);
    return launched(
        launch_gather_rows(table.data, V, ids.data, ids.type.dtype == DType::i64, out.data, count, words, stream_.get()), n);
  }

  // Integer indices (ids, targets) checked on the device against [0, bound), entries equal to
  // `*skip` aside (launch_check_indices): an index out of range is an error naming the node, as
  // on the CPU, reported at the next synchronisation, and never a wild read on the device.
  // `counted` (device, or null) gets the number of entries not skipped.
  Status check_indices(const ir::Node& n, const TensorRef& idx, const char* what, int64_t bound, const int64_t* skip = nullptr,
                       int64_t* counted = nullptr) {
    if (!is_integer(idx.type.dtype)) return internal_error(prefix(n) + "expects integer indices " + ir::node_ref(n));
    if (!index_error_) {
      VOLTA_ASSIGN_OR_RETURN(index_error_, allocate(sizeof(IndexError)));
      const IndexError none;
      VOLTA_RETURN_IF_ERROR(copy_in(index_error_.get(), reinterpret_cast<const std::byte*>(&none), sizeof none));
    }
    pending_checks_.push_back(prefix(n) + what + " %v at flat position %p is outside [0, " + std::to_string(bound) + ") " +
                              ir::node_ref(n));
    return launched(launch_check_indices(idx.data, idx.type.dtype == DType::i64, idx.numel(), bound, skip != nullptr,
                                         skip ? *skip : 0, static_cast<int64_t>(pending_checks_.size()) - 1,
                                         reinterpret_cast<IndexError*>(index_error_.get()), counted, stream_.get()),
                    n);
  }

  // After a synchronisation: the first index error of the checks since the last one, if any.
  Status index_errors() {
    if (pending_checks_.empty()) return Status::ok();
    IndexError e;
    VOLTA_RETURN_IF_ERROR(check(cudaMemcpy(&e, index_error_.get(), sizeof e, cudaMemcpyDeviceToHost), "reading the index checks"));
    if (e.token < 0 || e.token >= static_cast<int64_t>(pending_checks_.size())) {
      pending_checks_.clear();
      return Status::ok();
    }
    std::string message = pending_checks_[static_cast<size_t>(e.token)];
    pending_checks_.clear();
    message.replace(message.find("%v"), 2, std::to_string(e.value));
    message.replace(message.find("%p"), 2, std::to_string(e.position));
    const IndexError none;
    VOLTA_RETURN_IF_ERROR(check(cudaMemcpy(index_error_.get(), &none, sizeof none, cudaMemcpyHostToDevice), "resetting the index checks"));
    return invalid_argument(message);
  }

  Status embedding_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    if (out.type.dtype != DType::f32 || in[1].type.dtype != DType::f32 || out.shape().size() != 2)
      return internal_error(prefix(n) + "expects f32 dy and a [rows, D] output " + ir::node_ref(n));
    const int64_t rows = out.shape()[0], D = out.shape()[1];
    VOLTA_RETURN_IF_ERROR(check_indices(n, in[0], "id", rows));
    return launched(launch_embedding_grad(in[0].data, in[0].type.dtype == DType::i64, in[0].numel(), in[1].as<const float>(),
                                          out.as<float>(), rows, D, stream_.get()),
                    n);
  }

  // cross_entropy (logits, targets) and cross_entropy_grad (logits, targets, dloss).
  Status cross_entropy(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out,
                       std::span<std::byte> workspace) {
    const TensorRef& logits = in[0];
    if (logits.type.dtype != DType::f32 || out.type.dtype != DType::f32 || logits.shape().empty())
      return internal_error(prefix(n) + "expects f32 logits [..., C] and integer targets " + ir::node_ref(n));
    VOLTA_ASSIGN_OR_RETURN(const std::optional<int64_t> ignore_index,
                           (ir::field_of<Op::CrossEntropy, Op::CrossEntropyGrad>(n, [](const auto& a) { return a.ignore_index; })));
    const bool has_ignore = ignore_index.has_value();
    const int64_t ignore = ignore_index.value_or(0);
    const int64_t C = logits.shape().back();
    const int64_t rows = in[1].numel();
    // workspace: the count of rows kept, then (forward) each row's loss
    if (workspace.size() < sizeof(int64_t) + (n.op == ir::Op::CrossEntropy ? static_cast<size_t>(rows) * sizeof(double) : 0))
      return internal_error(prefix(n) + "workspace too small " + ir::node_ref(n));
    auto* counted = reinterpret_cast<int64_t*>(workspace.data());
    VOLTA_RETURN_IF_ERROR(check_indices(n, in[1], "target", C, has_ignore ? &ignore : nullptr, counted));
    const bool i64 = in[1].type.dtype == DType::i64;
    if (n.op == ir::Op::CrossEntropyGrad) {
      if (in.size() < 3 || in[2].type.dtype != DType::f32)
        return internal_error(prefix(n) + "expects an f32 dloss input " + ir::node_ref(n));
      return launched(launch_cross_entropy_grad(logits.as<const float>(), in[1].data, i64, in[2].as<const float>(), rows, C,
                                                has_ignore, ignore, counted, out.as<float>(), stream_.get()),
                      n);
    }
    return launched(launch_cross_entropy(logits.as<const float>(), in[1].data, i64, rows, C, has_ignore, ignore, counted,
                                         reinterpret_cast<double*>(workspace.data() + sizeof(int64_t)), out.as<float>(),
                                         stream_.get()),
                    n);
  }

  Capabilities caps_;
  Stream stream_;
  std::shared_ptr<MemoryPool> pool_;
  std::shared_ptr<std::byte> blas_workspace_;  // before blas_: the handle is destroyed first
  std::unique_ptr<Blas> blas_;
  std::shared_ptr<std::byte> index_error_;   // IndexError on the device, allocated at the first check
  std::vector<std::string> pending_checks_;  // by token: the error text of each check since the last sync
};

// The ops of the kernel table are exactly those capabilities() reports (kernel_list.h).
constexpr bool table_matches_kernel_list() {
  std::array<bool, ir::kNumOps> listed{};
#define VOLTA_CUDA_KERNEL(Id) listed[static_cast<size_t>(ir::Op::Id)] = true;
  VOLTA_CUDA_KERNELS(VOLTA_CUDA_KERNEL)
#undef VOLTA_CUDA_KERNEL
  const auto table = CudaBackend::kernel_table();
  for (size_t i = 0; i < table.size(); ++i)
    if ((table[i] != nullptr) != (listed[i] || ir::elementwise_arity(static_cast<ir::Op>(i)) > 0)) return false;
  return true;
}
static_assert(table_matches_kernel_list(), "the CUDA kernel table and kernel_list.h disagree");

}  // namespace
}  // namespace cuda

Result<std::unique_ptr<Backend>> make_cuda_backend() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return unavailable(std::string("--device cuda: no usable CUDA driver or device (") + cudaGetErrorString(err) + ")");
  }
  if (count == 0) return unavailable("--device cuda: no CUDA device is present");
  VOLTA_RETURN_IF_ERROR(cuda::check(cudaSetDevice(0), "--device cuda: cudaSetDevice(0)"));
  VOLTA_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::create());
  auto pool = std::make_shared<cuda::MemoryPool>(std::make_unique<cuda::CudaAllocator>());
  return std::unique_ptr<Backend>(std::make_unique<cuda::CudaBackend>(std::move(stream), std::move(pool)));
}

}  // namespace volta
