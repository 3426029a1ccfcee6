#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <new>
#include <set>
#include <thread>

#include "backends/cpu/parallel.h"
#include "cpu_variant.h"
#include "test_util.h"
#include "volta/builder.h"
#include "volta/rng.h"
#include "volta/runtime.h"
#include "volta/state.h"
#include "volta/text.h"

namespace volta {
namespace {

ir::Graph mlp() { return test::load_example("mlp.vir"); }

TEST(Runtime, RunsTheMlpAndMatchesNodeByNodeReference) {
  ir::Graph g = mlp();
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(g);
  ASSERT_OK(plan);
  auto bindings = init_params(g, 7);
  ASSERT_OK(bindings);
  auto inputs = random_inputs(g, 7);
  ASSERT_OK(inputs);
  bindings->merge(*inputs);
  auto out = rt.run(**plan, *bindings);
  ASSERT_OK(out);
  ASSERT_EQ(out->size(), 2u);

  // Evaluate the same graph one node at a time on a fresh CPU backend, each value in its own
  // tensor: the planned arena (with its reuse) must not change a single bit.
  auto cpu = make_cpu_backend();
  std::vector<Tensor> values(g.size());
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Input || n.op == ir::Op::Param) { values[static_cast<size_t>(n.id)] = bindings->at(n.name); continue; }
    if (n.op == ir::Op::Constant) { values[static_cast<size_t>(n.id)] = n.value; continue; }
    std::vector<TensorRef> in;
    for (int32_t i : n.inputs) in.push_back({values[static_cast<size_t>(i)].raw(), values[static_cast<size_t>(i)].type()});
    Tensor v = Tensor::zeros(n.type.dtype, n.type.shape);
    std::vector<std::byte> ws(cpu->workspace_bytes(g, n));
    ASSERT_OK(cpu->execute(n, in, TensorRef{v.raw(), v.type()}, ws, cpu->kernel_info(g, n, Determinism::Strict)));
    values[static_cast<size_t>(n.id)] = v;
  }
  EXPECT_TRUE((*out)[0].bitwise_equal(values[static_cast<size_t>(g.outputs[0])]));
  EXPECT_TRUE((*out)[1].bitwise_equal(values[static_cast<size_t>(g.outputs[1])]));
  float loss = (*out)[1].data<float>()[0];
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.0f);
}

TEST(Runtime, RepeatedRunsAreBitwiseIdentical) {
  auto g = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(g);
  std::vector<Tensor> first;
  for (int rep = 0; rep < 3; ++rep) {
    Runtime rt(make_cpu_backend());
    auto plan = rt.compile(*g);
    ASSERT_OK(plan);
    auto b = init_params(*g, 1);
    auto in = random_inputs(*g, 1);
    ASSERT_OK(b);
    ASSERT_OK(in);
    b->merge(*in);
    auto out = rt.run(**plan, *b);
    ASSERT_OK(out);
    if (rep == 0) first = *out;
    else EXPECT_TRUE((*out)[0].bitwise_equal(first[0]));
  }
}

TEST(Runtime, PlanCacheHitsOnTheSameGraphAndMissesOnNewShapes) {
  ir::Graph g = mlp();
  Runtime rt(make_cpu_backend());
  ASSERT_OK(rt.compile(g));
  ASSERT_OK(rt.compile(g));
  EXPECT_EQ(rt.cache().hits(), 1u);
  EXPECT_EQ(rt.cache().misses(), 1u);
  CompileOptions opts;
  opts.plan.memory_budget_bytes = 1 << 30;
  ASSERT_OK(rt.compile(g, opts));  // other flags: a new entry
  EXPECT_EQ(rt.cache().misses(), 2u);
  ModelBuilder b("mlp");
  Value x = b.input("x", {DType::f32, {16, 4}});
  b.output(b.relu(x));
  auto g2 = b.build();
  ASSERT_OK(g2);
  ASSERT_OK(rt.compile(*g2));
  EXPECT_EQ(rt.cache().misses(), 3u);
  EXPECT_EQ(rt.cache().size(), 3u);
}

TEST(Runtime, KeyedCompileBuildsEachNamedGraphOnce) {
  Runtime rt(make_cpu_backend());
  int builds = 0;
  auto build = [&]() -> Result<ir::Graph> {
    ++builds;
    return mlp();
  };
  auto a = rt.compile_keyed("mlp", build);
  auto b = rt.compile_keyed("mlp", build);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(builds, 1);
  CompileOptions budget;
  budget.plan.memory_budget_bytes = 1 << 30;
  ASSERT_OK(rt.compile_keyed("mlp", build, budget));  // other options: compiled again
  EXPECT_EQ(builds, 2);
  auto failing = rt.compile_keyed("bad", []() -> Result<ir::Graph> { return invalid_argument("no graph"); });
  EXPECT_ERROR_CONTAINS(failing, "no graph");
}

