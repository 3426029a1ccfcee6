// The CUDA backend. Host-side tests run everywhere: the memory pool's bookkeeping (with a fake
// allocator), the capability list against TinyLM's graphs, planning refusals, and the "no GPU"
// path. The device tests (per-op parity with the CPU backend, NaN/Inf, run-to-run bits, TinyLM
// logits and greedy text) skip with "no CUDA device" when make_cuda_backend() fails.
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "backends/cuda/capabilities.h"
#include "backends/cuda/memory_pool.h"
#include "model/generate.h"
#include "model/tinylm.h"
#include "test_util.h"
#include "volta/autograd.h"
#include "volta/optim.h"
#include "volta/train.h"
#include "volta/rng.h"
#include "volta/runtime.h"

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

// ---- Capabilities and planning without a GPU --------------------------------------------

std::vector<ir::Op> missing_ops(const ir::Graph& g, const Capabilities& caps) {
  std::vector<ir::Op> missing;
  for (const ir::Node& n : g.nodes)
    if (!ir::is_leaf(n.op) && !caps.supports(n.op)) missing.push_back(n.op);
  return missing;
}

// The pipeline of CUDA plans, as Runtime::compile derives it: the default one without the fusions
// (fuse_attention, fuse_matmul_epilogue) whose ops or variants the CUDA backend has no kernel
// for (see docs/cuda.md).
CompileOptions cuda_compile_options() {
  CompileOptions o;
  const Capabilities caps = cuda::capabilities();
  o.pipeline = passes::without_unsupported(o.pipeline, [&caps](ir::Op op) { return caps.supports(op); },
                                           [&caps](const std::string& f) { return caps.has(f); });
  return o;
}

TEST(CudaCapabilities, CoverTinyLMPrefillAndDecode) {
  const Capabilities caps = cuda::capabilities();
  EXPECT_EQ(caps.determinism, DeterminismLevel::Bitwise);
  const model::TinyLMConfig c;  // shakespeare-char
  auto prefill = model::build_tinylm_prefill(c, 2, 10);
  auto decode = model::build_tinylm_decode(c, 2);
  ASSERT_OK(prefill);
  ASSERT_OK(decode);
  for (const ir::Graph* g : {&*prefill, &*decode}) {
    // The graphs as built and as the default pipeline rewrites them (fused softmax, ...).
    auto optimized = passes::run_pipeline(*g, cuda_compile_options().pipeline);
    ASSERT_OK(optimized);
    for (const ir::Graph* h : std::initializer_list<const ir::Graph*>{g, &*optimized}) {
      const std::vector<ir::Op> missing = missing_ops(*h, caps);
      EXPECT_TRUE(missing.empty()) << "no CUDA kernel for " << ir::op_name(missing.front()) << " in " << h->name;
    }
  }
  EXPECT_FALSE(caps.supports(ir::Op::Conv2d));
  EXPECT_FALSE(caps.supports(ir::Op::Mse));
}

// Forward + backward of the TinyLM loss, with and without biases, as the CUDA pipeline
// rewrites it: every op has a kernel.
TEST(CudaCapabilities, CoverTinyLMTraining) {
  const Capabilities caps = cuda::capabilities();
  for (bool bias : {false, true}) {
    model::TinyLMConfig c;
    c.bias = bias;
    auto g = model::build_tinylm_loss(c, 2, 16);
    ASSERT_OK(g);
    auto gg = autograd::build_backward(*g);
    ASSERT_OK(gg);
    auto optimized = passes::run_pipeline(gg->graph, cuda_compile_options().pipeline);
    ASSERT_OK(optimized);
    for (const ir::Graph* h : std::initializer_list<const ir::Graph*>{&gg->graph, &*optimized}) {
      const std::vector<ir::Op> missing = missing_ops(*h, caps);
      EXPECT_TRUE(missing.empty()) << "no CUDA kernel for " << ir::op_name(missing.front()) << " (bias " << bias << ")";
    }
  }
}

// A backend with the CUDA backend's name and capabilities and no device, to see planning
// refuse what it cannot run before any device memory is touched.
class CapabilitiesOnly final : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  const Capabilities& capabilities() const override { return caps_; }
  bool host_memory() const override { return false; }
  Result<std::shared_ptr<std::byte>> allocate(size_t) override { return unavailable("no device"); }
  Status copy_in(std::byte*, const std::byte*, size_t) override { return unavailable("no device"); }
  Status copy_out(std::byte*, const std::byte*, size_t) override { return unavailable("no device"); }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) const override { return cuda::workspace_bytes(g, n); }
  Status execute(const ir::Node&, std::span<const TensorRef>, const TensorRef&, std::span<std::byte>) override {
    return unavailable("no device");
  }

 private:
  Capabilities caps_ = cuda::capabilities();
};

// The memory guard: the planned device memory of the reference configs' plans, exact bytes per
// class, as the CUDA backend plans them (its capabilities and workspaces; no device needed).
// A change that makes any of them grow fails here; one that shrinks them updates the numbers.
struct PlannedMemory {
  const char* what;
  size_t arena, param, opt_state, kv_cache, grad_peak, activation_peak, h2d_per_run, d2h_per_run;
};

PlannedMemory planned(const char* what, const plan::ExecutionPlan& p) {
  const plan::MemoryReport& m = p.memory;
  auto peak = [&](plan::MemClass c) { return m.peak[static_cast<size_t>(c)]; };
  return {what, m.arena_bytes, peak(plan::MemClass::Param), peak(plan::MemClass::OptState), peak(plan::MemClass::KvCache),
          peak(plan::MemClass::Grad), peak(plan::MemClass::Activation), m.placement.host_input_bytes,
          m.placement.device_output_bytes};
}

