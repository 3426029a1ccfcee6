// Teams: every CPU thread walking a plan's steps at once (cpu::run_team, Backend::walk).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "model/generate.h"
#include "test_util.h"
#include "tiny_lm.h"

namespace volta {
namespace {

// A team (every thread walking the same calls): each call's tasks run once, split as a plain
// parallel_for splits them, and every call sees everything the calls before it wrote, whichever
// rank wrote it; run_alone runs once, on one rank; a rank's locals stay its own.
TEST(Parallel, TeamCallsRunEachTaskOnceAfterAllEarlierCalls) {
  for (int threads : {2, 3, 4, 2}) {
    set_cpu_threads(threads);
    constexpr int64_t kN = 37, kCalls = 60;
    std::vector<std::vector<int64_t>> v(kCalls + 1, std::vector<int64_t>(kN, 0));
    for (int64_t i = 0; i < kN; ++i) v[0][static_cast<size_t>(i)] = i;
    std::vector<std::atomic<int>> alone(kCalls);
    std::vector<int> ranks_seen(static_cast<size_t>(threads), 0);
    cpu::run_team(cpu::num_threads(), [&](int64_t rank) {
      EXPECT_TRUE(cpu::in_team());
      ranks_seen[static_cast<size_t>(rank)] = 1;
      for (int64_t c = 0; c < kCalls; ++c) {
        if (c % 3 == 0) cpu::team_barrier();
        if (c % 3 == 1) cpu::team_fence();
        const auto& in = v[static_cast<size_t>(c)];
        auto& out = v[static_cast<size_t>(c + 1)];
        // Each task reads entries other tasks (other ranks) wrote in the call before.
        const int64_t n = c % 5 == 4 ? 1 : kN;  // single-task calls too
        cpu::parallel_for(n, [&](int64_t i) {
          for (int64_t j = i; j < kN; j += n) out[static_cast<size_t>(j)] = in[static_cast<size_t>((j * 7 + 3) % kN)] + c;
        });
        if (c % 7 == 0) cpu::run_alone([&](int64_t) { alone[static_cast<size_t>(c)].fetch_add(1); });
        cpu::parallel_for(0, [](int64_t) { ADD_FAILURE() << "a call of no tasks ran one"; });
      }
    });
    EXPECT_FALSE(cpu::in_team());
    std::vector<int64_t> want(kN);
    for (int64_t i = 0; i < kN; ++i) want[static_cast<size_t>(i)] = i;
    for (int64_t c = 0; c < kCalls; ++c) {
      std::vector<int64_t> next(kN);
      for (int64_t j = 0; j < kN; ++j) next[static_cast<size_t>(j)] = want[static_cast<size_t>((j * 7 + 3) % kN)] + c;
      want = next;
      EXPECT_EQ(alone[static_cast<size_t>(c)].load(), c % 7 == 0 ? 1 : 0) << "call " << c;
    }
    EXPECT_EQ(v[kCalls], want) << threads << " threads";
    EXPECT_EQ(std::count(ranks_seen.begin(), ranks_seen.end(), 1), threads);
  }
  set_cpu_threads(0);
}

// Outside a team each participant runs its own block of a call's tasks first, then the tasks of
// the others' blocks they have not begun: a participant held up in a task (a slow core, a vCPU
// not running) leaves the rest of its block to the others; every task still runs once.
TEST(Parallel, TasksAParticipantHasNotBegunRunElsewhere) {
  set_cpu_threads(2);
  const std::thread::id caller = std::this_thread::get_id();
  for (int rep = 0; rep < 3; ++rep) {
    constexpr int64_t kN = 8;
    std::vector<std::atomic<int>> runs(kN);
    std::atomic<int> on_caller{0};
    cpu::parallel_for(kN, [&](int64_t i) {
      runs[static_cast<size_t>(i)].fetch_add(1);
      if (std::this_thread::get_id() == caller) on_caller.fetch_add(1);
      else std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the worker's first task holds it
    });
    for (int64_t i = 0; i < kN; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << "task " << i;
    // The caller's block is 4 tasks; of the worker's 4 it takes all but the one the worker is in.
    EXPECT_GE(on_caller.load(), 7);
  }
  set_cpu_threads(0);
}

// A rank that stops the walk (a step failed there) never leaves the others waiting: a rank
// waiting on it leaves its body, and run_team returns; a task's exception reaches the caller,
// and the pool is whole afterwards.
TEST(Parallel, ATeamStoppedOnOneRankEndsWithoutHanging) {
  set_cpu_threads(2);
  std::atomic<int> finished{0};
  cpu::run_team(cpu::num_threads(), [&](int64_t rank) {
    if (rank == 1) {
      cpu::team_stop();
      return;
    }
    for (int c = 0; c < 100; ++c) cpu::parallel_for(8, [](int64_t) {});  // would wait on rank 1
    finished.fetch_add(1);
  });
  EXPECT_EQ(finished.load(), 0);
  EXPECT_THROW(cpu::run_team(cpu::num_threads(), [&](int64_t) {
                 cpu::parallel_for(2, [](int64_t i) {
                   if (i == 1) throw std::bad_alloc();  // rank 1's share
                 });
                 cpu::parallel_for(2, [](int64_t) {});
               }),
               std::bad_alloc);
  std::vector<int> again(64, 0);
  cpu::parallel_for(64, [&](int64_t i) { again[static_cast<size_t>(i)] = 1; });
  EXPECT_EQ(std::count(again.begin(), again.end(), 1), 64);
  set_cpu_threads(0);
}

// A decode step walked by every thread at once (the CPU's teams) has the bits of the same step
// walked step by step: the logits of a batched step and the text, GPT and Llama, f32 and bf16
// weights, 2 and 3 threads. A bad token id in a team's walk is the kernel's error, named as on
// one thread, and the next step runs. The wide model's MLP down-projection is one task of 256
// KiB, which parallel_for_resident places on one thread; with the scalar ISA its packed weight
// is unpacked into a thread's scratch first (on one rank of a team).
TEST(Generate, ATeamWalkHasTheBitsOfAStepByStepWalk) {
  const model::TinyLMConfig wide{11, 32, 1, 2, 128, false};  // (a context past 16 rows: weights stored packed)
  const std::optional<cpu::MatmulIsa> active, scalar = cpu::MatmulIsa::kScalar;
  for (const auto& [c, isa] : {std::pair{test::tiny_gpt(), active}, std::pair{test::tiny_llama(), active},
                               std::pair{wide, active}, std::pair{wide, scalar}}) {
    cpu::set_matmul_isa_override(isa);
    const Bindings params = test::tiny_params(c);
    for (DType weights : {DType::f32, DType::bf16}) {
      for (int threads : {2, 3}) {
        set_cpu_threads(threads);
        const std::string what = std::string(model::arch_name(c.arch)) + " " + std::to_string(c.channels) + " channels, " +
                                 (isa ? "scalar, " : "") + dtype_name(weights) + ", " + std::to_string(threads) + " threads";
        std::vector<Tensor> logits;
        std::vector<std::vector<std::vector<int32_t>>> texts;
        for (bool teams : {true, false}) {
          set_cpu_teams(teams);
          Runtime rt(make_cpu_backend());
          auto gen = model::Generator::create(rt, c, params, weights);
          ASSERT_OK(gen);
          const int64_t B = 3;
          ASSERT_OK(gen->reserve(B));
          auto step = gen->decode_plan(B);
          ASSERT_OK(step);
          Tensor next = Tensor::zeros(DType::i32, {B, 1}), at = Tensor::zeros(DType::i32, {1});
          for (int64_t b = 0; b < B; ++b) next.data<int32_t>()[b] = static_cast<int32_t>(2 + 3 * b);
          at.data<int32_t>()[0] = 2;
          auto d = rt.run(**step, {{"tokens", next}, {"position", at}}, &gen->state());
          ASSERT_OK(d);
          logits.push_back((*d)[0]);
          next.data<int32_t>()[1] = static_cast<int32_t>(c.vocab);  // out of range
          EXPECT_ERROR_CONTAINS(rt.run(**step, {{"tokens", next}, {"position", at}}, &gen->state()), "is outside [0, ");
          model::SampleOptions o;
          o.tokens = 20;
          o.batch = 2;
          o.temperature = 0.8;
          auto text = gen->generate({1, 2, 3}, o);
          ASSERT_OK(text);
          texts.push_back(*text);
        }
        set_cpu_teams(true);
        EXPECT_TRUE(logits[0].bitwise_equal(logits[1])) << what;
        EXPECT_EQ(texts[0], texts[1]) << what;
      }
    }
  }
  cpu::set_matmul_isa_override(std::nullopt);
  set_cpu_threads(0);
}

}  // namespace
}  // namespace volta