// A run looks the state's buffers up once per layout of the state: bytes overwritten in place
// are read where they are, and a param dropped and made again, a state moved into another or
// another state altogether is bound afresh (a stale buffer would give the old sum, or a freed
// one under ASan).
TEST(Runtime, StateBuffersAreBoundAfreshWhenTheStateChanges) {
  ModelBuilder b("state");
  const TensorType t{DType::f32, {4}};
  b.output(b.add(b.input("x", t), b.param("p", t), "y"));
  auto g = b.build();
  ASSERT_OK(g);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(*g);
  ASSERT_OK(plan);
  auto filled = [&](float v) {
    Tensor x = Tensor::zeros(DType::f32, {4});
    for (int i = 0; i < 4; ++i) x.data<float>()[i] = v;
    return x;
  };
  const Bindings in = {{"x", filled(1.0f)}};
  auto first = [&](State& s) -> float {
    auto out = rt.run(**plan, in, &s);
    return out.is_ok() ? (*out)[0].data<float>()[0] : -1.0f;
  };
  State s(rt.backend());
  ASSERT_OK(s.put("p", filled(10.0f), plan::MemClass::Param));
  EXPECT_EQ(first(s), 11.0f);
  const uint64_t layout = s.layout();
  ASSERT_OK(s.put("p", filled(20.0f), plan::MemClass::Param));  // in place
  EXPECT_EQ(s.layout(), layout);
  EXPECT_EQ(first(s), 21.0f);
  s.erase("p");
  ASSERT_OK(s.put("p", filled(30.0f), plan::MemClass::Param));  // new bytes
  EXPECT_NE(s.layout(), layout);
  EXPECT_EQ(first(s), 31.0f);
  State moved = std::move(s);
  EXPECT_EQ(first(moved), 31.0f);
  EXPECT_EQ(first(s), -1.0f);  // the moved-from state holds nothing: p is unbound
  State other(rt.backend());
  ASSERT_OK(other.put("p", filled(40.0f), plan::MemClass::Param));
  EXPECT_EQ(first(other), 41.0f);
  EXPECT_EQ(first(moved), 31.0f);
}

using test::CpuVariant;

TEST(Runtime, FusionsIntoOpsTheBackendLacksAreSkipped) {
  auto g = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(g);
  auto in = random_inputs(*g, 1);
  ASSERT_OK(in);
  auto params = init_params(*g, 1);
  ASSERT_OK(params);
  in->merge(*params);
  std::vector<Tensor> outs;
  for (bool full : {true, false}) {
    Runtime rt(full ? make_cpu_backend() : std::unique_ptr<Backend>(std::make_unique<CpuVariant>(CpuVariant::kNoAttention)));
    auto plan = rt.compile(*g);
    ASSERT_OK(plan);
    size_t attention = 0, epilogues = 0;
    for (const ir::Node& n : (*plan)->graph.nodes)
      attention += n.op == ir::Op::Attention, epilogues += n.op == ir::Op::Matmul && n.inputs.size() == 3;
    EXPECT_EQ(attention > 0, full);
    EXPECT_EQ(epilogues > 0, full);  // and no matmul epilogue without the feature
    auto out = rt.run(**plan, *in);
    ASSERT_OK(out);
    outs.push_back((*out)[0]);
  }
  EXPECT_TRUE(outs[0].bitwise_equal(outs[1]));  // and the fused form has the unfused bits
}