TEST(CudaMemoryGuard, PlannedDevicePeakOfTheReferenceConfigs) {
  struct Config {
    const char* name;
    model::TinyLMConfig model;
    int64_t batch;
  };
  model::TinyLMConfig gpu_gpt;  // the GPU-sized GPT of the benchmarks
  gpu_gpt.layers = 6, gpu_gpt.heads = 6, gpu_gpt.channels = 384, gpu_gpt.context = 256;
  const Config configs[] = {{"shakespeare-char", model::TinyLMConfig{}, 12}, {"gpu-gpt", gpu_gpt, 64}};
  Runtime rt(std::make_unique<CapabilitiesOnly>());
  std::vector<PlannedMemory> got;
  for (const Config& c : configs) {
    auto g = model::build_tinylm_loss(c.model, c.batch, c.model.context);
    ASSERT_OK(g);
    train::TrainingOptions opts;
    opts.optimizer.kind = optim::Kind::AdamW;
    opts.optimizer.clip_norm = 1.0;
    auto tp = train::compile_training(rt, *g, opts);
    ASSERT_OK(tp);
    got.push_back(planned(c.name, *tp->step));
    for (int64_t B : {int64_t{1}, int64_t{32}}) {
      auto d = model::build_tinylm_decode(c.model, B);
      ASSERT_OK(d);
      auto p = rt.compile(*d);
      ASSERT_OK(p);
      got.push_back(planned(c.name, **p));
    }
  }
  // training step, decode batch 1, decode batch 32 of each config.
  const PlannedMemory want[] = {
      {"shakespeare-char", 30835776, 3216384, 6432832, 0, 3216384, 30310912, 6208, 20},
      {"shakespeare-char", 4608, 3216384, 0, 262144, 0, 4608, 128, 260},
      {"shakespeare-char", 147456, 3216384, 0, 8388608, 0, 147456, 192, 8320},
      {"gpu-gpt", 3150548032, 42980352, 85960768, 0, 42980352, 3145827840, 131136, 20},
      {"gpu-gpt", 15360, 42980352, 0, 4718592, 0, 13824, 128, 260},
      {"gpu-gpt", 491520, 42980352, 0, 150994944, 0, 442368, 192, 8320},
  };
  ASSERT_EQ(got.size(), std::size(want));
  for (size_t i = 0; i < got.size(); ++i) {
    const PlannedMemory& a = got[i];
    const PlannedMemory& b = want[i];
    std::printf("memory %-16s plan %zu: arena %zu, param %zu, optimizer_state %zu, kv_cache %zu, grad peak %zu, "
                "activation peak %zu, h2d/run %zu, d2h/run %zu\n",
                a.what, i % 3, a.arena, a.param, a.opt_state, a.kv_cache, a.grad_peak, a.activation_peak, a.h2d_per_run,
                a.d2h_per_run);
    EXPECT_EQ(a.arena, b.arena) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.param, b.param) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.opt_state, b.opt_state) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.kv_cache, b.kv_cache) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.grad_peak, b.grad_peak) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.activation_peak, b.activation_peak) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.h2d_per_run, b.h2d_per_run) << a.what << " plan " << i % 3;
    EXPECT_EQ(a.d2h_per_run, b.d2h_per_run) << a.what << " plan " << i % 3;
  }
}

TEST(CudaCapabilities, PlanningRefusesOpsWithoutAKernelNamingThem) {
  ModelBuilder b("losses");
  auto x = b.input("x", {DType::f32, {4, 5}});
  auto t = b.input("t", {DType::f32, {4, 5}});
  b.output(b.mse(b.relu(x), t, "the_loss"));
  auto g = b.build();
  ASSERT_OK(g);
  Runtime rt(std::make_unique<CapabilitiesOnly>());
  auto plan = rt.compile(*g);
  EXPECT_ERROR_CONTAINS(plan, "[mse] backend 'cuda' has no kernel");
  EXPECT_ERROR_CONTAINS(plan, "the_loss");
}

TEST(CudaDevice, ExplicitCudaFailsClearlyWithoutAGpuAndNeverFallsBack) {
  if (make_cuda_backend().is_ok()) GTEST_SKIP() << "a CUDA device is present";
  auto b = select_backend(DeviceKind::Cuda);
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("--device cuda"), std::string::npos) << b.status().message();
  auto rt = Runtime::create(DeviceKind::Cuda);
  EXPECT_FALSE(rt.is_ok());  // no runtime at all, so nothing can run on the CPU instead
}

TEST(CudaDevice, AutoPicksTheCpuWithoutAGpu) {
  if (make_cuda_backend().is_ok()) GTEST_SKIP() << "a CUDA device is present";
  auto g = model::build_tinylm_decode(model::TinyLMConfig{}, 1);
  ASSERT_OK(g);
  auto b = select_backend(DeviceKind::Auto, &*g);
  ASSERT_OK(b);
  EXPECT_EQ((*b)->name(), "cpu");
}

// ---- On a GPU ------------------------------------------------------------------------------

