// The determinism policy (include/volta/determinism.h): its names and sources, and planning that
// refuses kernels below the level asked for, and dtypes a backend does not take.
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include <unistd.h>

#include "cpu_variant.h"
#include "test_util.h"
#include "volta/determinism.h"
#include "volta/plan.h"
#include "volta/runtime.h"
#include "volta/text.h"
#include "volta/trace.h"

namespace volta {
namespace {

ir::Graph mlp() { return test::load_example("mlp.vir"); }

// The CPU backend whose matmul declares itself run-to-run (as a split-K kernel would), and which
// may refuse a dtype.
class RunToRunMatmul final : public test::CpuWrapper {
 public:
  explicit RunToRunMatmul(std::vector<DType> dtypes = {DType::f32, DType::f64, DType::i32, DType::i64})
      : caps_(cpu_->capabilities()) {
    caps_.dtypes = std::move(dtypes);
  }
  std::string name() const override { return "test-backend"; }
  const Capabilities& capabilities() const override { return caps_; }
  KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n, Determinism level) const override {
    if (n.op == ir::Op::Matmul) return {"test.splitk", Determinism::RunToRun, 0};  // runs the cpu default
    return cpu_->kernel_info(g, n, level);
  }

 private:
  Capabilities caps_;
};

TEST(Determinism, LevelsHaveNamesAndAnOrder) {
  for (Determinism d : {Determinism::Strict, Determinism::RunToRun, Determinism::Off}) {
    auto back = parse_determinism(determinism_name(d));
    ASSERT_OK(back);
    EXPECT_EQ(*back, d);
  }
  EXPECT_LT(Determinism::Off, Determinism::RunToRun);
  EXPECT_LT(Determinism::RunToRun, Determinism::Strict);
  EXPECT_ERROR_CONTAINS(parse_determinism("bitwise"), "unknown determinism level 'bitwise' (expected strict, run-to-run or off)");
}

TEST(Determinism, TheFlagWinsOverTheEnvironmentAndStrictIsTheDefault) {
  ::unsetenv("VOLTA_DETERMINISTIC");
  auto d = determinism_from_flag_or_env("");
  ASSERT_OK(d);
  EXPECT_EQ(*d, Determinism::Strict);
  ::setenv("VOLTA_DETERMINISTIC", "run-to-run", 1);
  d = determinism_from_flag_or_env("");
  ASSERT_OK(d);
  EXPECT_EQ(*d, Determinism::RunToRun);
  d = determinism_from_flag_or_env("off");
  ASSERT_OK(d);
  EXPECT_EQ(*d, Determinism::Off);
  ::setenv("VOLTA_DETERMINISTIC", "sometimes", 1);
  EXPECT_ERROR_CONTAINS(determinism_from_flag_or_env(""), "VOLTA_DETERMINISTIC: unknown determinism level 'sometimes'");
  EXPECT_ERROR_CONTAINS(determinism_from_flag_or_env("x"), "--deterministic: unknown determinism level 'x'");
  ::unsetenv("VOLTA_DETERMINISTIC");
}

// A strict plan refuses a run-to-run kernel before anything runs, naming op, node, backend,
// kernel variant and its level; a run-to-run or off plan takes it and reports it.
TEST(Determinism, PlanningRefusesKernelsBelowTheLevelAskedFor) {
  const ir::Graph g = mlp();
  Runtime strict(std::make_unique<RunToRunMatmul>());
  EXPECT_EQ(strict.determinism(), Determinism::Strict);
  auto refused = strict.compile(g);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_ERROR_CONTAINS(refused, "[matmul] backend 'test-backend' kernel 'test.splitk' is only run-to-run deterministic, "
                                 "below the strict level asked for (node 'h')");
  for (Determinism level : {Determinism::RunToRun, Determinism::Off}) {
    CompileOptions opts;
    opts.determinism = level;  // per compile, over the runtime's
    auto p = strict.compile(g, opts);
    ASSERT_OK(p);
    EXPECT_EQ((*p)->determinism, level);
    const std::string text = plan::format_plan(**p);
    EXPECT_NE(text.find(std::string("determinism ") + determinism_name(level)), std::string::npos) << text;
    EXPECT_NE(text.find("test.splitk (run-to-run)"), std::string::npos) << text;
    const std::string json = plan::plan_to_json(**p, -1);
    EXPECT_NE(json.find(std::string("\"determinism\":\"") + determinism_name(level) + "\""), std::string::npos) << json;
    EXPECT_NE(json.find("\"kernel\":\"test.splitk\",\"kernel_level\":\"run-to-run\""), std::string::npos) << json;
  }
  Runtime loose(std::make_unique<RunToRunMatmul>(), Determinism::RunToRun);
  ASSERT_OK(loose.compile(g));
  CompileOptions strict_opts;
  strict_opts.determinism = Determinism::Strict;
  EXPECT_ERROR_CONTAINS(loose.compile(g, strict_opts), "below the strict level asked for");
}

// At strict every CPU kernel is a strict default (no alternative below strict is chosen), so a
// strict plan compiles, and its report says which kernel runs.
TEST(Determinism, EveryCpuKernelIsStrictAndReported) {
  Runtime rt(make_cpu_backend());
  auto p = rt.compile(mlp());
  ASSERT_OK(p);
  for (int32_t id : (*p)->schedule) {
    const KernelInfo& k = (*p)->kernels[static_cast<size_t>(id)];
    EXPECT_EQ(k.level, Determinism::Strict) << (*p)->graph.node(id).name;
    EXPECT_TRUE(k.variant == "cpu" || k.variant == "reference") << k.variant;
  }
  EXPECT_NE(plan::format_plan(**p).find("backend cpu, determinism strict; kernels: "), std::string::npos);
}

// A value of a dtype the backend does not take is refused at plan time, naming it.
TEST(Determinism, PlanningRefusesDtypesTheBackendDoesNotTake) {
  Runtime rt(std::make_unique<RunToRunMatmul>(std::vector<DType>{DType::f32}), Determinism::Off);
  auto g = ir::parse_graph(R"(graph ids {
  %t: f32[4,2] = param()
  %i: i64[3] = input()
  %y = embedding(%t, %i)
  return %y
}
)",
                           "ids.vir");
  ASSERT_OK(g);
  EXPECT_ERROR_CONTAINS(rt.compile(*g), "[input] backend 'test-backend' does not take dtype i64 (node 'i'");
}