// A device backend: params and constants go up once, inputs every run, outputs come back; the
// plan's placement report says the same numbers.
TEST(Runtime, DeviceBackendsKeepParamsResidentAndCountTransfers) {
  auto g = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(g);
  auto in = random_inputs(*g, 2);
  ASSERT_OK(in);
  auto params = init_params(*g, 2);
  ASSERT_OK(params);
  in->merge(*params);
  Runtime cpu(make_cpu_backend());
  auto cplan = cpu.compile(*g);
  ASSERT_OK(cplan);
  EXPECT_FALSE((*cplan)->memory.placement.device);
  auto want = cpu.run(**cplan, *in);
  ASSERT_OK(want);
  EXPECT_EQ(cpu.transfers().h2d_bytes, 0u);

  auto owned = std::make_unique<CpuVariant>(CpuVariant::kDevice);
  CpuVariant* dev = owned.get();
  Runtime rt(std::move(owned));
  auto plan = rt.compile(*g);
  ASSERT_OK(plan);
  const plan::Placement& pl = (*plan)->memory.placement;
  EXPECT_TRUE(pl.device);
  size_t inputs = 0, leaves = 0, outputs = 0;
  for (const ir::Node& n : (*plan)->graph.nodes) {
    if (n.op == ir::Op::Input) inputs += n.type.bytes();
    if (n.op == ir::Op::Param || n.op == ir::Op::Constant) leaves += n.type.bytes();
  }
  for (int32_t o : (*plan)->graph.outputs) outputs += (*plan)->graph.node(o).type.bytes();
  EXPECT_EQ(pl.host_input_bytes, inputs);
  EXPECT_EQ(pl.device_param_bytes, leaves);
  EXPECT_EQ(pl.device_output_bytes, outputs);
  EXPECT_EQ(pl.device_temp_bytes, (*plan)->memory.arena_bytes);
  EXPECT_NE(plan::format_memory_report((*plan)->memory).find("device: host-input " + std::to_string(inputs)), std::string::npos);
  for (int run = 1; run <= 3; ++run) {
    auto got = rt.run(**plan, *in);
    ASSERT_OK(got);
    EXPECT_TRUE((*got)[0].bitwise_equal((*want)[0]));
    EXPECT_EQ(dev->copied_in, leaves + static_cast<size_t>(run) * inputs) << "run " << run;
    EXPECT_EQ(rt.transfers().h2d_bytes, dev->copied_in);
    EXPECT_EQ(rt.transfers().d2h_bytes, static_cast<size_t>(run) * outputs);
  }
  // A new tensor bound under a param's name is uploaded again.
  const int64_t uploads = rt.transfers().param_uploads;
  const std::string name = (*plan)->graph.node((*plan)->graph.nodes_of(ir::Op::Param).front()).name;
  (*in)[name] = (*in)[name].clone();
  ASSERT_OK(rt.run(**plan, *in));
  EXPECT_EQ(rt.transfers().param_uploads, uploads + 1);
}

// A device backend that records: the second run of a plan over the same buffers is recorded and
// replayed, later runs replay it and read each run's new inputs; a param bound anew moves the
// buffers and the plan runs node by node again before it is recorded anew.
TEST(Runtime, DeviceBackendsRecordAPlanRunTwiceAndReplayIt) {
  auto g = ir::load_graph(test::source_path("examples/gpt_block.vir"));
  ASSERT_OK(g);
  auto params = init_params(*g, 2);
  ASSERT_OK(params);
  Runtime cpu(make_cpu_backend());
  auto cplan = cpu.compile(*g);
  ASSERT_OK(cplan);
  auto owned = std::make_unique<test::RecordingDevice>();
  test::RecordingDevice* dev = owned.get();
  Runtime rt(std::move(owned));
  auto plan = rt.compile(*g);
  ASSERT_OK(plan);
  int64_t nodes = 0;
  for (const ir::Node& n : (*plan)->graph.nodes) nodes += ir::is_leaf(n.op) ? 0 : 1;
  auto run_both = [&](uint64_t input_seed) {
    auto in = random_inputs(*g, input_seed);
    EXPECT_TRUE(in.is_ok());
    for (const auto& [name, t] : *params) (*in)[name] = t;  // shared storage: the same buffers
    auto want = cpu.run(**cplan, *in);
    auto got = rt.run(**plan, *in);
    ASSERT_OK(want);
    ASSERT_OK(got);
    EXPECT_TRUE((*got)[0].bitwise_equal((*want)[0])) << "inputs " << input_seed;
  };
  run_both(1);  // node by node
  EXPECT_EQ(dev->replayed, 0);
  const int64_t per_run = dev->executed;
  EXPECT_GT(per_run, nodes / 2);
  run_both(2);  // recorded (nothing runs while recording), then replayed
  run_both(3);  // replayed with new inputs
  EXPECT_EQ(dev->executed, per_run);
  EXPECT_EQ(dev->replayed, 2);
  EXPECT_EQ(rt.replays(), 2);
  Tensor& w = params->begin()->second;  // a param bound anew: new buffers
  const Tensor old = w;                  // (kept, so its device copy stays and the new one lands elsewhere)
  w = w.clone();
  run_both(4);
  EXPECT_EQ(dev->executed, 2 * per_run);
  EXPECT_EQ(dev->replayed, 2);
  run_both(5);
  EXPECT_EQ(dev->replayed, 3);
  rt.set_replay(false);
  run_both(6);
  EXPECT_EQ(dev->executed, 3 * per_run);
  EXPECT_EQ(dev->replayed, 3);
}

