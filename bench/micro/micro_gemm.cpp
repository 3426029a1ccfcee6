// Microbenchmarks of the CPU GEMM (Google Benchmark). Not a test: `volta bench matmul` and
// bench/compare.sh give the numbers quoted against the peers; these isolate one kernel path at a
// time while it is being changed.
//
//   build/release/bench/volta_micro --benchmark_filter=Decode
#include <benchmark/benchmark.h>

#include <array>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "ir/packed_weight.h"
#include "volta/op_attrs.h"
#include "volta/rng.h"
#include "volta/tensor.h"

namespace {

using volta::cpu::MatView;

std::vector<float> seeded(int64_t n, uint64_t seed) {
  volta::Tensor t = volta::Tensor::zeros(volta::DType::f32, {n});
  volta::fill_normal(t, seed, 1, 0.0f, 1.0f);
  return {t.data<float>(), t.data<float>() + n};
}

void set_threads(const benchmark::State& state, int arg) {
  volta::cpu::set_num_threads(static_cast<int>(state.range(arg)));
}

// C[M, N] = A[M, K] @ B[K, N], B row-major, operands hot in cache; A row-major, or stored [K, M]
// (`transposed_a`: the weight gradients of training, x^T @ dy).
void time_gemm(benchmark::State& state, bool transposed_a) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  set_threads(state, 3);
  const std::vector<float> a = seeded(M * K, 1), b = seeded(K * N, 2);
  std::vector<float> c(static_cast<size_t>(M * N));
  const auto isa = volta::cpu::matmul_best_isa();
  const auto bl = volta::cpu::matmul_blocking_for(isa, M, N, K);
  const MatView av = transposed_a ? MatView{a.data(), 1, M} : MatView{a.data(), K, 1};
  for (auto _ : state) {
    volta::cpu::gemm(isa, bl, av, {b.data(), N, 1}, c.data(), N, M, N, K);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(M * N * K),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
void BM_Gemm(benchmark::State& state) { time_gemm(state, false); }
void BM_GemmTransposedA(benchmark::State& state) { time_gemm(state, true); }

// The weight gradient as a training step meets it: A stored [K, M] and B, each iteration on the
// next of 16 copies (more than L2 holds), so the operands come from L3 as they do after the
// forward pass has moved on. `split_k`: through the run-to-run kernel, one slice of K per thread.
void time_weight_grad(benchmark::State& state, bool split_k) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  set_threads(state, 3);
  constexpr int kCopies = 16;
  std::vector<std::vector<float>> a, b;
  for (int i = 0; i < kCopies; ++i) a.push_back(seeded(M * K, 1 + i)), b.push_back(seeded(K * N, 100 + i));
  std::vector<float> c(static_cast<size_t>(M * N));
  const auto isa = volta::cpu::matmul_best_isa();
  const auto bl = volta::cpu::matmul_blocking_for(isa, M, N, K);
  int i = 0;
  for (auto _ : state) {
    if (split_k) volta::cpu::gemm_split_k(isa, a[i].data(), b[i].data(), c.data(), M, N, K, volta::cpu::num_threads());
    else volta::cpu::gemm(isa, bl, {a[i].data(), 1, M}, {b[i].data(), N, 1}, c.data(), N, M, N, K);
    benchmark::DoNotOptimize(c.data());
    i = (i + 1) % kCopies;
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(M * N * K),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
void BM_GemmTransposedACold(benchmark::State& state) { time_weight_grad(state, false); }
void BM_SplitKCold(benchmark::State& state) { time_weight_grad(state, true); }

// The forward and d-input products as a training step meets them: A [M, K] row-major, B
// [K, N] row-major or stored [N, K] (`bt`: dx = dy @ W^T), C, each iteration on the next of 16
// copies of all three (more than L2 holds), so operands come from L3 and C's lines are not cached.
void BM_GemmCold(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool bt = state.range(3) != 0;
  set_threads(state, 4);
  constexpr int kCopies = 16;
  std::vector<std::vector<float>> a, b, c;
  for (int i = 0; i < kCopies; ++i)
    a.push_back(seeded(M * K, 1 + i)), b.push_back(seeded(K * N, 100 + i)), c.emplace_back(static_cast<size_t>(M * N));
  const auto isa = volta::cpu::matmul_best_isa();
  const auto bl = volta::cpu::matmul_blocking_for(isa, M, N, K);
  int i = 0;
  for (auto _ : state) {
    const MatView bv = bt ? MatView{b[i].data(), 1, K} : MatView{b[i].data(), N, 1};
    volta::cpu::gemm(isa, bl, {a[i].data(), K, 1}, bv, c[i].data(), N, M, N, K);
    benchmark::DoNotOptimize(c[i].data());
    i = (i + 1) % kCopies;
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(M * N * K),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_GemmCold)
    ->ArgNames({"m", "n", "k", "bt", "threads"})
    ->ArgsProduct({{768}, {384, 512}, {128}, {0}, {1, 2}})
    ->ArgsProduct({{768}, {128}, {128, 384, 512}, {0, 1}, {1, 2}})
    ->Unit(benchmark::kMicrosecond);

// Packing a row-major A [M, K] into the tile's row panels (a transpose per panel), as the
// forward products pack a layer's input: hot (cold = 0) or each iteration on the next of 16 copies.
void BM_PackA(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1);
  const int copies = state.range(2) != 0 ? 16 : 1;
  std::vector<std::vector<float>> a;
  for (int i = 0; i < copies; ++i) a.push_back(seeded(M * K, 1 + i));
  const auto isa = volta::cpu::matmul_best_isa();
  const int64_t mr = volta::cpu::matmul_tile(isa).rows;
  std::vector<float> dst(static_cast<size_t>((M + mr) * K));
  int i = 0;
  for (auto _ : state) {
    volta::cpu::pack_a(isa, {a[i].data(), K, 1}, M, K, mr, dst.data());
    benchmark::DoNotOptimize(dst.data());
    i = (i + 1) % copies;
  }
  state.SetBytesProcessed(state.iterations() * M * K * 4);
}
BENCHMARK(BM_PackA)->ArgNames({"m", "k", "cold"})->ArgsProduct({{768}, {128, 512}, {0, 1}})->Unit(benchmark::kMicrosecond);

// Packing a transposed A (stored [K, M], as a weight gradient reads an activation) into the
// tile's row panels, each iteration on the next of 16 copies (from L3, as in a training step).
void BM_PackATransposed(benchmark::State& state) {
  const int64_t M = state.range(0), K = state.range(1);
  constexpr int kCopies = 16;
  std::vector<std::vector<float>> a;
  for (int i = 0; i < kCopies; ++i) a.push_back(seeded(M * K, 1 + i));
  const auto isa = volta::cpu::matmul_best_isa();
  const int64_t mr = volta::cpu::matmul_tile(isa).rows;
  std::vector<float> dst(static_cast<size_t>((M + mr) * K));
  int i = 0;
  for (auto _ : state) {
    volta::cpu::pack_a_transposed(a[i].data(), M, M, K, K, mr, dst.data());
    benchmark::DoNotOptimize(dst.data());
    i = (i + 1) % kCopies;
  }
  state.SetBytesProcessed(state.iterations() * M * K * 4);
}
BENCHMARK(BM_PackATransposed)->ArgNames({"m", "k"})->Args({128, 768})->Args({512, 768})->Unit(benchmark::kMicrosecond);

// TinyLM's weight-gradient shapes (K = batch 12 x context 64) at 1 and 2 threads.
void weight_grad_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "n", "k", "threads"});
  for (const int64_t threads : {1, 2})
    for (const auto& s : {std::array<int64_t, 2>{128, 384}, {128, 128}, {128, 512}, {512, 128}, {128, 65}})
      b->Args({s[0], s[1], 768, threads});
  // Smaller and larger products at 2 threads: where splitting starts and stops paying.
  for (const auto& s : {std::array<int64_t, 3>{32, 96, 256}, {64, 192, 256}, {64, 64, 512}, {128, 384, 256},
                        {384, 384, 512}, {384, 1152, 4096}})
    b->Args({s[0], s[1], s[2], 2});
}
BENCHMARK(BM_GemmTransposedACold)->Apply(weight_grad_shapes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SplitKCold)->Apply(weight_grad_shapes)->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_Gemm)
    ->ArgNames({"m", "n", "k", "threads"})
    ->Args({64, 64, 64, 1})
    ->Args({512, 512, 512, 1})
    ->Args({2048, 2048, 2048, 1})
    ->Args({768, 384, 128, 1})
    ->Args({768, 65, 128, 1})
    ->Args({16384, 1152, 384, 1})
    ->Args({16384, 384, 1536, 1})
    ->Args({1, 65, 128, 1})
    ->Args({512, 512, 512, 2})
    ->Args({2048, 2048, 2048, 2})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_GemmTransposedA)
    ->ArgNames({"m", "n", "k", "threads"})
    ->Args({512, 128, 768, 1})
    ->Args({128, 512, 768, 1})
    ->Args({128, 384, 768, 1})
    ->Args({128, 128, 768, 1})
    ->Args({512, 128, 768, 2})
    ->Unit(benchmark::kMicrosecond);