// The CPU backend with one deliberately perturbed kernel: the output of node `victim` has the
// lowest bit of its first element flipped.
class Perturbed final : public test::CpuWrapper {
 public:
  explicit Perturbed(std::string victim) : victim_(std::move(victim)) {}
  std::string name() const override { return "perturbed"; }
  Status execute(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> ws,
                 const KernelInfo& k) override {
    VOLTA_RETURN_IF_ERROR(cpu_->execute(n, in, out, ws, k));
    if (n.name == victim_ && out.numel() > 0) out.data[0] ^= std::byte{1};
    return Status::ok();
  }

 private:
  std::string victim_;
};

// Runs the MLP twice (two runs in one trace) on `backend`, tracing hashes and values into `path`.
void traced_runs(std::unique_ptr<Backend> backend, const std::string& path) {
  const ir::Graph g = mlp();
  Runtime rt(std::move(backend));
  auto trace = HashTrace::create(path, true);
  ASSERT_OK(trace);
  rt.set_trace(trace->get());
  auto p = rt.compile(g);
  ASSERT_OK(p);
  auto params = init_params(g, 3);
  ASSERT_OK(params);
  auto inputs = random_inputs(g, 4);
  ASSERT_OK(inputs);
  params->merge(*inputs);
  for (int i = 0; i < 2; ++i) ASSERT_OK(rt.run(**p, *params));
}