// The CUDA backend, or a skip when there is none.
#define REQUIRE_CUDA(var)                                                               \
  auto var##_result = make_cuda_backend();                                              \
  if (!var##_result.is_ok()) GTEST_SKIP() << "no CUDA device: " << var##_result.status().message(); \
  std::unique_ptr<Backend> var = std::move(var##_result).value()

struct OpCase {
  ir::Op op;
  std::vector<TensorType> inputs;
  ir::Attrs attrs;
  double tol;  // max |cuda - cpu| / (1 + |cpu|)
};

// Runs one node on a backend: inputs copied in, its workspace allocated, then every input copied
// back (state-updating nodes write some in place) followed by the output.
Result<std::vector<Tensor>> run_in_place(Backend& be, const ir::Node& node, const std::vector<Tensor>& in) {
  std::vector<std::shared_ptr<std::byte>> keep;
  std::vector<TensorRef> refs;
  ir::Graph g;  // the node's inputs as graph inputs, for the backend's workspace size
  for (const Tensor& t : in) {
    VOLTA_ASSIGN_OR_RETURN(auto mem, be.allocate(t.bytes()));
    VOLTA_RETURN_IF_ERROR(be.copy_in(mem.get(), t.raw(), t.bytes()));
    refs.push_back({mem.get(), t.type()});
    keep.push_back(std::move(mem));
    ir::Node leaf;
    leaf.id = static_cast<int32_t>(g.nodes.size());
    leaf.name = "in" + std::to_string(leaf.id);
    leaf.type = t.type();
    g.nodes.push_back(std::move(leaf));
  }
  ir::Node n = node;
  n.id = static_cast<int32_t>(g.nodes.size());
  n.inputs.clear();
  for (int32_t i = 0; i < n.id; ++i) n.inputs.push_back(i);
  g.nodes.push_back(n);
  const size_t ws_bytes = be.workspace_bytes(g, n);
  VOLTA_ASSIGN_OR_RETURN(auto ws, be.allocate(ws_bytes));
  VOLTA_ASSIGN_OR_RETURN(auto out_mem, be.allocate(n.type.bytes()));
  VOLTA_RETURN_IF_ERROR(be.execute(n, refs, TensorRef{out_mem.get(), n.type}, std::span<std::byte>(ws.get(), ws_bytes)));
  std::vector<Tensor> result;
  for (size_t i = 0; i <= in.size(); ++i) {
    const TensorType& type = i < in.size() ? in[i].type() : n.type;
    Tensor t = Tensor::zeros(type.dtype, type.shape);
    VOLTA_RETURN_IF_ERROR(be.copy_out(t.raw(), i < in.size() ? keep[i].get() : out_mem.get(), t.bytes()));
    result.push_back(std::move(t));
  }
  return result;
}

Result<Tensor> run_node(Backend& be, const ir::Node& node, const std::vector<Tensor>& in) {
  VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> all, run_in_place(be, node, in));
  return std::move(all.back());
}

Result<ir::Node> make_node(const OpCase& c) {
  ir::Node n;
  n.op = c.op;
  n.name = "case";
  n.attrs = c.attrs;
  VOLTA_ASSIGN_OR_RETURN(n.type, ir::infer_type(c.op, c.inputs, c.attrs));
  return n;
}

std::vector<Tensor> random_tensors(const OpCase& c, uint64_t seed, int64_t id_bound) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = Tensor::zeros(c.inputs[i].dtype, c.inputs[i].shape);
    if (t.dtype() == DType::f32) {
      fill_normal(t, seed, i, 0.0f, 2.0f);
      if (c.op == ir::Op::Log || c.op == ir::Op::Sqrt)  // keep the domain mostly valid
        for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = std::fabs(t.data<float>()[k]) + 0.1f;
    } else if (t.dtype() == DType::i32) {
      for (int64_t k = 0; k < t.numel(); ++k) t.data<int32_t>()[k] = static_cast<int32_t>((k * 7 + 3) % id_bound);
    } else {
      for (int64_t k = 0; k < t.numel(); ++k) t.data<int64_t>()[k] = (k * 7 + 3) % id_bound;
    }
    in.push_back(std::move(t));
  }
  return in;
}

// Compares element by element: same NaN and infinity positions, exact zeros stay exact, and
// the normalised error within `tol`. Returns the worst normalised error.
double compare(const Tensor& want, const Tensor& got, const std::string& what, double tol) {
  if (want.dtype() != DType::f32) {
    EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.bytes()), 0) << what;
    return 0;
  }
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double r = want.data<float>()[i], g = got.data<float>()[i];
    EXPECT_EQ(std::isnan(r), std::isnan(g)) << what << " element " << i << ": cpu " << r << " cuda " << g;
    if (std::isnan(r) || std::isnan(g)) continue;
    if (std::isinf(r) || std::isinf(g)) {
      EXPECT_EQ(r, g) << what << " element " << i;
      continue;
    }
    if (r == 0.0 && tol == 0.0) {  // exact ops keep exact zeros; the others are held to tol
      EXPECT_EQ(g, 0.0) << what << " element " << i;
    }
    worst = std::max(worst, std::fabs(g - r) / (1.0 + std::fabs(r)));
  }
  EXPECT_LE(worst, tol) << what;
  return worst;
}

