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
#include "volta/backend.h"
#include "volta/optim.h"

namespace volta {
namespace cuda {
namespace {

// An instantiated CUDA graph and the index checks it queues.
struct Graph final : Recording {
  cudaGraphExec_t exec = nullptr;
  std::vector<std::string> checks;
  ~Graph() override {
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
    auto rec = std::make_unique<Graph>();
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
    const auto& rec = static_cast<const Graph&>(r);
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
      if (ir::op_category(op) == ir::OpCategory::Binary) t[i] = [](CudaBackend& b, const Call& c) { return b.binary(c.n, c.in, c.out); };
      if (ir::op_category(op) == ir::OpCategory::Unary) t[i] = [](CudaBackend& b, const Call& c) { return b.unary(c.n, c.in, c.out); };
    }
    auto set = [&](Op op, Kernel k) { t[static_cast<size_t>(op)] = k; };
    set(Op::Matmul, [](CudaBackend& b, const Call& c) { return b.matmul(c.n, c.in, c.out); });
    set(Op::Gelu, [](CudaBackend& b, const Call& c) { return b.gelu(c.n, c.in, c.out); });
    set(Op::Softmax, [](CudaBackend& b, const Call& c) { return b.softmax(c.n, c.in, c.out, false); });
    set(Op::LogSoftmax, [](CudaBackend& b, const Call& c) { return b.softmax(c.n, c.in, c.out, true); });
    set(Op::LayerNorm, [](CudaBackend& b, const Call& c) { return b.norm(c.n, c.in, c.out, true); });
    set(Op::RmsNorm, [](CudaBackend& b, const Call& c) { return b.norm(c.n, c.in, c.out, false); });
    set(Op::CausalMask, [](CudaBackend& b, const Call& c) { return b.causal_mask(c.n, c.in, c.out); });
    set(Op::Embedding, [](CudaBackend& b, const Call& c) { return b.embedding(c.n, c.in, c.out); });
    set(Op::Reshape, [](CudaBackend& b, const Call& c) { return b.reshape(c.n, c.in, c.out); });
    set(Op::Transpose, [](CudaBackend& b, const Call& c) { return b.transpose(c.n, c.in, c.out); });
    set(Op::Slice, [](CudaBackend& b, const Call& c) { return b.slice(c.n, c.in, c.out); });
    set(Op::Concat, [](CudaBackend& b, const Call& c) { return b.concat(c.n, c.in, c.out); });
    set(Op::Pad, [](CudaBackend& b, const Call& c) { return b.pad(c.n, c.in, c.out); });
    set(Op::Broadcast, [](CudaBackend& b, const Call& c) { return b.broadcast(c.n, c.in, c.out); });
    set(Op::ReduceSum, [](CudaBackend& b, const Call& c) { return b.reduce(c.n, c.in, c.out, ReduceOp::Sum); });
    set(Op::ReduceMean, [](CudaBackend& b, const Call& c) { return b.reduce(c.n, c.in, c.out, ReduceOp::Mean); });
    set(Op::ReduceMax, [](CudaBackend& b, const Call& c) { return b.reduce(c.n, c.in, c.out, ReduceOp::Max); });
    set(Op::ReluGrad, [](CudaBackend& b, const Call& c) { return b.relu_grad(c.n, c.in, c.out); });
    set(Op::GeluGrad, [](CudaBackend& b, const Call& c) { return b.gelu_grad(c.n, c.in, c.out); });
    set(Op::SiluGrad, [](CudaBackend& b, const Call& c) {
      VOLTA_RETURN_IF_ERROR(require_f32(c.n, c.in, c.out));
      return launched(launch_silu_grad(c.in[0].as<const float>(), c.in[1].as<const float>(), c.out.as<float>(), c.out.numel(),
                                       b.stream_.get()),
                      c.n);
    });
    set(Op::SoftmaxGrad, [](CudaBackend& b, const Call& c) { return b.softmax_grad(c.n, c.in, c.out); });
    set(Op::LayerNormGrad, [](CudaBackend& b, const Call& c) { return b.norm_grad(c.n, c.in, c.out, true); });
    set(Op::RmsNormGrad, [](CudaBackend& b, const Call& c) { return b.norm_grad(c.n, c.in, c.out, false); });
    set(Op::EmbeddingGrad, [](CudaBackend& b, const Call& c) { return b.embedding_grad(c.n, c.in, c.out); });
    set(Op::CrossEntropy, [](CudaBackend& b, const Call& c) { return b.cross_entropy(c.n, c.in, c.out, c.ws); });
    set(Op::CrossEntropyGrad, [](CudaBackend& b, const Call& c) { return b.cross_entropy(c.n, c.in, c.out, c.ws); });
    set(Op::GradNorm, [](CudaBackend& b, const Call& c) { return b.grad_norm(c.n, c.in, c.out, c.ws); });
    set(Op::OptimizerUpdate, [](CudaBackend& b, const Call& c) { return b.optimizer_update(c.n, c.in, c.out); });
    set(Op::Increment, [](CudaBackend& b, const Call& c) { return b.increment(c.n, c.in, c.out); });
    set(Op::CacheWrite, [](CudaBackend& b, const Call& c) { return b.cache_write(c.n, c.in, c.out); });
    set(Op::Rope, [](CudaBackend& b, const Call& c) { return b.rope(c.n, c.in, c.out); });
    set(Op::Swiglu, [](CudaBackend& b, const Call& c) { return b.swiglu(c.n, c.in, c.out); });
    set(Op::SwigluGrad, [](CudaBackend& b, const Call& c) { return b.swiglu(c.n, c.in, c.out); });
    set(Op::Attention, [](CudaBackend& b, const Call& c) { return b.attention(c.n, c.in, c.out, c.ws); });
    set(Op::AttentionGrad, [](CudaBackend& b, const Call& c) { return b.attention(c.n, c.in, c.out, c.ws); });
    return t;
  }