// diff-trace names the first node whose output differs (run, step, op, type), with the largest
// difference when the values were kept; identical runs compare equal record for record.
TEST(Determinism, DiffTraceNamesTheFirstDivergingNode) {
  const std::string dir = ::testing::TempDir() + "trace_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  traced_runs(make_cpu_backend(), dir + "/a.jsonl");
  traced_runs(make_cpu_backend(), dir + "/b.jsonl");
  traced_runs(std::make_unique<Perturbed>("h"), dir + "/c.jsonl");
  auto same = diff_traces(dir + "/a.jsonl", dir + "/b.jsonl");
  ASSERT_OK(same);
  EXPECT_TRUE(same->same);
  EXPECT_EQ(same->records, 6);  // 3 executed nodes (after the epilogue fusion), 2 runs
  auto d = diff_traces(dir + "/a.jsonl", dir + "/c.jsonl");
  ASSERT_OK(d);
  EXPECT_FALSE(d->same);
  EXPECT_EQ(d->records, 0);
  EXPECT_EQ(d->where, "run 0 (graph mlp), step 0, node 'h' (matmul), f32[8,16]");
  ASSERT_TRUE(d->max_abs_diff.has_value());
  EXPECT_GT(*d->max_abs_diff, 0.0);
  EXPECT_LT(*d->max_abs_diff, 1e-5);  // one bit of a float near 1
  EXPECT_NE(d->what.find("at element 0"), std::string::npos) << d->what;
  {  // a trace that stops early: the first record the other has alone
    std::ifstream in(dir + "/a.jsonl");
    std::ofstream out(dir + "/prefix.jsonl");
    std::string line;
    for (int i = 0; i < 3 && std::getline(in, line); ++i) out << line << "\n";
  }
  auto prefix = diff_traces(dir + "/a.jsonl", dir + "/prefix.jsonl");
  ASSERT_OK(prefix);
  EXPECT_FALSE(prefix->same);
  EXPECT_EQ(prefix->where, "record 4 (one trace ends before it)");
  // A trace of other work is named as such; a file that is not a trace is an error.
  std::ofstream(dir + "/short.jsonl") << "{\"run\":0,\"graph\":\"other\",\"step\":0,\"node\":\"h\",\"op\":\"matmul\",\"type\":\"f32[8,16]\",\"hash\":\"x\"}\n";
  auto other = diff_traces(dir + "/a.jsonl", dir + "/short.jsonl");
  ASSERT_OK(other);
  EXPECT_NE(other->what.find("the traces ran different work: graph \"mlp\""), std::string::npos) << other->what;
  std::ofstream(dir + "/bad.jsonl") << "not json\n";
  EXPECT_ERROR_CONTAINS(diff_traces(dir + "/a.jsonl", dir + "/bad.jsonl"), "bad.jsonl:1: not a trace record");
  // A trace written over an earlier one keeps that file's mode.
  ASSERT_EQ(::chmod((dir + "/a.jsonl").c_str(), 0600), 0);
  traced_runs(make_cpu_backend(), dir + "/a.jsonl");
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/a.jsonl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::filesystem::remove_all(dir);
}

// Kept values are compared a slice at a time: a difference past the first megabyte is found and
// placed by its element.
TEST(Determinism, DiffTraceComparesValuesPastOneSlice) {
  const std::string dir = ::testing::TempDir() + "trace_big_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  constexpr int64_t kCount = 400000;  // 1.6 MB of f32
  for (const char* side : {"a", "b"}) {
    const std::string trace = dir + "/" + side + ".jsonl";
    std::ofstream(trace) << "{\"run\":0,\"graph\":\"g\",\"step\":0,\"node\":\"h\",\"op\":\"matmul\",\"type\":\"f32[400000]\","
                         << "\"hash\":\"" << side << "\"}\n";
    std::filesystem::create_directories(trace + ".values");
    std::vector<float> v(kCount, 1.0f);
    if (side[0] == 'b') v[10] = 1.25f, v[300000] = 1.5f;
    std::ofstream(trace + ".values/0.0.bin", std::ios::binary).write(reinterpret_cast<const char*>(v.data()), kCount * 4);
  }
  auto d = diff_traces(dir + "/a.jsonl", dir + "/b.jsonl");
  ASSERT_OK(d);
  EXPECT_FALSE(d->same);
  ASSERT_TRUE(d->max_abs_diff.has_value());
  EXPECT_EQ(*d->max_abs_diff, 0.5);
  EXPECT_NE(d->what.find("at element 300000"), std::string::npos) << d->what;
  std::filesystem::remove_all(dir);
}