std::vector<OpCase> parity_cases() {
  const auto f = [](Shape s) { return TensorType{DType::f32, std::move(s)}; };
  const auto i32 = [](Shape s) { return TensorType{DType::i32, std::move(s)}; };
  const auto i64 = [](Shape s) { return TensorType{DType::i64, std::move(s)}; };
  using A = ir::Attrs;
  return {
      {ir::Op::Matmul, {f({7, 13}), f({13, 5})}, {}, 1e-5},
      {ir::Op::Matmul, {f({130, 70}), f({70, 90})}, {}, 1e-5},  // several tiles and k slices
      {ir::Op::Matmul, {f({70, 130}), f({70, 90})}, A{{"transpose_a", int64_t{1}}}, 1e-5},
      {ir::Op::Matmul, {f({130, 70}), f({90, 70})}, A{{"transpose_b", int64_t{1}}}, 1e-5},
      {ir::Op::Matmul, {f({2, 3, 17, 33}), f({33, 9})}, {}, 1e-5},           // b broadcast
      {ir::Op::Matmul, {f({3, 1, 17, 33}), f({4, 9, 33})}, A{{"transpose_b", int64_t{1}}}, 1e-5},
      {ir::Op::Matmul, {f({4, 0}), f({0, 3})}, {}, 0.0},  // K = 0: zeros
      // The large 128x128 tile (enough tiles), ragged edges, each transpose, a k tail.
      {ir::Op::Matmul, {f({1500, 37}), f({37, 1333})}, {}, 1e-5},
      {ir::Op::Matmul, {f({37, 1500}), f({1333, 37})}, A{{"transpose_a", int64_t{1}}, {"transpose_b", int64_t{1}}}, 1e-5},
      {ir::Op::Matmul, {f({64, 200, 100}), f({64, 100, 130})}, {}, 1e-5},
      {ir::Op::Add, {f({3, 4, 5}), f({3, 4, 5})}, {}, 0.0},
      {ir::Op::Sub, {f({3, 4, 5}), f({4, 1})}, {}, 0.0},
      {ir::Op::Mul, {f({1, 4, 5}), f({3, 1, 5})}, {}, 0.0},
      {ir::Op::Div, {f({3, 4, 5}), f({})}, {}, 0.0},
      {ir::Op::Neg, {f({1000})}, {}, 0.0},
      {ir::Op::Exp, {f({1000})}, {}, 1e-6},
      {ir::Op::Log, {f({1000})}, {}, 1e-6},
      {ir::Op::Sqrt, {f({1000})}, {}, 1e-6},
      {ir::Op::Tanh, {f({1000})}, {}, 1e-6},
      {ir::Op::Relu, {f({1000})}, {}, 0.0},
      {ir::Op::Gelu, {f({1000})}, {}, 1e-6},
      {ir::Op::Gelu, {f({1000})}, A{{"approximate", std::string("tanh")}}, 1e-6},
      {ir::Op::Silu, {f({1000})}, {}, 1e-6},
      {ir::Op::Sigmoid, {f({1000})}, {}, 1e-6},
      // The rest of the Unary and Binary categories: the same kernel template over ir/scalar_math.h.
      {ir::Op::Erf, {f({1000})}, {}, 1e-6},
      {ir::Op::Abs, {f({1000})}, {}, 0.0},
      {ir::Op::Sign, {f({1000})}, {}, 0.0},
      {ir::Op::Pow, {f({3, 4, 5}), f({4, 1})}, {}, 1e-6},
      {ir::Op::Softmax, {f({7, 33})}, A{{"axis", int64_t{-1}}}, 1e-6},
      {ir::Op::Softmax, {f({7, 33})}, A{{"axis", int64_t{0}}}, 1e-6},
      {ir::Op::Softmax, {f({3, 700})}, {}, 1e-6},  // rows longer than a block
      {ir::Op::Softmax, {f({2, 40, 40})}, A{{"scale", 0.3}, {"causal_offset", int64_t{0}}}, 1e-6},
      {ir::Op::Softmax, {f({3, 17, 20})}, A{{"scale", 0.7}, {"causal_offset", int64_t{3}}}, 1e-6},
      {ir::Op::Softmax, {f({3, 17, 20})}, A{{"causal_offset", int64_t{-2}}}, 1e-6},  // fully masked rows: nan
      {ir::Op::LogSoftmax, {f({3, 4, 65})}, A{{"axis", int64_t{2}}}, 1e-6},
      {ir::Op::CausalMask, {f({2, 6, 9})}, A{{"offset", int64_t{1}}}, 0.0},
      {ir::Op::LayerNorm, {f({6, 128}), f({128}), f({128})}, {}, 1e-6},
      {ir::Op::LayerNorm, {f({2, 3, 300}), f({300})}, A{{"eps", 1e-3}}, 1e-6},
      {ir::Op::RmsNorm, {f({6, 128}), f({128})}, {}, 1e-6},
      {ir::Op::Embedding, {f({11, 16}), i32({2, 5})}, {}, 0.0},
      {ir::Op::Embedding, {f({11, 16}), i64({7})}, {}, 0.0},
      {ir::Op::Reshape, {f({2, 3, 4})}, A{{"shape", std::vector<int64_t>{6, 4}}}, 0.0},
      {ir::Op::Transpose, {f({2, 3, 4, 5})}, A{{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, 0.0},
      {ir::Op::Transpose, {i64({3, 4})}, A{{"perm", std::vector<int64_t>{1, 0}}}, 0.0},
      {ir::Op::Slice, {f({4, 10, 3})}, A{{"axis", int64_t{1}}, {"start", int64_t{2}}, {"end", int64_t{7}}}, 0.0},
      {ir::Op::Slice, {f({4, 10})}, A{{"axis", int64_t{-1}}, {"start", int64_t{-3}}, {"end", int64_t{10}}}, 0.0},
      {ir::Op::Concat, {f({2, 3, 4}), f({2, 1, 4}), f({2, 5, 4})}, A{{"axis", int64_t{1}}}, 0.0},
      {ir::Op::Concat, {f({2, 3}), f({4, 3})}, A{{"axis", int64_t{0}}}, 0.0},
      {ir::Op::Pad, {f({2, 3, 4})}, A{{"axis", int64_t{1}}, {"before", int64_t{2}}, {"after", int64_t{1}}}, 0.0},
      {ir::Op::Broadcast, {f({3, 1, 4})}, A{{"shape", std::vector<int64_t>{2, 3, 5, 4}}}, 0.0},
      // The CPU's fast reduce_sum accumulates in f32, the CUDA kernel in double.
      {ir::Op::ReduceSum, {f({6, 7, 33})}, A{{"axes", std::vector<int64_t>{0, 1}}, {"keepdims", int64_t{0}}}, 2e-6},
      {ir::Op::ReduceSum, {f({6, 7, 33})}, A{{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{1}}}, 2e-6},
      {ir::Op::ReduceMean, {f({5, 300})}, A{{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}}, 2e-6},
      {ir::Op::ReduceMax, {f({5, 4, 3})}, A{{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t{0}}}, 0.0},
      // backward ops: (x or y, dy) pairs. The CPU's fast gelu_grad and last-axis softmax_grad
      // compute in f32 (the CUDA kernels in double); softmax_grad's dot over random y and dy of
      // N(0, 2) entries cancels, hence its looser bound.
      {ir::Op::ReluGrad, {f({1000}), f({1000})}, {}, 0.0},
      {ir::Op::GeluGrad, {f({1000}), f({1000})}, {}, 5e-6},
      {ir::Op::GeluGrad, {f({1000}), f({1000})}, A{{"approximate", std::string("tanh")}}, 5e-6},
      {ir::Op::SoftmaxGrad, {f({7, 33}), f({7, 33})}, A{{"axis", int64_t{-1}}, {"scale", 0.5}}, 1e-4},
      {ir::Op::SoftmaxGrad, {f({3, 700}), f({3, 700})}, {}, 1e-4},
      {ir::Op::SoftmaxGrad, {f({4, 5, 6}), f({4, 5, 6})}, A{{"axis", int64_t{1}}}, 1e-6},
      {ir::Op::LayerNormGrad, {f({6, 128}), f({128}), f({6, 128})}, {}, 1e-6},
      {ir::Op::LayerNormGrad, {f({2, 3, 300}), f({300}), f({2, 3, 300})}, A{{"eps", 1e-3}}, 1e-6},
      {ir::Op::RmsNormGrad, {f({6, 128}), f({128}), f({6, 128})}, {}, 1e-6},
      {ir::Op::EmbeddingGrad, {i32({2, 50}), f({2, 50, 16})}, A{{"rows", int64_t{11}}}, 0.0},
      {ir::Op::EmbeddingGrad, {i64({600}), f({600, 300})}, A{{"rows", int64_t{9}}}, 0.0},  // tiles of ids, D > a block
      {ir::Op::CrossEntropy, {f({6, 65}), i32({6})}, {}, 1e-6},
      {ir::Op::CrossEntropy, {f({2, 300, 65}), i64({2, 300})}, A{{"ignore_index", int64_t{3}}}, 1e-6},
      {ir::Op::CrossEntropyGrad, {f({6, 65}), i32({6}), f({})}, {}, 1e-6},
      {ir::Op::CrossEntropyGrad, {f({2, 30, 700}), i64({2, 30}), f({})}, A{{"ignore_index", int64_t{3}}}, 1e-6},
  };
}

TEST(CudaParity, EveryKernelMatchesTheCpuBackendAndRepeatsBitwise) {
  REQUIRE_CUDA(gpu);
  auto cpu = make_cpu_backend();
  for (const OpCase& c : parity_cases()) {
    auto node = make_node(c);
    ASSERT_OK(node);
    const std::string what = std::string(ir::op_name(c.op)) + " " + shape_to_string(c.inputs[0].shape);
    int64_t id_bound = c.inputs[0].shape.empty() ? 1 : c.inputs[0].shape[0];  // embedding: the table's rows
    if (c.op == ir::Op::EmbeddingGrad) id_bound = std::get<int64_t>(c.attrs.items().at("rows"));
    if (c.op == ir::Op::CrossEntropy || c.op == ir::Op::CrossEntropyGrad) id_bound = c.inputs[0].shape.back();
    const std::vector<Tensor> in = random_tensors(c, 23, id_bound);
    auto want = run_node(*cpu, *node, in);
    auto got = run_node(*gpu, *node, in);
    auto again = run_node(*gpu, *node, in);
    ASSERT_TRUE(want.is_ok()) << what << ": " << want.status().message();
    ASSERT_TRUE(got.is_ok()) << what << ": " << got.status().message();
    ASSERT_TRUE(again.is_ok()) << what << ": " << again.status().message();
    const double err = compare(*want, *got, what, c.tol);
    const bool repeat = std::memcmp(got->raw(), again->raw(), got->bytes()) == 0;
    std::printf("parity %-18s %-16s max |cuda - cpu| / (1 + |cpu|) %.3g (bound %.0e), rerun %s\n", ir::op_name(c.op),
                shape_to_string(c.inputs[0].shape).c_str(), err, c.tol, repeat ? "bitwise" : "DIFFERS");
    EXPECT_TRUE(repeat) << what << ": two runs differ";
  }
}

TEST(CudaParity, NanAndInfinityBehaveAsOnTheCpu) {
  REQUIRE_CUDA(gpu);
  auto cpu = make_cpu_backend();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> special = {nan, inf, -inf, 0.0f, -0.0f, 1e30f, -1e30f, 88.0f, -104.0f, 1.0f};
  // For matmul no huge finite values: their products overflow f32 but not the double
  // accumulator some CPU kernels use, which would make overflow a precision question.
  const std::vector<float> special_mm = {nan, inf, -inf, 0.0f, -0.0f, 2.0f, -3.0f, 0.5f, 1.0f, -1.0f};
  for (ir::Op op : {ir::Op::Neg, ir::Op::Exp, ir::Op::Log, ir::Op::Sqrt, ir::Op::Tanh, ir::Op::Relu, ir::Op::Gelu,
                    ir::Op::Silu, ir::Op::Sigmoid, ir::Op::Erf, ir::Op::Abs, ir::Op::Sign, ir::Op::Softmax,
                    ir::Op::Add, ir::Op::Div, ir::Op::Pow, ir::Op::Matmul}) {
    const bool two = op == ir::Op::Add || op == ir::Op::Div || op == ir::Op::Pow || op == ir::Op::Matmul;
    const Shape shape = op == ir::Op::Matmul ? Shape{10, 10} : Shape{2, 10};
    OpCase c{op, {}, {}, 1e-6};
    for (int i = 0; i < (two ? 2 : 1); ++i) c.inputs.push_back({DType::f32, shape});
    auto node = make_node(c);
    ASSERT_OK(node);
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      Tensor t = Tensor::zeros(DType::f32, shape);
      const std::vector<float>& values = op == ir::Op::Matmul ? special_mm : special;
      for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = values[static_cast<size_t>(k + 3 * i) % values.size()];
      in.push_back(std::move(t));
    }
    auto want = run_node(*cpu, *node, in);
    auto got = run_node(*gpu, *node, in);
    ASSERT_OK(want);
    ASSERT_OK(got);
    compare(*want, *got, std::string(ir::op_name(op)) + " on nan/inf", 1e-6);
  }
}

TEST(CudaParity, EmbeddingIdOutOfRangeNamesTheNode) {
  REQUIRE_CUDA(gpu);
  OpCase c{ir::Op::Embedding, {{DType::f32, {5, 4}}, {DType::i32, {3}}}, {}, 0.0};
  auto node = make_node(c);
  ASSERT_OK(node);
  node->name = "tok_emb";
  std::vector<Tensor> in = random_tensors(c, 1, 5);
  in[1].data<int32_t>()[2] = 5;
  EXPECT_ERROR_CONTAINS(run_node(*gpu, *node, in), "id 5 at flat position 2 is outside [0, 5)");
  EXPECT_ERROR_CONTAINS(run_node(*gpu, *node, in), "tok_emb");
}

model::TinyLMConfig small_lm() { return {65, 32, 2, 4, 64, true}; }

Bindings lm_params(const model::TinyLMConfig& c) {
  auto g = model::build_tinylm_loss(c, 1, c.context);
  EXPECT_TRUE(g.is_ok());
  auto p = init_params(*g, 7);
  EXPECT_TRUE(p.is_ok());
  for (auto& [name, t] : *p)  // logits far from uniform, so greedy choices are not near ties
    if (t.shape().size() == 2)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= 25.0f;
  return *p;
}

TEST(CudaTinyLM, LogitsMatchTheCpuAndRepeatBitwise) {
  REQUIRE_CUDA(gpu);
  const model::TinyLMConfig c = small_lm();
  Bindings b = lm_params(c);
  auto g = model::build_tinylm_logits(c, 2, 20);
  ASSERT_OK(g);
  Tensor tokens = Tensor::zeros(DType::i32, {2, 20});
  for (int64_t i = 0; i < tokens.numel(); ++i) tokens.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 5) % c.vocab);
  b["tokens"] = tokens;
  Runtime cpu(make_cpu_backend());
  Runtime cuda(std::move(gpu));
  auto pc = cpu.compile(*g);
  auto pg = cuda.compile(*g, cuda_compile_options());
  ASSERT_OK(pc);
  ASSERT_OK(pg);
  auto want = cpu.run(**pc, b);
  auto got = cuda.run(**pg, b);
  auto again = cuda.run(**pg, b);
  ASSERT_OK(want);
  ASSERT_OK(got);
  ASSERT_OK(again);
  // Logits are O(10) with weights x25; f32 matmul chains of 64..256 terms.
  compare((*want)[0], (*got)[0], "tinylm logits", 1e-4);
  EXPECT_EQ(std::memcmp((*got)[0].raw(), (*again)[0].raw(), (*got)[0].bytes()), 0) << "two CUDA runs differ";
}