TEST(Runtime, BindingErrorsNameTheValue) {
  ir::Graph g = mlp();
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(g);
  ASSERT_OK(plan);
  auto b = init_params(g, 1);
  ASSERT_OK(b);
  EXPECT_ERROR_CONTAINS(rt.run(**plan, *b), "[input] 'x' is not bound (node 'x')");
  auto in = random_inputs(g, 1);
  b->merge(*in);
  (*b)["x"] = Tensor::zeros(DType::f32, {8, 5});
  EXPECT_ERROR_CONTAINS(rt.run(**plan, *b), "'x' is declared f32[8,4] but bound to f32[8,5]");
  (*b)["x"] = Tensor::zeros(DType::f32, {8, 4});
  (*b)["nope"] = Tensor::zeros(DType::f32, {1});
  EXPECT_ERROR_CONTAINS(rt.run(**plan, *b), "binding 'nope' names no input or param");
}

TEST(Runtime, DataErrorsComeBackAsValues) {
  ir::Graph g = mlp();
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(g);
  ASSERT_OK(plan);
  auto b = init_params(g, 1);
  auto in = random_inputs(g, 1);
  b->merge(*in);
  (*b)["labels"].data<int32_t>()[3] = 3;  // 3 classes: valid ids are 0..2
  EXPECT_ERROR_CONTAINS(rt.run(**plan, *b), "(node 'loss')");
}

TEST(Runtime, UnverifiedGraphIsRejectedBeforePlanning) {
  ir::Graph g = mlp();
  g.nodes[7].type.shape = {8, 17};  // h_pre: corrupt its recorded type
  Runtime rt(make_cpu_backend());
  EXPECT_ERROR_CONTAINS(rt.compile(g), "(node 'h_pre')");
}

TEST(Runtime, ParamsAreSeededPerNameAndDeterministic) {
  ir::Graph g = mlp();
  auto a = init_params(g, 3), b = init_params(g, 3), c = init_params(g, 4);
  ASSERT_OK(a);
  EXPECT_TRUE(a->at("w1").bitwise_equal(b->at("w1")));
  EXPECT_FALSE(a->at("w1").bitwise_equal(c->at("w1")));
  EXPECT_EQ(a->at("b1").data<float>()[0], 0.0f);
  // Labels index 3 classes, so random labels stay in [0, 3).
  auto in = random_inputs(g, 9);
  ASSERT_OK(in);
  const Tensor& labels = in->at("labels");
  for (int64_t i = 0; i < labels.numel(); ++i) {
    EXPECT_GE(labels.data<int32_t>()[i], 0);
    EXPECT_LT(labels.data<int32_t>()[i], 3);
  }
}

TEST(Rng, PhiloxIsCounterBasedAndStable) {
  // Same (seed, stream, index) -> same bits, independent of call order.
  auto a = philox4x32(42, 7, 1000);
  (void)philox4x32(42, 7, 999);
  EXPECT_EQ(a, philox4x32(42, 7, 1000));
  EXPECT_NE(a, philox4x32(43, 7, 1000));
  EXPECT_NE(a, philox4x32(42, 8, 1000));
  // Known answer for the Philox4x32-10 reference test vector (all-zero counter and key).
  auto z = philox4x32(0, 0, 0);
  EXPECT_EQ(z[0], 0x6627e8d5u);
  EXPECT_EQ(z[1], 0xe169c58du);
  EXPECT_EQ(z[2], 0xbc57ac4cu);
  EXPECT_EQ(z[3], 0x9b00dbd8u);
  // A normal fill has about the right moments.
  Tensor t = Tensor::zeros(DType::f32, {20000});
  fill_normal(t, 1, 2, 0.0f, 1.0f);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < t.numel(); ++i) sum += t.data<float>()[i], sq += double(t.data<float>()[i]) * t.data<float>()[i];
  EXPECT_NEAR(sum / 20000, 0.0, 0.03);
  EXPECT_NEAR(sq / 20000, 1.0, 0.05);
}

