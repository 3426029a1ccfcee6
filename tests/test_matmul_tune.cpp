// The matmul tuning cache (file round trip, corrupt and foreign files ignored, tuned blocking
// changes no bit) and `volta tune matmul` end to end. Nothing here asserts on timings.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "test_util.h"
#include "volta/rng.h"

namespace volta {
namespace {

namespace fs = std::filesystem;

// Points VOLTA_CACHE_DIR at a fresh directory for one test and restores the old value after.
class CacheDir {
 public:
  explicit CacheDir(const std::string& name) : dir_(fs::temp_directory_path() / ("volta_tune_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (const char* old = std::getenv("VOLTA_CACHE_DIR")) old_ = old;
    ::setenv("VOLTA_CACHE_DIR", dir_.c_str(), 1);
    cpu::reload_matmul_tuning();
  }
  ~CacheDir() {
    if (old_) ::setenv("VOLTA_CACHE_DIR", old_->c_str(), 1);
    else ::unsetenv("VOLTA_CACHE_DIR");
    cpu::reload_matmul_tuning();
    fs::remove_all(dir_);
  }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
  std::optional<std::string> old_;
};

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

cpu::TunedEntry entry(int64_t m, int64_t n, int64_t k, cpu::MatmulBlocking bl) {
  return {cpu::matmul_shape_class(m, n, k), m, n, k, bl, 100.0, 90.0};
}

TEST(MatmulTuning, ShapeClassesRoundUpToPowersOfTwo) {
  EXPECT_EQ(cpu::matmul_shape_class(768, 65, 128), "m1024_n128_k128");
  EXPECT_EQ(cpu::matmul_shape_class(1, 1, 1), "m1_n1_k1");
  EXPECT_EQ(cpu::matmul_shape_class(1024, 1024, 1024), "m1024_n1024_k1024");
}

TEST(MatmulTuning, CacheFileRoundTripsAndFeedsTheKernel) {
  CacheDir dir("roundtrip");
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  auto path = cpu::matmul_tuning_path(sig);
  ASSERT_OK(path);
  EXPECT_EQ(*path, dir.path() + "/matmul/" + sig.file_stem() + ".json");
  EXPECT_FALSE(cpu::tuned_blocking(100, 100, 100).has_value());  // no file yet
  ASSERT_OK(cpu::write_matmul_tuning(*path, sig, {entry(100, 100, 100, {96, 48, 256}), entry(1, 512, 128, {64, 12, 128})}));
  auto back = cpu::read_matmul_tuning(*path, sig);
  ASSERT_OK(back);
  ASSERT_EQ(back->size(), 2u);
  EXPECT_LT((*back)[0].shape_class, (*back)[1].shape_class);  // sorted by class
  for (const cpu::TunedEntry& e : *back)
    if (e.shape_class == cpu::matmul_shape_class(100, 100, 100)) {
      EXPECT_EQ(e.blocking, (cpu::MatmulBlocking{96, 48, 256}));
      EXPECT_EQ(e.m, 100);
    }
  cpu::reload_matmul_tuning();
  auto tuned = cpu::tuned_blocking(120, 90, 128);  // same class as 100 x 100 x 100
  ASSERT_TRUE(tuned.has_value());
  EXPECT_EQ(*tuned, (cpu::MatmulBlocking{96, 48, 256}));
  EXPECT_EQ(cpu::matmul_blocking_for(cpu::matmul_best_isa(), 100, 100, 100), (cpu::MatmulBlocking{96, 48, 256}));
  EXPECT_EQ(cpu::matmul_blocking_for(cpu::matmul_best_isa(), 3000, 3000, 3000),
            cpu::matmul_default_blocking(cpu::matmul_best_isa()));
}

TEST(MatmulTuning, CorruptFilesAreIgnored) {
  CacheDir dir("corrupt");
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  const std::string path = *cpu::matmul_tuning_path(sig);
  const nlohmann::json sig_json = {{"cpu", sig.cpu}, {"isa", sig.isa}, {"volta", sig.version}};
  const std::vector<std::string> bad = {
      "",
      "{ not json",
      "[1, 2, 3]",
      nlohmann::json{{"format", "volta-matmul-tuning"}, {"version", 99}, {"signature", sig_json}, {"entries", nlohmann::json::array()}}.dump(),
      nlohmann::json{{"format", "volta-matmul-tuning"}, {"version", 1}, {"signature", sig_json}, {"entries", {{{"class", 3}}}}}.dump(),
      nlohmann::json{{"format", "volta-matmul-tuning"},
                     {"version", 1},
                     {"signature", sig_json},
                     {"entries", {{{"class", "m1_n1_k1"}, {"m", 1}, {"n", 1}, {"k", 1}, {"kc", -5}, {"mc", 1}, {"nc", 1}}}}}
          .dump(),
  };
  for (const std::string& text : bad) {
    write_text(path, text);
    EXPECT_FALSE(cpu::read_matmul_tuning(path, sig).is_ok()) << text;
    cpu::reload_matmul_tuning();
    EXPECT_FALSE(cpu::tuned_blocking(1, 1, 1).has_value()) << text;
    EXPECT_EQ(cpu::matmul_blocking_for(cpu::matmul_best_isa(), 1, 1, 1), cpu::matmul_default_blocking(cpu::matmul_best_isa()));
  }
  // The kernel still runs, with the defaults.
  std::vector<float> a(6, 1.0f), b(6, 2.0f), c(4);
  cpu::gemm(cpu::matmul_best_isa(), cpu::matmul_blocking_for(cpu::matmul_best_isa(), 2, 2, 3), {a.data(), 3, 1}, {b.data(), 2, 1},
            c.data(), 2, 2, 2, 3);
  EXPECT_EQ(c[0], 6.0f);
}

TEST(MatmulTuning, AnotherSignatureIsIgnored) {
  CacheDir dir("foreign");
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  cpu::CpuSignature other = sig;
  other.cpu = "Some Other CPU 9000";
  // Written under this machine's file name but signed by another CPU: ignored.
  const std::string path = *cpu::matmul_tuning_path(sig);
  ASSERT_OK(cpu::write_matmul_tuning(path, other, {entry(64, 64, 64, {96, 48, 256})}));
  EXPECT_ERROR_CONTAINS(cpu::read_matmul_tuning(path, sig), "signature");
  cpu::reload_matmul_tuning();
  EXPECT_FALSE(cpu::tuned_blocking(64, 64, 64).has_value());
  other = sig;
  other.version = "0.0.0-other";
  ASSERT_OK(cpu::write_matmul_tuning(path, other, {entry(64, 64, 64, {96, 48, 256})}));
  cpu::reload_matmul_tuning();
  EXPECT_FALSE(cpu::tuned_blocking(64, 64, 64).has_value());
  EXPECT_NE(sig.file_stem(), other.file_stem());
}

// The op kernel's bits with and without a tuned blocking for its class.
TEST(MatmulTuning, TunedBlockingGivesIdenticalBits) {
  CacheDir dir("bits");
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  n.type = {DType::f32, {150, 210}};
  Tensor a = Tensor::zeros(DType::f32, {150, 333}), b = Tensor::zeros(DType::f32, {333, 210});
  fill_normal(a, 3, 1, 0.0f, 1.0f);
  fill_normal(b, 3, 2, 0.0f, 1.0f);
  TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
  auto run = [&] {
    Tensor o = Tensor::zeros(DType::f32, {150, 210});
    TensorRef r{o.raw(), o.type()};
    EXPECT_TRUE(cpu::matmul(cpu::KernelArgs{n, in, r, {}}).is_ok());
    return o;
  };
  const Tensor with_default = run();
  for (cpu::MatmulBlocking bl : {cpu::MatmulBlocking{64, 24, 64}, cpu::MatmulBlocking{333, 300, 32}, cpu::MatmulBlocking{17, 5, 9}}) {
    cpu::set_tuned_entries({entry(150, 210, 333, bl)});
    ASSERT_EQ(cpu::tuned_blocking(150, 210, 333), bl);
    EXPECT_TRUE(run().bitwise_equal(with_default)) << bl.kc << " " << bl.mc << " " << bl.nc;
  }
}

TEST(MatmulTuning, CliTunesAndWritesTheCacheFile) {
  CacheDir dir("cli");
  std::string out, err;
  const int code = test::run_command("VOLTA_CACHE_DIR=" + dir.path() + " " + VOLTA_CLI_PATH +
                                         " tune matmul --dim 64 --runs 1 --warmup 0 --threads 1 --margin 0",
                                     &out, &err);
  ASSERT_EQ(code, 0) << out << err;
  EXPECT_NE(out.find("m64_n64_k64"), std::string::npos) << out;
  EXPECT_NE(out.find("wrote"), std::string::npos) << out;
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  const std::string path = *cpu::matmul_tuning_path(sig);
  ASSERT_TRUE(fs::exists(path)) << out;
  auto entries = cpu::read_matmul_tuning(path, sig);
  ASSERT_OK(entries);  // whether 64^3 kept a tuned choice depends on timings; the file is valid either way
  for (const cpu::TunedEntry& e : *entries) EXPECT_EQ(e.shape_class, "m64_n64_k64");
  // Bad usage is an error, not a crash.
  EXPECT_EQ(test::run_command(std::string(VOLTA_CLI_PATH) + " tune matmul --dim 0", &out, &err), 1);
  EXPECT_NE(test::run_command(std::string(VOLTA_CLI_PATH) + " tune matmul --shapes nonsense --no-save", &out, &err), 0);
  // A cache folder that cannot be made fails before the work (the whole tune ran first).
  EXPECT_EQ(test::run_command("VOLTA_CACHE_DIR=/dev/null " + std::string(VOLTA_CLI_PATH) + " tune matmul --dim 64 --runs 1", &out, &err), 1);
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "volta tune: error: cannot create /dev/null/matmul: Not a directory\n");
}

// Two tunes at once: each saves through its own temporary file, merging under a lock (one fixed
// temporary name made one of them fail to rename it, about one pair in 30).
TEST(MatmulTuning, TwoTunesAtOnceBothSave) {
  CacheDir dir("two");
  std::string out, err;
  const std::string tune = "VOLTA_CACHE_DIR=" + dir.path() + " " + VOLTA_CLI_PATH + " tune matmul --runs 1 --warmup 0 --threads 1 --margin 0";
  const int code = test::run_command("for i in 1 2 3 4 5 6 7 8; do " + tune + " --dim 16 > /dev/null & " + tune +
                                         " --dim 32 > /dev/null || exit 1; wait $! || exit 1; done",
                                     &out, &err);
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(err, "");
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  const std::string path = *cpu::matmul_tuning_path(sig);
  ASSERT_OK(cpu::read_matmul_tuning(path, sig));
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))  // no temporary left
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace volta