TEST(CudaTinyLM, GreedyTextIsIdenticalOnCpuAndCuda) {
  REQUIRE_CUDA(gpu);
  const model::TinyLMConfig c = small_lm();
  const Bindings params = lm_params(c);
  model::SampleOptions o;
  o.temperature = 0.0;
  o.tokens = 40;  // past the context of 32: the window slides
  Runtime cpu(make_cpu_backend());
  Runtime cuda(std::move(gpu));
  auto on_cpu = model::Generator::create(cpu, c, params);
  auto on_cuda = model::Generator::create(cuda, c, params);
  ASSERT_OK(on_cpu);
  ASSERT_OK(on_cuda);
  auto want = on_cpu->generate({1, 2, 3, 4}, o);
  auto got = on_cuda->generate({1, 2, 3, 4}, o);
  ASSERT_OK(want);
  ASSERT_OK(got);
  EXPECT_EQ(*want, *got);
  // The caches stay on the device: a decode step uploads its token ids and position only.
  o.tokens = 6;
  o.batch = 2;
  ASSERT_OK(on_cuda->generate({1, 2}, o));  // compiles the plans of batch 2
  const TransferStats before = cuda.transfers();
  ASSERT_OK(on_cuda->generate({1, 2}, o));
  EXPECT_EQ(cuda.transfers().h2d_bytes - before.h2d_bytes, 2u * 2 * 4 + 5 * (2 * 4 + 4));
  EXPECT_EQ(cuda.transfers().d2h_bytes - before.d2h_bytes, 6u * 2 * static_cast<size_t>(c.vocab) * 4);
}