// One decode token's weight GEMVs for TinyLM (`layers` layers of x @ W for W in [128, 384],
// [128, 128], [128, 512], [512, 128]; 4 layers: 3.1 MB of distinct weights per token, more than
// one core's L2 holds, so this times the GEMV at the bandwidth decode actually sees, unlike a
// hot single GEMV). `packed`: the weights in the packed layout the generator stores them in,
// each task's columns one contiguous piece (at 2 threads each core's half then stays in its L2).
void BM_DecodeGemvs(benchmark::State& state) {
  set_threads(state, 0);
  const bool packed = state.range(2) != 0;
  struct Shape {
    int64_t k, n;
  };
  const Shape layer[] = {{128, 384}, {128, 128}, {128, 512}, {512, 128}};
  const auto isa = volta::cpu::matmul_best_isa();
  const int64_t nr = volta::cpu::matmul_tile(isa).cols, kc = 192;
  std::vector<std::vector<float>> weights;
  std::vector<Shape> shapes;
  int64_t bytes = 0;
  for (int64_t l = 0; l < state.range(1); ++l)
    for (const Shape& s : layer) {
      weights.push_back(seeded(s.k * s.n, static_cast<uint64_t>(weights.size() + 3)));
      if (packed) {
        std::vector<float> p(weights.back().size());
        volta::ir::repack_weight(weights.back().data(), p.data(), s.k, s.n, kc, nr, true);
        weights.back() = std::move(p);
      }
      shapes.push_back(s);
      bytes += s.k * s.n * 4;
    }
  const int64_t M = state.range(3);
  const std::vector<float> x = seeded(M * 512, 1);
  std::vector<float> y(static_cast<size_t>(M * 512));
  double flops = 0;
  for (const Shape& s : shapes) flops += 2.0 * static_cast<double>(M * s.k * s.n);
  for (auto _ : state) {
    for (size_t i = 0; i < weights.size(); ++i) {
      const Shape s = shapes[i];
      volta::cpu::MatmulBlocking bl = volta::cpu::matmul_blocking_for(isa, M, s.n, s.k);
      bl.kc = kc;
      const float* w = weights[i].data();
      volta::cpu::gemm(isa, bl, {x.data(), s.k, 1}, {w, s.n, 1}, y.data(), s.n, M, s.n, s.k, nullptr, packed ? w : nullptr);
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
// rows: the batch of a decode step (1, or batched decode's 8 and 12 sequences).
BENCHMARK(BM_DecodeGemvs)
    ->ArgNames({"threads", "layers", "packed", "rows"})
    ->ArgsProduct({{1, 2}, {2, 4}, {0, 1}, {1}})
    ->ArgsProduct({{1, 2}, {4}, {1}, {2, 3, 8, 12}})
    ->Unit(benchmark::kMicrosecond);

// The same GEMVs on bf16 weights through the matmul op kernel (the generator's `--weights bf16`:
// 1.6 MB per token at 4 layers), stored packed (packed = 1) or row-major.
void BM_DecodeGemvsBf16(benchmark::State& state) {
  set_threads(state, 0);
  const bool packed = state.range(2) != 0;
  const int64_t layer[][2] = {{128, 384}, {128, 128}, {128, 512}, {512, 128}};
  const auto isa = volta::cpu::matmul_best_isa();
  const int64_t nr = volta::cpu::matmul_tile(isa).cols, kc = volta::cpu::matmul_default_blocking(isa).kc;
  std::vector<volta::Tensor> weights;
  std::vector<volta::ir::Node> nodes;
  int64_t bytes = 0;
  for (int64_t l = 0; l < state.range(1); ++l)
    for (const auto& [k, n] : layer) {
      volta::Tensor w32 = volta::Tensor::zeros(volta::DType::f32, {k, n});
      volta::fill_normal(w32, static_cast<uint64_t>(weights.size() + 3), 1, 0.0f, 1.0f);
      volta::Tensor w = volta::narrow_to(w32, volta::DType::bf16);
      volta::ir::Node node;
      node.op = volta::ir::Op::Matmul, node.name = "mm", node.type = {volta::DType::f32, {state.range(3), n}};
      if (packed) {
        volta::Tensor p = volta::Tensor::empty(volta::DType::bf16, {k, n});
        volta::ir::repack_weight(w.data<uint16_t>(), p.data<uint16_t>(), k, n, kc, nr, true);
        w = std::move(p);
        node.attrs.set("b_packed", std::vector<int64_t>{kc, nr});
      }
      // Bound as a plan binds them: the kernel then reads the struct, as it does in decode,
      // instead of parsing the attributes on every call.
      node.attrs.bind_typed(std::make_shared<const volta::ir::AttrsOf<volta::ir::Op::Matmul>>(
          volta::ir::parse_attrs<volta::ir::Op::Matmul>(node.attrs).value()));
      weights.push_back(std::move(w));
      nodes.push_back(std::move(node));
      bytes += k * n * 2;
    }
  const int64_t M = state.range(3);
  volta::Tensor x = volta::Tensor::zeros(volta::DType::f32, {M, 512}), y = volta::Tensor::zeros(volta::DType::f32, {M, 512});
  volta::fill_normal(x, 1, 1, 0.0f, 1.0f);
  // The references made once, as a plan's run keeps them: a decode step allocates nothing.
  std::vector<std::array<volta::TensorRef, 3>> refs;
  for (size_t i = 0; i < weights.size(); ++i)
    refs.push_back({volta::TensorRef{x.raw(), {volta::DType::f32, {M, weights[i].shape()[0]}}},
                    volta::TensorRef{weights[i].raw(), weights[i].type()}, volta::TensorRef{y.raw(), nodes[i].type}});
  for (auto _ : state) {
    for (size_t i = 0; i < weights.size(); ++i) {
      const std::span<const volta::TensorRef> in(refs[i].data(), 2);
      const volta::Status st = volta::cpu::matmul(volta::cpu::KernelArgs{nodes[i], in, refs[i][2], {}});
      if (!st.is_ok()) state.SkipWithError(st.message().c_str());
    }
    benchmark::DoNotOptimize(y.raw());
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_DecodeGemvsBf16)
    ->ArgNames({"threads", "layers", "packed", "rows"})
    ->ArgsProduct({{1, 2}, {2, 4}, {0, 1}, {1}})
    ->ArgsProduct({{1, 2}, {4}, {1}, {3, 8, 12}})
    ->Unit(benchmark::kMicrosecond);

// One decode product through the matmul op kernel on a packed f32 weight, as a plan binds it: on
// a 16 x 32 weight nearly all of it is the call's fixed cost (attributes, epilogue, task split),
// which a batch-1 token pays 17 times.
void BM_DecodeMatmulCall(benchmark::State& state) {
  set_threads(state, 0);
  const int64_t k = state.range(1), n = state.range(2);
  const auto isa = volta::cpu::matmul_best_isa();
  const int64_t nr = volta::cpu::matmul_tile(isa).cols, kc = volta::cpu::matmul_default_blocking(isa).kc;
  volta::Tensor w32 = volta::Tensor::zeros(volta::DType::f32, {k, n});
  volta::fill_normal(w32, 3, 1, 0.0f, 1.0f);
  volta::Tensor p = volta::Tensor::empty(volta::DType::f32, {k, n});
  volta::ir::repack_weight(w32.data<float>(), p.data<float>(), k, n, kc, nr, true);
  volta::ir::Node node;
  node.op = volta::ir::Op::Matmul, node.name = "mm", node.type = {volta::DType::f32, {1, n}};
  node.attrs.set("b_packed", std::vector<int64_t>{kc, nr});
  node.attrs.bind_typed(std::make_shared<const volta::ir::AttrsOf<volta::ir::Op::Matmul>>(
      volta::ir::parse_attrs<volta::ir::Op::Matmul>(node.attrs).value()));
  volta::Tensor x = volta::Tensor::zeros(volta::DType::f32, {1, k}), y = volta::Tensor::zeros(volta::DType::f32, {1, n});
  const std::array<volta::TensorRef, 3> refs{volta::TensorRef{x.raw(), x.type()}, volta::TensorRef{p.raw(), p.type()},
                                             volta::TensorRef{y.raw(), node.type}};
  for (auto _ : state) {
    const volta::Status st = volta::cpu::matmul(volta::cpu::KernelArgs{node, std::span(refs.data(), 2), refs[2], {}});
    if (!st.is_ok()) state.SkipWithError(st.message().c_str());
    benchmark::DoNotOptimize(y.raw());
  }
}
BENCHMARK(BM_DecodeMatmulCall)->ArgNames({"threads", "k", "n"})->Args({1, 16, 32})->Args({1, 128, 384})->Args({2, 128, 384})->Unit(benchmark::kNanosecond);

// The cost of one parallel_for of two empty tasks: the floor under every threaded op.
void BM_ParallelFor(benchmark::State& state) {
  set_threads(state, 0);
  for (auto _ : state) volta::cpu::parallel_for(2, [](int64_t i) { benchmark::DoNotOptimize(i); });
}
BENCHMARK(BM_ParallelFor)->ArgNames({"threads"})->Arg(1)->Arg(2);

// The same call inside a team (every thread walking the calls, cpu::run_team): 64 calls of two
// empty tasks, each after a barrier (`barrier` 1) or without one; per call.
void BM_TeamCalls(benchmark::State& state) {
  set_threads(state, 0);
  const bool barrier = state.range(1) != 0;
  constexpr int kCalls = 64;
  for (auto _ : state)
    volta::cpu::run_team(volta::cpu::num_threads(), [&](int64_t) {
      for (int c = 0; c < kCalls; ++c) {
        if (barrier) volta::cpu::team_barrier();
        volta::cpu::parallel_for(2, [](int64_t i) { benchmark::DoNotOptimize(i); });
      }
    });
  state.SetItemsProcessed(state.iterations() * kCalls);
}
BENCHMARK(BM_TeamCalls)->ArgNames({"threads", "barrier"})->Args({2, 0})->Args({2, 1});

}  // namespace

BENCHMARK_MAIN();
