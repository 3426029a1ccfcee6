// The determinism policy (include/volta/determinism.h): its names and sources, and planning that
// refuses kernels below the level asked for, and dtypes a backend does not take.
#include <cstdlib>
#include <memory>
#include <string>

#include "test_util.h"
#include "volta/determinism.h"
#include "volta/plan.h"
#include "volta/runtime.h"
#include "volta/text.h"

namespace volta {
namespace {

ir::Graph mlp() { return test::load_example("mlp.vir"); }

// The CPU backend whose matmul declares itself run-to-run (as a split-K kernel would), and which
// may refuse a dtype.
class RunToRunMatmul final : public Backend {
 public:
  explicit RunToRunMatmul(std::vector<DType> dtypes = {DType::f32, DType::f64, DType::i32, DType::i64})
      : cpu_(make_cpu_backend()), caps_(cpu_->capabilities()) {
    caps_.dtypes = std::move(dtypes);
  }
  std::string name() const override { return "test-backend"; }
  const Capabilities& capabilities() const override { return caps_; }
  Result<std::shared_ptr<std::byte>> allocate(size_t bytes) override { return cpu_->allocate(bytes); }
  Status copy_in(std::byte* d, const std::byte* s, size_t n) override { return cpu_->copy_in(d, s, n); }
  Status copy_out(std::byte* d, const std::byte* s, size_t n) override { return cpu_->copy_out(d, s, n); }
  KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n) const override {
    if (n.op == ir::Op::Matmul) return {"test.splitk", Determinism::RunToRun};
    return cpu_->kernel_info(g, n);
  }
  size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) const override { return cpu_->workspace_bytes(g, n); }
  Status execute(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> ws) override {
    return cpu_->execute(n, in, out, ws);
  }

 private:
  std::unique_ptr<Backend> cpu_;
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

// Every CPU kernel is strict, so a strict plan compiles, and its report says which kernel runs.
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

}  // namespace
}  // namespace volta