// ---- Training on a GPU ----------------------------------------------------------------------

// Forward + backward of the TinyLM loss: the loss and every parameter gradient match the CPU,
// and two CUDA runs give the same bytes.
TEST(CudaTraining, TinyLMGradientsMatchTheCpuAndRepeatBitwise) {
  REQUIRE_CUDA(gpu);
  for (bool bias : {false, true}) {
    model::TinyLMConfig c = small_lm();
    c.bias = bias;
    auto g = model::build_tinylm_loss(c, 3, c.context);
    ASSERT_OK(g);
    auto gg = autograd::build_backward(*g);
    ASSERT_OK(gg);
    auto params = init_params(*g, 11);
    ASSERT_OK(params);
    Bindings b = *params;
    Tensor tokens = Tensor::zeros(DType::i32, {3, c.context}), targets = Tensor::zeros(DType::i32, {3, c.context});
    for (int64_t i = 0; i < tokens.numel(); ++i) {
      tokens.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 5) % c.vocab);
      targets.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 18) % c.vocab);
    }
    b["tokens"] = tokens;
    b["targets"] = targets;
    Runtime cpu(make_cpu_backend());
    auto pc = cpu.compile(gg->graph);
    ASSERT_OK(pc);
    auto want = cpu.run(**pc, b);
    ASSERT_OK(want);
    auto dev = make_cuda_backend();
    ASSERT_OK(dev);
    Runtime cuda(std::move(*dev));
    auto pg = cuda.compile(gg->graph, cuda_compile_options());
    ASSERT_OK(pg);
    auto got = cuda.run(**pg, b);
    auto again = cuda.run(**pg, b);
    ASSERT_OK(got);
    ASSERT_OK(again);
    const double dloss = std::fabs((*want)[0].data<float>()[0] - (*got)[0].data<float>()[0]);
    std::printf("parity training loss (bias %d): cpu %.7f cuda %.7f diff %.3g\n", bias, (*want)[0].data<float>()[0],
                (*got)[0].data<float>()[0], dloss);
    EXPECT_LT(dloss, 1e-5);
    double worst = 0;
    for (size_t i = 0; i < gg->params.size(); ++i) {
      const Tensor& w = (*want)[i + 1];
      const Tensor& h = (*got)[i + 1];
      double scale = 0, diff = 0;
      for (int64_t k = 0; k < w.numel(); ++k) {
        scale = std::max(scale, std::fabs(double(w.data<float>()[k])));
        diff = std::max(diff, std::fabs(double(w.data<float>()[k]) - h.data<float>()[k]));
      }
      worst = std::max(worst, diff / (scale + 1e-30));
      EXPECT_LE(diff, 1e-6 + 1e-4 * scale) << "grad of " << gg->params[i];
      EXPECT_EQ(std::memcmp(h.raw(), (*again)[i + 1].raw(), h.bytes()), 0) << "two CUDA runs differ: grad of " << gg->params[i];
    }
    std::printf("parity training grads (bias %d): %zu params, worst max|diff| / max|grad| %.3g\n", bias, gg->params.size(),
                worst);
  }
}