// The graph with its statements in a random order that still defines every value before its
// readers (a seeded Kahn's algorithm), written out and parsed back.
ir::Graph shuffled(const ir::Graph& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> pending(g.size(), 0), order;
  std::vector<std::vector<int32_t>> users(g.size());
  for (const ir::Node& n : g.nodes)
    for (int32_t in : n.inputs) users[static_cast<size_t>(in)].push_back(n.id), ++pending[static_cast<size_t>(n.id)];
  std::vector<int32_t> ready;
  for (const ir::Node& n : g.nodes)
    if (pending[static_cast<size_t>(n.id)] == 0) ready.push_back(n.id);
  while (!ready.empty()) {
    const size_t pick = static_cast<size_t>(rng() % ready.size());
    const int32_t id = ready[pick];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(pick));
    order.push_back(id);
    for (int32_t u : users[static_cast<size_t>(id)])
      if (--pending[static_cast<size_t>(u)] == 0) ready.push_back(u);
  }
  std::vector<int32_t> new_id(g.size());
  for (size_t i = 0; i < order.size(); ++i) new_id[static_cast<size_t>(order[i])] = static_cast<int32_t>(i);
  ir::Graph out;
  out.name = g.name;
  for (int32_t old : order) {
    ir::Node n = g.node(old);
    n.id = new_id[static_cast<size_t>(old)];
    for (int32_t& in : n.inputs) in = new_id[static_cast<size_t>(in)];
    out.nodes.push_back(std::move(n));
  }
  for (int32_t o : g.outputs) out.outputs.push_back(new_id[static_cast<size_t>(o)]);
  auto parsed = ir::parse_graph(ir::print_graph(out));
  EXPECT_TRUE(parsed.is_ok()) << parsed.status().message();
  return parsed.is_ok() ? *parsed : out;
}

// Statement order is part of a graph's identity (docs/determinism.md, "Iteration order"): a
// shuffled graph may get another hash, schedule and memory plan, but each order always gets the
// same ones, and every order computes the same bits.
TEST(Determinism, StatementOrderChangesNoBitAndEachOrderPlansAlike) {
  const ir::Graph g = test::load_example("gpt_block.vir");
  auto in = init_params(g, 3);
  ASSERT_OK(in);
  auto tokens = random_inputs(g, 4);
  ASSERT_OK(tokens);
  in->merge(*tokens);
  Runtime rt(make_cpu_backend());
  auto base = rt.compile(g);
  ASSERT_OK(base);
  auto want = rt.run(**base, *in);
  ASSERT_OK(want);
  int other_orders = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const ir::Graph s = shuffled(g, seed);
    Runtime a(make_cpu_backend()), b(make_cpu_backend());  // separate plan caches
    auto pa = a.compile(s);
    auto pb = b.compile(shuffled(g, seed));
    ASSERT_OK(pa);
    ASSERT_OK(pb);
    EXPECT_EQ((*pa)->graph_hash, (*pb)->graph_hash) << "seed " << seed;
    EXPECT_EQ(plan::plan_to_json(**pa, -1), plan::plan_to_json(**pb, -1)) << "seed " << seed;
    other_orders += (*pa)->graph_hash != (*base)->graph_hash;
    auto got = a.run(**pa, *in);
    ASSERT_OK(got);
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) EXPECT_TRUE((*got)[i].bitwise_equal((*want)[i])) << "seed " << seed << " output " << i;
  }
  EXPECT_GT(other_orders, 0);  // the shuffles did reorder the statements
}

}  // namespace
}  // namespace volta