 private:
  Status gelu(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Gelu>(n));
    const bool tanh_form = at->approximate == "tanh";
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    return launched(launch_gelu(in[0].as<const float>(), out.as<float>(), out.numel(), tanh_form, stream_.get()), n);
  }

  // layer_norm (center) or rms_norm over the last axis.
  Status norm(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool center) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const double eps, (ir::field_of<Op::LayerNorm, Op::RmsNorm>(n, [](const auto& a) { return a.eps; })));
    const Shape& sh = in[0].shape();
    const int64_t D = sh.empty() ? 0 : sh.back();
    const int64_t rows = D == 0 ? 0 : in[0].numel() / D;
    const float* beta = center && in.size() > 2 ? in[2].as<const float>() : nullptr;
    return launched(launch_norm(in[0].as<const float>(), in[1].as<const float>(), beta, out.as<float>(), rows, D, eps,
                                center, stream_.get()),
                    n);
  }

  Status causal_mask(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CausalMask>(n));
    const int64_t offset = at->offset;
    const double fill = at->value;
    const Shape& sh = in[0].shape();
    if (sh.size() < 2) return internal_error(prefix(n) + "input must have rank >= 2 " + ir::node_ref(n));
    const int64_t R = sh[sh.size() - 2], C = sh.back();
    return launched(launch_causal_mask(in[0].as<const float>(), out.as<float>(), product(sh, 0, sh.size() - 2), R, C, offset,
                                       static_cast<float>(fill), stream_.get()),
                    n);
  }

  Status reshape(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    const size_t bytes = std::min(out.type.bytes(), in[0].type.bytes());
    if (bytes == 0) return Status::ok();
    return check(cudaMemcpyAsync(out.data, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream_.get()),
                 prefix(n) + ir::node_ref(n));
  }

  Status relu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    return launched(
        launch_relu_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(), stream_.get()), n);
  }

  Status gelu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GeluGrad>(n));
    return launched(launch_gelu_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(),
                                     at->approximate == "tanh", stream_.get()),
                    n);
  }

  Status softmax_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::SoftmaxGrad>(n));
    const double scale = at->scale;
    const Shape& sh = in[0].shape();
    VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, at->axis, sh.size()));
    return launched(launch_softmax_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(),
                                        product(sh, 0, axis), sh[axis], product(sh, axis + 1, sh.size()), scale,
                                        stream_.get()),
                    n);
  }

  // dx of layer_norm (center) or rms_norm.
  Status norm_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool center) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const double eps,
                           (ir::field_of<Op::LayerNormGrad, Op::RmsNormGrad>(n, [](const auto& a) { return a.eps; })));
    const Shape& sh = in[0].shape();
    const int64_t D = sh.empty() ? 0 : sh.back();
    const int64_t rows = D == 0 ? 0 : in[0].numel() / D;
    return launched(launch_norm_grad(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                                     out.as<float>(), rows, D, eps, center, stream_.get()),
                    n);
  }

  Status increment(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    return launched(launch_increment(in[0].as<int64_t>(), out.as<int64_t>(), stream_.get()), n);
  }

  // rows [..., T, D] into cache [..., S, D] at the run-time position, in place. The position
  // stays on the device: the kernel writes nothing when it is outside [0, S - T] (a decode
  // step's position embedding reports that case by name, see docs/cuda.md).
  Status cache_write(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    const Shape& c = in[0].shape();
    const size_t r = c.size();
    if (r < 2 || in[2].type.dtype != DType::i32 || out.type.bytes() != in[0].type.bytes())
      return internal_error(prefix(n) + "expects a cache of rank >= 2 and an i32 position " + ir::node_ref(n));
    const int64_t S = c[r - 2], T = in[1].shape()[r - 2];
    const int64_t row_bytes = c[r - 1] * static_cast<int64_t>(dtype_size(in[0].type.dtype));
    if (row_bytes % 4 != 0) return internal_error(prefix(n) + "rows must be whole 4-byte words " + ir::node_ref(n));
    VOLTA_RETURN_IF_ERROR(launched(launch_cache_write(in[0].data, in[1].data, in[2].as<const int32_t>(), product(c, 0, r - 2),
                                                     S, T, row_bytes / 4, stream_.get()),
                                   n));
    // Plans alias the output to the cache; a node run on its own (the op-test harness) gets a copy.
    if (out.data == in[0].data || out.type.bytes() == 0) return Status::ok();
    return check(cudaMemcpyAsync(out.data, in[0].data, out.type.bytes(), cudaMemcpyDeviceToDevice, stream_.get()),
                 prefix(n) + ir::node_ref(n));
  }

  // x [..., T, D] rotated by rows 0.. (or position..) of the tables. The position stays on the
  // device: out of range, the output is nan (the CPU reports it by name).
  Status rope(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    const Shape& x = in[0].shape();
    const int64_t D = x.back(), T = x[x.size() - 2];
    return launched(launch_rope(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                                in.size() == 4 ? in[3].as<const int32_t>() : nullptr, out.as<float>(), D == 0 ? 0 : in[0].numel() / D,
                                T, D / 2, in[1].shape()[0], stream_.get()),
                    n);
  }

  // attention (q, k, v[, k2, v2 | position]) and attention_grad (q, k, v, dy): shapes as
  // ref_attention.cpp reads them; the position stays on the device (out of range: nan output,
  // which TinyLM's position embedding reports by name first, as for rope).
  Status attention(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace) {
    const bool grad = n.op == Op::AttentionGrad;
    const bool position = !grad && in.size() == 4;
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].type.dtype != DType::f32 && !(position && i == 3))
        return internal_error(prefix(n) + "CUDA kernel computes f32 only " + ir::node_ref(n));
    if (out.type.dtype != DType::f32) return internal_error(prefix(n) + "CUDA kernel computes f32 only " + ir::node_ref(n));
    AttentionDesc d;
    std::optional<int64_t> causal_offset, prefix_rows;
    if (grad) {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::AttentionGrad>(n));
      d.scale = at->scale, causal_offset = at->causal_offset;
    } else {
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Attention>(n));
      d.scale = at->scale, causal_offset = at->causal_offset, prefix_rows = at->prefix;
    }
    d.causal = causal_offset.has_value();
    d.offset = causal_offset.value_or(0);
    const Shape& qs = in[0].shape();
    const size_t r = qs.size();
    if (r < 2 || in[1].shape().size() != r || in[2].shape().size() != r)
      return internal_error(prefix(n) + "expects q, k, v of one rank >= 2 " + ir::node_ref(n));
    d.G = product(qs, 0, r - 2), d.T = qs[r - 2], d.D = qs[r - 1], d.E = in[2].shape()[r - 1];
    const int64_t kv_groups = product(in[1].shape(), 0, r - 2);
    d.rep = kv_groups == 0 ? 1 : d.G / kv_groups;
    d.cap = in[1].shape()[r - 2];
    d.S1 = prefix_rows.value_or(d.cap);
    d.S2 = in.size() == 5 ? in[3].shape()[r - 2] : 0;
    if (position) d.position = in[3].as<const int32_t>();
    if (d.D > kAttentionMaxDim || d.E > kAttentionMaxDim)
      return unimplemented(prefix(n) + "the CUDA kernel takes head dims up to " + std::to_string(kAttentionMaxDim) + ", not " +
                           std::to_string(std::max(d.D, d.E)) + " " + ir::node_ref(n));
    const size_t need = static_cast<size_t>(attention_workspace_bytes(d.G, d.T, grad));
    if (workspace.size() < need) return internal_error(prefix(n) + "workspace too small " + ir::node_ref(n));
    int* finite = reinterpret_cast<int*>(workspace.data());
    if (grad) {
      auto* stats = reinterpret_cast<double*>(workspace.data() + attention_flags_bytes(d.G));
      return launched(launch_attention_grad(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                                            in[3].as<const float>(), out.as<float>(), d, finite, stats, stream_.get()),
                      n);
    }
    const float* k2 = in.size() == 5 ? in[3].as<const float>() : nullptr;
    const float* v2 = in.size() == 5 ? in[4].as<const float>() : nullptr;
    return launched(launch_attention(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(), k2, v2,
                                     out.as<float>(), d, finite, stream_.get()),
                    n);
  }

  Status swiglu(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    const int64_t F = in[0].shape().back() / 2;
    return launched(launch_swiglu(in[0].as<const float>(), in.size() == 2 ? in[1].as<const float>() : nullptr, out.as<float>(),
                                  F == 0 ? 0 : in[0].numel() / (2 * F), F, stream_.get()),
                    n);
  }

  Status binary(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    const Shape& os = out.shape();
    VOLTA_RETURN_IF_ERROR(check_rank(n, os.size()));
    StridedIndex idx;
    idx.rank = static_cast<int>(os.size());
    for (size_t d = 0; d < os.size(); ++d) idx.dims[d] = os[d];
    broadcast_strides(in[0].shape(), os, 1, idx.strides[0]);
    broadcast_strides(in[1].shape(), os, 1, idx.strides[1]);
    const bool same = in[0].shape() == os && in[1].shape() == os;
    return launched(launch_binary(n.op, in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(), idx,
                                  same, stream_.get()),
                    n);
  }

  Status unary(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    return launched(launch_unary(n.op, in[0].as<const float>(), out.as<float>(), out.numel(), stream_.get()), n);
  }

  Status matmul(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(n));
    const int64_t ta = at->transpose_a, tb = at->transpose_b;
    const Shape& as = in[0].shape();
    const Shape& bs = in[1].shape();
    const Shape& os = out.shape();
    if (as.size() < 2 || bs.size() < 2 || os.size() < 2)
      return internal_error(prefix(n) + "operands must have rank >= 2 " + ir::node_ref(n));
    VOLTA_RETURN_IF_ERROR(check_rank(n, os.size() - 2));
    MatmulDesc d;
    d.M = os[os.size() - 2];
    d.N = os.back();
    d.K = ta ? as[as.size() - 2] : as.back();
    d.a_m = ta ? 1 : d.K;
    d.a_k = ta ? d.M : 1;
    d.b_k = tb ? 1 : d.N;
    d.b_n = tb ? d.K : 1;
    const Shape batch(os.begin(), os.end() - 2);
    d.batch = product(batch, 0, batch.size());
    d.batch_index.rank = static_cast<int>(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) d.batch_index.dims[i] = batch[i];
    broadcast_strides(Shape(as.begin(), as.end() - 2), batch, d.M * d.K, d.batch_index.strides[0]);
    broadcast_strides(Shape(bs.begin(), bs.end() - 2), batch, d.K * d.N, d.batch_index.strides[1]);
    return launched(launch_matmul(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), d, stream_.get()), n);
  }

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

  Status softmax(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool as_log) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in.subspan(0, 1), out));
    VOLTA_ASSIGN_OR_RETURN(const int64_t axis_attr, (ir::field_of<Op::Softmax, Op::LogSoftmax>(n, [](const auto& a) { return a.axis; })));
    const Shape& sh = in[0].shape();
    VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, sh.size()));
    SoftmaxDesc d;
    d.outer = product(sh, 0, axis);
    d.n = sh[axis];
    d.inner = product(sh, axis + 1, sh.size());
    if (!as_log) {  // log_softmax has no scale or mask
      VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Softmax>(n));
      d.scale = at->scale;
      d.causal = at->causal_offset.has_value();
      d.offset = at->causal_offset.value_or(0);
    }
    if (d.causal && sh.size() < 2) return internal_error(prefix(n) + "a causal softmax needs rank >= 2 " + ir::node_ref(n));
    d.rows = d.causal ? sh[sh.size() - 2] : 1;
    d.as_log = as_log;
    if (in.size() == 2) {  // the run-time part of the causal offset, read on the device
      if (!d.causal || in[1].type.dtype != DType::i32)
        return internal_error(prefix(n) + "a position input needs causal_offset and i32 " + ir::node_ref(n));
      d.position = in[1].as<const int32_t>();
      d.offset = std::clamp<int64_t>(d.offset, -d.n - 1, d.n);  // as the CPU saturates it
    }
    return launched(launch_softmax(in[0].as<const float>(), out.as<float>(), d, stream_.get()), n);
  }

  // Ids are range-checked on the host first (copied back from the device), so an
  // id out of range is an error naming the node, as on the CPU, and never a wild read.
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

  Status transpose(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Transpose>(n));
    const std::vector<int64_t>& perm = at->perm;
    const Shape& is = in[0].shape();
    const Shape& os = out.shape();
    if (perm.size() != is.size() || os.size() != is.size())
      return internal_error(prefix(n) + "perm does not match the input rank " + ir::node_ref(n));
    VOLTA_RETURN_IF_ERROR(check_rank(n, os.size()));
    int64_t in_st[kMaxRank];
    int64_t acc = 1;
    for (size_t d = is.size(); d-- > 0;) {
      in_st[d] = acc;
      acc *= is[d];
    }
    StridedIndex idx;
    idx.rank = static_cast<int>(os.size());
    for (size_t i = 0; i < perm.size(); ++i) {
      VOLTA_ASSIGN_OR_RETURN(const size_t p, axis_of(n, perm[i], is.size()));
      idx.dims[i] = os[i];
      idx.strides[0][i] = in_st[p];
    }
    return launched(launch_permute(in[0].data, out.data, out.numel(), static_cast<int>(dtype_size(out.type.dtype)), idx,
                                   stream_.get()),
                    n);
  }

  // One pitched copy: `outer` rows of `chunk` bytes.
  Status slice(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Slice>(n));
    const int64_t axis_attr = at->axis;
    int64_t start = at->start;
    const Shape& sh = in[0].shape();
    VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, sh.size()));
    const int64_t dim = sh[axis];
    if (start < 0) start += dim;
    start = std::clamp<int64_t>(start, 0, dim);
    const int64_t len = std::min(out.shape()[axis], dim - start);  // the rule's extent keeps copies in bounds
    const int64_t outer = product(sh, 0, axis);
    const size_t inner_bytes = static_cast<size_t>(product(sh, axis + 1, sh.size())) * dtype_size(out.type.dtype);
    const size_t chunk = static_cast<size_t>(len) * inner_bytes;
    if (chunk == 0 || outer == 0) return Status::ok();
    return check(cudaMemcpy2DAsync(out.data, chunk, in[0].data + static_cast<size_t>(start) * inner_bytes,
                                   static_cast<size_t>(dim) * inner_bytes, chunk, static_cast<size_t>(outer),
                                   cudaMemcpyDeviceToDevice, stream_.get()),
                 prefix(n) + "cudaMemcpy2DAsync " + ir::node_ref(n));
  }

  // One pitched copy per input into its column band of the output rows.
  Status concat(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Concat>(n));
    const int64_t axis_attr = at->axis;
    const Shape& os = out.shape();
    VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, os.size()));
    const int64_t outer = product(os, 0, axis);
    const size_t inner_bytes = static_cast<size_t>(product(os, axis + 1, os.size())) * dtype_size(out.type.dtype);
    const size_t row = static_cast<size_t>(os[axis]) * inner_bytes;
    size_t col = 0;
    for (const TensorRef& x : in) {
      const size_t chunk = static_cast<size_t>(x.shape()[axis]) * inner_bytes;
      if (chunk && outer)
        VOLTA_RETURN_IF_ERROR(check(cudaMemcpy2DAsync(out.data + col, row, x.data, chunk, chunk, static_cast<size_t>(outer),
                                                      cudaMemcpyDeviceToDevice, stream_.get()),
                                    prefix(n) + "cudaMemcpy2DAsync " + ir::node_ref(n)));
      col += chunk;
    }
    return Status::ok();
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

  // Each gradient's sum of squares over its fixed tree, then their sum in input order.
  Status grad_norm(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace) {
    size_t words = in.size();
    for (const TensorRef& g : in) words += static_cast<size_t>(squares_partials(g.numel()));
    if (workspace.size() < words * sizeof(double) || out.type.dtype != DType::f64)
      return internal_error(prefix(n) + "workspace too small or output not f64 " + ir::node_ref(n));
    auto* sums = reinterpret_cast<double*>(workspace.data());
    double* partials = sums + in.size();
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].type.dtype != DType::f32) return internal_error(prefix(n) + "gradients must be f32 " + ir::node_ref(n));
      VOLTA_RETURN_IF_ERROR(launched(launch_sum_of_squares(in[i].as<const float>(), in[i].numel(), partials, sums + i, stream_.get()), n));
      partials += squares_partials(in[i].numel());
    }
    return launched(launch_norm_of_sums(sums, static_cast<int64_t>(in.size()), out.as<double>(), stream_.get()), n);
  }

  // (param, grad, norm, lr, step[, slot0[, slot1]]): param and slots updated in place.
  Status optimizer_update(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::OptimizerUpdate>(n));
    VOLTA_ASSIGN_OR_RETURN(const optim::Kind kind, optim::parse_kind(at->kind));
    OptimDesc d;
    d.kind = static_cast<int>(kind);  // optim::Kind's order: sgd, adam, adamw
    d.beta1 = at->beta1, d.beta2 = at->beta2, d.eps = at->eps, d.momentum = at->momentum, d.weight_decay = at->weight_decay;
    d.clip = at->clip;
    if (in.size() < 5 || in[0].type.dtype != DType::f32 || in[1].type != in[0].type || (d.kind != 0 && in.size() != 7))
      return internal_error(prefix(n) + "expects (param, grad, norm, lr, step, slots...) " + ir::node_ref(n));
    d.norm = in[2].as<const double>();
    d.lr = in[3].as<const double>();
    d.step = in[4].as<const int64_t>();
    float* s0 = in.size() > 5 ? in[5].as<float>() : nullptr;
    float* s1 = in.size() > 6 ? in[6].as<float>() : nullptr;
    VOLTA_RETURN_IF_ERROR(launched(
        launch_optimizer_update(d, in[0].as<float>(), in[1].as<const float>(), s0, s1, in[0].numel(), stream_.get()), n));
    // The f32[] token the increment waits for: 0, as on the CPU.
    return check(cudaMemsetAsync(out.data, 0, out.type.bytes(), stream_.get()), prefix(n) + ir::node_ref(n));
  }

  Status reduce(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, ReduceOp op) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, (ir::field_of<Op::ReduceSum, Op::ReduceMean, Op::ReduceMax>(
                                                                n, [](const auto& a) { return a.axes; })));
    const Shape& sh = in[0].shape();
    VOLTA_RETURN_IF_ERROR(check_rank(n, sh.size()));
    std::vector<bool> reduced(sh.size(), false);
    for (int64_t a : axes) {
      VOLTA_ASSIGN_OR_RETURN(const size_t d, axis_of(n, a, sh.size()));
      reduced[d] = true;
    }
    // The reduced dims as one band between kept ones (size-1 dims aside): [O, R, I].
    int64_t band[3] = {1, 1, 1};
    int part = 0;  // 0: kept dims before the band, 1: the band, 2: kept dims after it
    bool banded = true;
    for (size_t d = 0; d < sh.size() && banded; ++d) {
      if (sh[d] == 1) continue;
      if (sh[d] == 0) banded = false;
      if (reduced[d] && part == 2) banded = false;
      if (reduced[d]) part = 1;
      if (!reduced[d] && part == 1) part = 2;
      band[part] *= sh[d];
    }
    if (banded && part > 0)
      return launched(launch_reduce_band(op, in[0].as<const float>(), out.as<float>(), band[0], band[1], band[2], stream_.get()), n);
    StridedIndex kept, red;
    int64_t stride = 1, n_out = 1, n_red = 1;
    std::vector<int64_t> strides(sh.size());
    for (size_t d = sh.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= sh[d];
    }
    for (size_t d = 0; d < sh.size(); ++d) {
      StridedIndex& idx = reduced[d] ? red : kept;
      idx.dims[idx.rank] = sh[d];
      idx.strides[0][idx.rank] = strides[d];
      ++idx.rank;
      (reduced[d] ? n_red : n_out) *= sh[d];
    }
    return launched(launch_reduce(op, in[0].as<const float>(), out.as<float>(), kept, n_out, red, n_red, stream_.get()), n);
  }

  Status broadcast(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    const Shape& os = out.shape();
    VOLTA_RETURN_IF_ERROR(check_rank(n, os.size()));
    if (in[0].shape().size() > os.size()) return internal_error(prefix(n) + "input rank above the output's " + ir::node_ref(n));
    StridedIndex idx;
    idx.rank = static_cast<int>(os.size());
    for (size_t d = 0; d < os.size(); ++d) idx.dims[d] = os[d];
    broadcast_strides(in[0].shape(), os, 1, idx.strides[0]);
    return launched(launch_permute(in[0].data, out.data, out.numel(), static_cast<int>(dtype_size(out.type.dtype)), idx,
                                   stream_.get()),
                    n);
  }

  // Zeros, then one pitched copy of the input rows into their band of the output rows.
  Status pad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out) {
    VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Pad>(n));
    const int64_t axis_attr = at->axis, before = at->before;
    const Shape& xs = in[0].shape();
    VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, xs.size()));
    const int64_t outer = product(xs, 0, axis), inner = product(xs, axis + 1, xs.size());
    const int64_t in_len = xs[axis], out_len = out.shape()[axis];
    if (before < 0 || before + in_len > out_len) return internal_error(prefix(n) + "pad band out of range " + ir::node_ref(n));
    if (out.type.bytes() == 0) return Status::ok();
    VOLTA_RETURN_IF_ERROR(check(cudaMemsetAsync(out.data, 0, out.type.bytes(), stream_.get()), prefix(n) + ir::node_ref(n)));
    const size_t width = static_cast<size_t>(in_len * inner) * sizeof(float);
    if (width == 0 || outer == 0) return Status::ok();
    return check(cudaMemcpy2DAsync(out.data + static_cast<size_t>(before * inner) * sizeof(float),
                                   static_cast<size_t>(out_len * inner) * sizeof(float), in[0].data, width, width,
                                   static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, stream_.get()),
                 prefix(n) + "cudaMemcpy2DAsync " + ir::node_ref(n));
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