// One state-updating node run on the CPU and twice on the GPU, each run giving every input read
// back and then the output.
struct ThreeRuns {
  std::vector<Tensor> cpu, gpu, again;
};

Result<ThreeRuns> run_cpu_gpu_gpu(Backend& cpu, Backend& gpu, ir::Op op, const ir::Attrs& attrs, const std::vector<Tensor>& in) {
  std::vector<TensorType> types;
  for (const Tensor& t : in) types.push_back(t.type());
  VOLTA_ASSIGN_OR_RETURN(ir::Node node, make_node(OpCase{op, types, attrs, 0.0}));
  ThreeRuns r;
  VOLTA_ASSIGN_OR_RETURN(r.cpu, run_in_place(cpu, node, in));
  VOLTA_ASSIGN_OR_RETURN(r.gpu, run_in_place(gpu, node, in));
  VOLTA_ASSIGN_OR_RETURN(r.again, run_in_place(gpu, node, in));
  return r;
}

Tensor scalar_f64(double v) {
  Tensor t = Tensor::zeros(DType::f64, {});
  t.data<double>()[0] = v;
  return t;
}

TEST(CudaTraining, GradNormAndOptimizerUpdatesMatchTheCpu) {
  REQUIRE_CUDA(gpu);
  auto cpu = make_cpu_backend();
  // grad_norm over gradients past several chunks of the squares tree, with ragged ends.
  std::vector<Tensor> grads;
  for (int64_t n : {100003, 17, 16384}) {
    Tensor g = Tensor::zeros(DType::f32, {n});
    fill_normal(g, 5, static_cast<uint64_t>(n), 0.0f, 0.1f);
    grads.push_back(std::move(g));
  }
  auto norm = run_cpu_gpu_gpu(*cpu, *gpu, ir::Op::GradNorm, {}, grads);
  ASSERT_OK(norm);
  const double wn = norm->cpu.back().data<double>()[0], gn = norm->gpu.back().data<double>()[0];
  std::printf("parity grad_norm: cpu %.17g cuda %.17g\n", wn, gn);
  EXPECT_NEAR(gn, wn, 1e-6 * wn);  // the CPU's fast sum accumulates f32 lanes
  EXPECT_EQ(gn, norm->again.back().data<double>()[0]);

  const int64_t n = 100003;
  Tensor param = Tensor::zeros(DType::f32, {n});
  fill_normal(param, 5, 0, 0.0f, 1.0f);
  Tensor step = Tensor::zeros(DType::i64, {});
  step.data<int64_t>()[0] = 2;
  using A = ir::Attrs;
  const A base{{"beta1", 0.9}, {"beta2", 0.95}, {"eps", 1e-8}, {"momentum", 0.9}, {"weight_decay", 0.1}, {"clip", 0.5}};
  for (const char* kind : {"sgd", "adam", "adamw"}) {
    for (int slots : {0, 1, 2}) {
      if ((std::string(kind) == "sgd") == (slots == 2)) continue;  // sgd: 0 or 1 slot; adam(w): 2
      A attrs = base;
      attrs.set("kind", std::string(kind));
      std::vector<Tensor> in = {param, grads[0], scalar_f64(wn), scalar_f64(3e-3), step};
      for (int k = 0; k < slots; ++k) {
        Tensor t = Tensor::zeros(DType::f32, {n});
        fill_normal(t, 6, static_cast<uint64_t>(k), 0.0f, 0.01f);
        if (k == 1)
          for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = std::fabs(t.data<float>()[i]);  // v >= 0
        in.push_back(std::move(t));
      }
      auto r = run_cpu_gpu_gpu(*cpu, *gpu, ir::Op::OptimizerUpdate, attrs, in);
      ASSERT_OK(r);
      const std::string what = std::string("optimizer_update ") + kind + " slots " + std::to_string(slots);
      double worst = compare(r->cpu[0], r->gpu[0], what + " param", 1e-6);
      for (int k = 0; k < slots; ++k)
        worst = std::max(worst, compare(r->cpu[static_cast<size_t>(5 + k)], r->gpu[static_cast<size_t>(5 + k)], what + " state", 1e-6));
      const bool repeat = r->gpu[0].bitwise_equal(r->again[0]);
      std::printf("parity %-36s max |cuda - cpu| / (1 + |cpu|) %.3g (bound 1e-06), rerun %s\n", what.c_str(), worst,
                  repeat ? "bitwise" : "DIFFERS");
      EXPECT_TRUE(repeat) << what;
    }
  }
}

