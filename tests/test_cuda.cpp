// The CUDA backend. Host-side tests run everywhere: the capability list against TinyLM's graphs,
// planning refusals and the planned memory, and the "no GPU" path (the memory pool's are in
// test_cuda_pool.cpp). The device tests (TinyLM logits, greedy text, training gradients and
// steps against the CPU, run-to-run bits, replayed CUDA graphs) skip with "no CUDA device" when
// make_cuda_backend() fails. Per-op parity with the reference kernels is the op-test harness's
// (tests/ops/, volta_op_tests -b cuda).
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cuda/capabilities.h"
#include "model/generate.h"
#include "model/tinylm.h"
#include "ops/node_runner.h"
#include "test_util.h"
#include "volta/autograd.h"
#include "volta/optim.h"
#include "volta/train.h"
#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta {
namespace {

// ---- Capabilities and planning without a GPU --------------------------------------------

std::vector<ir::Op> missing_ops(const ir::Graph& g, const Capabilities& caps) {
  std::vector<ir::Op> missing;
  for (const ir::Node& n : g.nodes)
    if (!ir::is_leaf(n.op) && !caps.supports(n.op)) missing.push_back(n.op);
  return missing;
}

// The pipeline of CUDA plans, as Runtime::compile derives it: the default one without the fusions
// (fuse_matmul_epilogue, fuse_elementwise) whose ops or variants the CUDA backend has no kernel
// for (see docs/cuda.md).
CompileOptions cuda_compile_options() {
  CompileOptions o;
  const Capabilities caps = cuda::capabilities();
  o.pipeline = passes::without_unsupported(o.pipeline, [&caps](ir::Op op) { return caps.supports(op); },
                                           [&caps](const std::string& f) { return caps.has(f); });
  return o;
}

// Both variants of TinyLM: gpt (shakespeare-char) and llama (grouped queries, rope, SwiGLU).
std::vector<model::TinyLMConfig> both_variants() {
  model::TinyLMConfig llama;
  llama.arch = model::Arch::Llama;
  model::llama_defaults(llama);
  return {model::TinyLMConfig{}, llama};
}

TEST(CudaCapabilities, CoverTinyLMPrefillAndDecode) {
  const Capabilities caps = cuda::capabilities();
  EXPECT_EQ(cuda::kernel_info(ir::Node{}).level, Determinism::Strict);
  for (const model::TinyLMConfig& c : both_variants()) {
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
  }
  EXPECT_FALSE(caps.supports(ir::Op::Conv2d));
  EXPECT_FALSE(caps.supports(ir::Op::Mse));
}

// Forward + backward of the TinyLM loss, gpt with and without biases and llama, short and long
// enough for the fused attention, as the CUDA pipeline rewrites it: every op has a kernel.
TEST(CudaCapabilities, CoverTinyLMTraining) {
  const Capabilities caps = cuda::capabilities();
  std::vector<model::TinyLMConfig> configs = both_variants();
  configs.push_back(configs[0]);
  configs.back().bias = true;
  for (const model::TinyLMConfig& c0 : configs) {
    for (int64_t T : {int64_t{16}, int64_t{128}}) {
      model::TinyLMConfig c = c0;
      c.context = T;
      const bool bias = c.bias;
      auto g = model::build_tinylm_loss(c, 2, T);
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
  KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n, Determinism level) const override {
    return cuda::kernel_info(g, n, level);
  }
  Status check_node(const ir::Graph& g, const ir::Node& n) const override { return cuda::check_node(g, n); }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) const override { return cuda::workspace_bytes(g, n); }
  Status execute(const ir::Node&, std::span<const TensorRef>, const TensorRef&, std::span<std::byte>, const KernelInfo&) override {
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
    // The head split and merge fold into the attention nodes (packed_heads): no transpose,
    // slice or concat copies the heads around.
    int64_t packed = 0, copies = 0;
    for (const ir::Node& n : tp->step->graph.nodes) {
      packed += (n.op == ir::Op::Attention || n.op == ir::Op::AttentionGrad) && n.attrs.has("packed_heads");
      copies += n.op == ir::Op::Transpose || n.op == ir::Op::Slice || n.op == ir::Op::Concat;
    }
    EXPECT_EQ(packed, 2 * c.model.layers) << c.name;
    EXPECT_EQ(copies, 0) << c.name;
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
      {"shakespeare-char", 27763968, 3216384, 6432832, 0, 3216384, 27165184, 6208, 20},
      {"shakespeare-char", 4608, 3216384, 0, 262144, 0, 4608, 128, 260},
      {"shakespeare-char", 147456, 3216384, 0, 8388608, 0, 147456, 192, 8320},
      {"gpu-gpt", 2548929088, 42980352, 85960768, 0, 42980352, 2541848064, 131136, 20},
      {"gpu-gpt", 13824, 42980352, 0, 4718592, 0, 13824, 128, 260},
      {"gpu-gpt", 442368, 42980352, 0, 150994944, 0, 442368, 192, 8320},
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

// Forms of supported ops the kernels do not take are refused when planning, naming the node:
// integer arithmetic, an attention's additive mask, zero_nan_probs, stored probabilities, a key
// cache stored transposed.
TEST(CudaCapabilities, PlanningRefusesFormsWithoutAKernelNamingTheNode) {
  Runtime rt(std::make_unique<CapabilitiesOnly>());
  {
    ModelBuilder b("ints");
    auto x = b.input("x", {DType::i32, {4, 5}});
    b.output(b.add(x, x, "int_sum"));
    auto g = b.build();
    ASSERT_OK(g);
    auto plan = rt.compile(*g);
    EXPECT_ERROR_CONTAINS(plan, "[add] backend 'cuda' computes f32 only");
    EXPECT_ERROR_CONTAINS(plan, "int_sum");
  }
  auto attention = [&](std::vector<TensorType> types, ir::Attrs attrs, const std::string& want) {
    ModelBuilder b("attention");
    std::vector<Value> in;
    for (size_t i = 0; i < types.size(); ++i) in.push_back(b.input("x" + std::to_string(i), types[i]));
    b.output(b.op(ir::Op::Attention, in, attrs, "the_attention"));
    auto g = b.build();
    ASSERT_OK(g);
    auto plan = rt.compile(*g);
    EXPECT_ERROR_CONTAINS(plan, want);
    EXPECT_ERROR_CONTAINS(plan, "the_attention");
  };
  const TensorType qkv{DType::f32, {2, 3, 8, 16}};
  attention({qkv, qkv, qkv, TensorType{DType::f32, {8, 8}}}, {}, "an additive mask input");
  ir::Attrs zero_nan;
  zero_nan.set("zero_nan_probs", int64_t{1});
  attention({qkv, qkv, qkv}, zero_nan, "zero_nan_probs");
  ir::Attrs store;
  store.set("store_probs", int64_t{1});
  attention({qkv, qkv, qkv}, store, "store_probs");
  {  // attention_grad reading stored probabilities
    ModelBuilder b("grad");
    auto q = b.input("q", qkv);
    auto p = b.input("p", TensorType{DType::f32, {2, 3, 8, 8}});
    b.output(b.op(ir::Op::AttentionGrad, {q, q, q, q, p}, {}, "the_grad"));
    auto g = b.build();
    ASSERT_OK(g);
    auto plan = rt.compile(*g);
    EXPECT_ERROR_CONTAINS(plan, "stored probabilities");
    EXPECT_ERROR_CONTAINS(plan, "the_grad");
  }
  ir::Attrs columns;  // a key cache stored transposed, read so
  columns.set("keys_transposed", int64_t{1});
  columns.set("causal_offset", int64_t{0});
  attention({TensorType{DType::f32, {2, 3, 1, 16}}, TensorType{DType::f32, {2, 3, 16, 8}}, TensorType{DType::f32, {2, 3, 8, 16}},
             TensorType{DType::i32, {1}}},
            columns, "keys_transposed");
  {  // and written so
    ModelBuilder b("write");
    auto rows = b.input("rows", TensorType{DType::f32, {2, 1, 16}});
    auto at = b.input("at", TensorType{DType::i32, {1}});
    b.output(b.op(ir::Op::CacheWrite, {b.param("cache", {DType::f32, {2, 16, 8}}, ParamInit::zeros()), rows, at},
                  {{"transposed", int64_t{1}}}, "the_write"));
    auto g = b.build();
    ASSERT_OK(g);
    auto plan = rt.compile(*g);
    EXPECT_ERROR_CONTAINS(plan, "a transposed cache");
    EXPECT_ERROR_CONTAINS(plan, "the_write");
  }
  // The plain and packed_heads forms plan (as far as this device-less backend goes: it fails
  // allocating).
  ir::Attrs packed;
  packed.set("packed_heads", int64_t{2});
  packed.set("causal_offset", int64_t{0});
  for (const auto& [type, attrs] : {std::pair{qkv, ir::Attrs{}}, std::pair{TensorType{DType::f32, {2, 8, 48}}, packed}}) {
    ModelBuilder b("plans");
    auto q = b.input("q", type);
    b.output(b.op(ir::Op::Attention, {q, q, q}, attrs, "plans"));
    auto g = b.build();
    ASSERT_OK(g);
    auto plan = rt.compile(*g);
    if (!plan.is_ok()) {
      EXPECT_EQ(plan.status().message().find("backend 'cuda'"), std::string::npos) << plan.status().message();
    }
  }
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

// Parity of every op with the reference kernels, nan/inf and repeat bits: the op-test harness
// (tests/ops/, `volta_op_tests -b cuda`), which scripts/gpu_check.sh runs.
TEST(CudaParity, EmbeddingIdOutOfRangeNamesTheNode) {
  REQUIRE_CUDA(gpu);
  auto node = test::make_node(ir::Op::Embedding, {{DType::f32, {5, 4}}, {DType::i32, {3}}}, {}, "tok_emb");
  ASSERT_OK(node);
  std::vector<Tensor> in = {Tensor::zeros(DType::f32, {5, 4}), Tensor::from_i32({3}, {0, 4, 5})};
  EXPECT_ERROR_CONTAINS(test::run_node(*gpu, *node, in), "id 5 at flat position 2 is outside [0, 5)");
  EXPECT_ERROR_CONTAINS(test::run_node(*gpu, *node, in), "tok_emb");
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
  EXPECT_GT(cuda.replays(), 0) << "decode steps replay their recorded CUDA graph";
}

// ---- Training on a GPU ----------------------------------------------------------------------

// Forward + backward of the TinyLM loss on the CPU and twice on the GPU: the loss and every
// parameter gradient match the CPU's, and the two CUDA runs give the same bytes. Returns whether
// the CUDA plan fused the attention's backward (attention_grad).
bool expect_gradient_parity(const model::TinyLMConfig& c, int64_t batch, const std::string& what) {
  auto g = model::build_tinylm_loss(c, batch, c.context);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return false;
  auto gg = autograd::build_backward(*g);
  EXPECT_TRUE(gg.is_ok()) << gg.status().message();
  auto params = init_params(*g, 11);
  EXPECT_TRUE(params.is_ok());
  if (!gg.is_ok() || !params.is_ok()) return false;
  Bindings b = *params;
  Tensor tokens = Tensor::zeros(DType::i32, {batch, c.context}), targets = Tensor::zeros(DType::i32, {batch, c.context});
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    tokens.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 5) % c.vocab);
    targets.data<int32_t>()[i] = static_cast<int32_t>((i * 13 + 18) % c.vocab);
  }
  b["tokens"] = tokens;
  b["targets"] = targets;
  Runtime cpu(make_cpu_backend());
  auto pc = cpu.compile(gg->graph);
  EXPECT_TRUE(pc.is_ok());
  if (!pc.is_ok()) return false;
  auto want = cpu.run(**pc, b);
  EXPECT_TRUE(want.is_ok()) << want.status().message();
  auto dev = make_cuda_backend();
  EXPECT_TRUE(dev.is_ok());
  if (!dev.is_ok()) return false;
  Runtime cuda(std::move(*dev));
  auto pg = cuda.compile(gg->graph, cuda_compile_options());
  EXPECT_TRUE(pg.is_ok()) << pg.status().message();
  if (!pg.is_ok()) return false;
  auto got = cuda.run(**pg, b);
  auto again = cuda.run(**pg, b);
  EXPECT_TRUE(got.is_ok()) << got.status().message();
  EXPECT_TRUE(again.is_ok());
  if (!want.is_ok() || !got.is_ok() || !again.is_ok()) return false;
  const double dloss = std::fabs((*want)[0].data<float>()[0] - (*got)[0].data<float>()[0]);
  std::printf("parity training loss (%s): cpu %.7f cuda %.7f diff %.3g\n", what.c_str(), (*want)[0].data<float>()[0],
              (*got)[0].data<float>()[0], dloss);
  EXPECT_LT(dloss, 1e-5) << what;
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
    EXPECT_LE(diff, 1e-6 + 1e-4 * scale) << what << ": grad of " << gg->params[i];
    EXPECT_EQ(std::memcmp(h.raw(), (*again)[i + 1].raw(), h.bytes()), 0) << what << ": two CUDA runs differ: grad of " << gg->params[i];
  }
  std::printf("parity training grads (%s): %zu params, worst max|diff| / max|grad| %.3g\n", what.c_str(), gg->params.size(),
              worst);
  bool fused = false;
  for (const ir::Node& n : (*pg)->graph.nodes) fused = fused || n.op == ir::Op::AttentionGrad;
  return fused;
}