TEST(Device, ExplicitCudaNeverFallsBackToCpu) {
  auto cuda = select_backend(DeviceKind::Cuda);
  if (cuda.is_ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(cuda.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(cuda.status().message().find("--device cuda"), std::string::npos) << cuda.status().message();
  auto rt = Runtime::create(DeviceKind::Cuda);
  EXPECT_FALSE(rt.is_ok());
  auto autod = select_backend(DeviceKind::Auto);
  ASSERT_OK(autod);
  EXPECT_EQ((*autod)->name(), "cpu");
}

TEST(Device, FlagBeatsEnvAndBadValuesNameTheirSource) {
  ASSERT_EQ(setenv("VOLTA_DEVICE", "auto", 1), 0);
  EXPECT_EQ(*device_from_flag_or_env(""), DeviceKind::Auto);
  EXPECT_EQ(*device_from_flag_or_env("cpu"), DeviceKind::Cpu);
  ASSERT_EQ(setenv("VOLTA_DEVICE", "tpu", 1), 0);
  EXPECT_ERROR_CONTAINS(device_from_flag_or_env(""), "VOLTA_DEVICE: unknown device 'tpu'");
  EXPECT_ERROR_CONTAINS(device_from_flag_or_env("gpu"), "--device: unknown device 'gpu'");
  unsetenv("VOLTA_DEVICE");
  EXPECT_EQ(*device_from_flag_or_env(""), DeviceKind::Cpu);
}

TEST(Device, CpuCapabilitiesCoverEveryOp) {
  auto cpu = make_cpu_backend();
  for (int i = 0; i < ir::kNumOps; ++i) {
    auto op = static_cast<ir::Op>(i);
    if (ir::is_leaf(op)) continue;
    EXPECT_TRUE(cpu->capabilities().supports(op)) << ir::op_name(op);
  }
}

}  // namespace
}  // namespace volta