// The whole training step on the GPU: the loss curve and params follow the CPU's, two CUDA runs
// end in the same bytes, and per step only the batch and the learning rate go up and the loss,
// norm and step count come back.
TEST(CudaTraining, TheWholeStepMatchesTheCpuAndRepeatsBitwise) {
  REQUIRE_CUDA(gpu);
  const model::TinyLMConfig c = small_lm();
  auto g = model::build_tinylm_loss(c, 4, c.context);
  ASSERT_OK(g);
  train::TrainingOptions opts;
  opts.optimizer.kind = optim::Kind::AdamW;
  opts.optimizer.lr = 3e-3;
  opts.optimizer.weight_decay = 0.1;
  opts.optimizer.decay_matrices_only = true;
  opts.optimizer.clip_norm = 1.0;
  auto params = init_params(*g, 3);
  ASSERT_OK(params);
  Tensor tokens = Tensor::zeros(DType::i32, {4, c.context}), targets = Tensor::zeros(DType::i32, {4, c.context});
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    tokens.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 5) % c.vocab);
    targets.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 18) % c.vocab);
  }
  const Bindings batch{{"tokens", tokens}, {"targets", targets}};
  struct Run {
    std::vector<double> losses;
    train::TrainState end;
    TransferStats per_step;
  };
  auto run = [&](std::unique_ptr<Backend> be) -> Run {
    Runtime rt(std::move(be));
    auto tp = train::compile_training(rt, *g, opts);
    EXPECT_TRUE(tp.is_ok()) << tp.status().message();
    auto init = train::init_state(*tp, *params, 0);
    auto session = train::TrainSession::start(rt, *tp, *init);
    EXPECT_TRUE(session.is_ok()) << session.status().message();
    Run r;
    TransferStats before;
    for (int s = 0; s < 8; ++s) {
      if (s == 7) before = rt.transfers();
      auto st = session->step(batch);
      EXPECT_TRUE(st.is_ok()) << st.status().message();
      r.losses.push_back(st->loss);
    }
    r.per_step.h2d_bytes = rt.transfers().h2d_bytes - before.h2d_bytes;
    r.per_step.d2h_bytes = rt.transfers().d2h_bytes - before.d2h_bytes;
    r.per_step.param_uploads = rt.transfers().param_uploads - before.param_uploads;
    r.end = *session->snapshot();
    return r;
  };
  const Run want = run(make_cpu_backend());
  const Run got = run(std::move(gpu));
  auto gpu2 = make_cuda_backend();
  ASSERT_OK(gpu2);
  const Run again = run(std::move(*gpu2));
  double worst_loss = 0;
  for (size_t s = 0; s < want.losses.size(); ++s) worst_loss = std::max(worst_loss, std::fabs(want.losses[s] - got.losses[s]));
  std::printf("parity training step x8 (adamw, clip 1): loss %.6f -> %.6f on the cpu, max |loss diff| %.3g\n", want.losses.front(),
              want.losses.back(), worst_loss);
  EXPECT_LT(worst_loss, 1e-5);
  // Adam divides by sqrt(v): where v is tiny, rounding differences in a gradient move the param
  // by up to ~lr per step (measured on an H100: 1.6e-5 after 8 steps at lr 3e-3).
  double worst = 0;
  for (const auto& [name, t] : want.end.params) worst = std::max(worst, compare(t, got.end.params.at(name), "param " + name, 1e-4));
  std::printf("parity training step x8: params max |cuda - cpu| / (1 + |cpu|) %.3g; two CUDA runs %s\n", worst,
              got.end.bitwise_equal(again.end) ? "bitwise identical" : "DIFFER");
  EXPECT_TRUE(got.end.bitwise_equal(again.end));
  EXPECT_EQ(got.losses, again.losses);
  // Per step: tokens + targets + the f64 learning rate up; loss (f32) + norm (f64) + step (i64) down.
  EXPECT_EQ(got.per_step.h2d_bytes, tokens.bytes() + targets.bytes() + 8);
  EXPECT_EQ(got.per_step.d2h_bytes, 4u + 8u + 8u);
  EXPECT_EQ(got.per_step.param_uploads, 0);
}

}  // namespace
}  // namespace volta