TEST(CudaTraining, TinyLMGradientsMatchTheCpuAndRepeatBitwise) {
  REQUIRE_CUDA(gpu);
  for (bool bias : {false, true}) {
    model::TinyLMConfig c = small_lm();
    c.bias = bias;
    expect_gradient_parity(c, 3, bias ? "bias 1" : "bias 0");
  }
}

// At 128 keys and more the training graph's attention is fused (attention, attention_grad): the
// CUDA kernels' gradients match the CPU's unfused ones, for the gpt and the llama variant
// (grouped queries).
TEST(CudaTraining, FusedAttentionGradientsMatchTheCpuAndRepeatBitwise) {
  REQUIRE_CUDA(gpu);
  for (model::Arch arch : {model::Arch::Gpt, model::Arch::Llama}) {
    model::TinyLMConfig c = small_lm();
    c.context = 130;  // ragged against the kernels' blocks of 16 and tiles of 32 rows
    c.arch = arch;
    c.bias = arch == model::Arch::Gpt;  // llama has no biases
    if (arch == model::Arch::Llama) model::llama_defaults(c);
    EXPECT_TRUE(expect_gradient_parity(c, 2, std::string(model::arch_name(arch)) + ", 130 keys"))
        << "the CUDA plan did not fuse the attention's backward";
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
    int64_t replays = 0;
  };
  auto run = [&](std::unique_ptr<Backend> be, bool replay) -> Run {
    Runtime rt(std::move(be));
    rt.set_replay(replay);
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
    r.replays = rt.replays();
    return r;
  };
  const Run want = run(make_cpu_backend(), true);
  const Run got = run(std::move(gpu), true);
  auto gpu2 = make_cuda_backend();
  ASSERT_OK(gpu2);
  const Run again = run(std::move(*gpu2), false);  // node by node: a replayed CUDA graph has the same bits
  EXPECT_EQ(got.replays, 7) << "steps 2..8 replay the step's recorded CUDA graph";
  EXPECT_EQ(again.replays, 0);
  double worst_loss = 0;
  for (size_t s = 0; s < want.losses.size(); ++s) worst_loss = std::max(worst_loss, std::fabs(want.losses[s] - got.losses[s]));
  std::printf("parity training step x8 (adamw, clip 1): loss %.6f -> %.6f on the cpu, max |loss diff| %.3g\n", want.losses.front(),
              want.losses.back(), worst_loss);
  EXPECT_LT(worst_loss, 1e-5);
  // Adam divides by sqrt(v): where v is tiny, rounding differences in a gradient move the param
  // by up to ~lr per step (measured on an H100: 1.6e-5 after 8 steps at lr 3e-3).
  double worst = 0;
  for (const auto& [name, t] : want.end.params) worst = std::max(worst, compare(t, got.end.params.at(name), "param " + name, 1e-4));
  std::printf("parity training step x8: params max |cuda - cpu| / (1 + |cpu|) %.3g; CUDA graph replays and node by node %s\n",
              worst, got.end.bitwise_equal(again.end) ? "bitwise identical" : "DIFFER");
  EXPECT_TRUE(got.end.bitwise_equal(again.end));
  EXPECT_EQ(got.losses, again.losses);
  // Per step: tokens + targets + the f64 learning rate up; loss (f32) + norm (f64) + step (i64) down.
  EXPECT_EQ(got.per_step.h2d_bytes, tokens.bytes() + targets.bytes() + 8);
  EXPECT_EQ(got.per_step.d2h_bytes, 4u + 8u + 8u);
  EXPECT_EQ(got.per_step.param_uploads, 0);
}

}  // namespace
}  // namespace volta