namespace volta {
namespace {

// The memory preflight: compile refuses a plan above the runtime's limit before anything is
// allocated, naming the largest classes.
TEST(RuntimeMemory, APlanAboveTheLimitIsRefusedNamingItsLargestClasses) {
  ir::Graph g = mlp();
  set_memory_limit(1024);
  Runtime small(make_cpu_backend());
  set_memory_limit(0);
  EXPECT_EQ(small.memory_limit(), 1024u);
  EXPECT_ERROR_CONTAINS(small.compile(g), "plan for graph 'mlp' needs 1.4 KiB (largest: param 576 bytes, activation 512 bytes, "
                                          "input 192 bytes) but the memory limit is 1.0 KiB");
  Runtime big(make_cpu_backend());  // the default: the memory available now
  EXPECT_GT(big.memory_limit(), 0u);
  EXPECT_EQ(big.memory_limit() > 0, available_memory() > 0);
  ASSERT_OK(big.compile(g));
  // A graph far beyond any machine fails the same way, with no allocation tried.
  ModelBuilder b("huge");
  Value x = b.input("x", {DType::f32, {1 << 20, 1 << 20}});
  b.output(b.relu(x, "y"));
  ASSERT_OK_AND_ASSIGN(ir::Graph h, b.build());
  EXPECT_ERROR_CONTAINS(big.compile(h), "plan for graph 'huge' needs 8.0 TiB");
}

// The scratch an attention kernel keeps per thread beside the arena (a group's probabilities,
// T x S floats: 64 MiB at 4096 keys, beside kᵀ packed) counts against the limit too, on each thread.
TEST(RuntimeMemory, AttentionScratchPerThreadCountsAgainstTheLimit) {
  ModelBuilder b("long");
  const Shape s{1, 1, 4096, 2};
  Value q = b.input("q", {DType::f32, s}), k = b.input("k", {DType::f32, s}), v = b.input("v", {DType::f32, s});
  b.output(b.op(ir::Op::Attention, {q, k, v}, {{"causal_offset", int64_t{0}}}, "att"));
  ASSERT_OK_AND_ASSIGN(ir::Graph g, b.build());
  set_cpu_threads(2);
  set_memory_limit(100 << 20);
  Runtime rt(make_cpu_backend());
  set_memory_limit(0);
  EXPECT_ERROR_CONTAINS(rt.compile(g), "plan for graph 'long' needs 128.0 KiB and its kernels 64.3 MiB of scratch on each of 2 threads, "
                                       "but the memory limit is 100.0 MiB");
  set_cpu_threads(1);
  ASSERT_OK(rt.compile(g));  // 64 MiB on one thread fits
  set_cpu_threads(0);
}

// A decode-shaped attention over an empty batch runs (its task grouping divided by zero groups).
TEST(RuntimeMemory, AttentionOverNoGroupsRuns) {
  ModelBuilder b("empty");
  Value q = b.input("q", {DType::f32, {0, 1, 1, 16}}), k = b.input("k", {DType::f32, {0, 1, 4, 16}}),
        v = b.input("v", {DType::f32, {0, 1, 4, 16}});
  b.output(b.op(ir::Op::Attention, {q, k, v}, {}, "att"));
  ASSERT_OK_AND_ASSIGN(ir::Graph g, b.build());
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    Runtime rt(make_cpu_backend());
    ASSERT_OK_AND_ASSIGN(auto plan, rt.compile(g));
    Bindings in{{"q", Tensor::zeros(DType::f32, {0, 1, 1, 16})}, {"k", Tensor::zeros(DType::f32, {0, 1, 4, 16})},
                {"v", Tensor::zeros(DType::f32, {0, 1, 4, 16})}};
    auto out = rt.run(*plan, in);
    ASSERT_OK(out);
    EXPECT_EQ((*out)[0].numel(), 0);
  }
  set_cpu_threads(0);
}

// An allocation that fails is an error value: the backend's own allocation, and a task of the
// thread pool that throws (a kernel's scratch), which fails the call on the caller's thread.
TEST(RuntimeMemory, FailedAllocationsAreErrorsNeverAborts) {
  auto cpu = make_cpu_backend();
  EXPECT_ERROR_CONTAINS(cpu->allocate(size_t{1} << 62), "cpu: cannot allocate 4611686018427387904 bytes");
  set_cpu_threads(2);
  std::vector<int> seen(64, 0);
  EXPECT_THROW(cpu::parallel_for(64,
                                 [&](int64_t i) {
                                   if (i == 63) throw std::bad_alloc();  // the worker's share
                                   seen[static_cast<size_t>(i)] = 1;
                                 }),
               std::bad_alloc);
  // The pool is whole afterwards.
  std::vector<int> again(64, 0);
  cpu::parallel_for(64, [&](int64_t i) { again[static_cast<size_t>(i)] = 1; });
  EXPECT_EQ(std::count(again.begin(), again.end(), 1), 64);
  set_cpu_threads(0);
}

// A decode step's single-task products on resident weights: each weight's task runs on the same
// thread every call, and two weights heavier than everything seen before land on different
// threads (the balance of bytes per core); split products still run every task once.
TEST(Parallel, ResidentOperandsKeepTheirThreadAndBalanceTheCores) {
  set_cpu_threads(2);
  const float a[1] = {}, b[1] = {}, c[1] = {};
  constexpr int64_t kHeavy = int64_t{1} << 50;  // outweighs any earlier test's weights
  auto runner = [](const void* key, int64_t bytes) {
    std::thread::id id;
    cpu::parallel_for_resident(key, bytes, 1, [&](int64_t i) {
      EXPECT_EQ(i, 0);
      id = std::this_thread::get_id();
    });
    return id;
  };
  const std::thread::id first = runner(a, kHeavy), second = runner(b, kHeavy);
  EXPECT_NE(first, second);
  for (int call = 0; call < 5; ++call) {
    EXPECT_EQ(runner(a, kHeavy), first);
    EXPECT_EQ(runner(b, kHeavy), second);
  }
  std::vector<int> seen(7, 0);
  cpu::parallel_for_resident(c, 64, 7, [&](int64_t i) { ++seen[static_cast<size_t>(i)]; });
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 7);
  set_cpu_threads(1);  // one thread: everything inline, on the caller
  EXPECT_EQ(runner(b, kHeavy), std::this_thread::get_id());
  set_cpu_threads(0);
}

// Every task of every round runs exactly once, on at most as many threads as asked, also when
// the count grows after rounds have run and new workers join the pool.
TEST(Parallel, EveryTaskRunsOnceAsTheThreadCountGrows) {
  for (int threads : {2, 3, 4, 2, 4}) {
    set_cpu_threads(threads);
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(5 + round % 7));
      std::mutex mu;
      std::set<std::thread::id> ids;
      cpu::parallel_for(static_cast<int64_t>(runs.size()), [&](int64_t i) {
        runs[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard lock(mu);
        ids.insert(std::this_thread::get_id());
      });
      for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << "task " << i << " round " << round << " threads " << threads;
      ASSERT_LE(ids.size(), static_cast<size_t>(threads));
    }
  }
  set_cpu_threads(0);
}

}  // namespace
}  // namespace volta
