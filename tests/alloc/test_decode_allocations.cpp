// A decode step allocates nothing: the generator makes its step's inputs, outputs and sampling
// scratch once per generation, the runtime writes outputs in place and the kernels keep their
// scratch. This executable replaces the global operator new with one that counts, so it lives
// apart from volta_tests; generating 2N tokens must allocate exactly as often as N tokens.
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "backends/cpu/parallel.h"
#include "model/generate.h"
#include "volta/runtime.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

#ifndef VOLTA_SANITIZE_BUILD  // the sanitizers bring their own allocator
void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  const auto al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (std::max<std::size_t>(n, 1) + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

namespace volta {
namespace {

// Allocations made by one generate() call of `tokens` tokens.
int64_t allocations(model::Generator& gen, model::SampleOptions o, int64_t tokens) {
  o.tokens = tokens;
  g_allocations = 0;
  g_counting = true;
  auto out = gen.generate({1}, o);
  g_counting = false;
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  return g_allocations.load();
}

struct Case {
  model::Arch arch;
  DType weights;
  int64_t batch;
  int threads;
  double temperature;
};

TEST(DecodeAllocations, ADecodeStepAllocatesNothing) {
#ifdef VOLTA_SANITIZE_BUILD
  GTEST_SKIP() << "allocations are counted in the builds without sanitizers";
#endif
  for (const Case& k : {Case{model::Arch::Gpt, DType::f32, 1, 1, 0.0}, Case{model::Arch::Gpt, DType::bf16, 1, 2, 0.8},
                        Case{model::Arch::Gpt, DType::f16, 8, 2, 0.0}, Case{model::Arch::Gpt, DType::f32, 12, 1, 0.8},
                        Case{model::Arch::Llama, DType::bf16, 1, 1, 0.8}, Case{model::Arch::Llama, DType::f32, 8, 2, 0.0}}) {
    SCOPED_TRACE(std::string(k.arch == model::Arch::Llama ? "llama" : "gpt") + " " + dtype_name(k.weights) + " batch " +
                 std::to_string(k.batch) + ", " + std::to_string(k.threads) + " threads, temperature " +
                 std::to_string(k.temperature));
    cpu::set_num_threads(k.threads);
    model::TinyLMConfig c{65, 64, 2, 4, 128, false};  // shakespeare-char's widths, two layers
    if (k.arch == model::Arch::Llama) {
      c.arch = model::Arch::Llama;
      model::llama_defaults(c);
    }
    auto loss = model::build_tinylm_loss(c, 1, c.context);
    ASSERT_TRUE(loss.is_ok()) << loss.status().message();
    auto params = init_params(*loss, 7);
    ASSERT_TRUE(params.is_ok()) << params.status().message();
    auto rt = Runtime::create(DeviceKind::Cpu);
    ASSERT_TRUE(rt.is_ok()) << rt.status().message();
    auto gen = model::Generator::create(*rt, c, *params, k.weights);
    ASSERT_TRUE(gen.is_ok()) << gen.status().message();
    model::SampleOptions o;
    o.batch = k.batch, o.temperature = k.temperature, o.seed = 3;
    allocations(*gen, o, 40);  // compiles the plans, grows every scratch buffer
    // Both within the context (64 positions from a 1-token prompt), so the window never restarts.
    const int64_t few = allocations(*gen, o, 20), many = allocations(*gen, o, 60);
    EXPECT_EQ(many, few) << "40 more decode steps made " << many - few << " more allocations";
  }
  cpu::set_num_threads(0);
}

}  // namespace
}  // namespace volta
