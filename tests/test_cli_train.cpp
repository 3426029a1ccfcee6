// Runs `volta train` (and the global flags that training meets: threads, determinism, hash
// traces): logs, checkpoints, locks and every bad flag one clear line.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "test_util.h"
#include "train/lm.h"
#include "volta/checkpoint.h"

namespace volta {
namespace {

// A JSON-lines log without its timings (tokens_per_s, elapsed_s), which differ run to run.
std::string without_timings(const std::string& log) {
  std::istringstream lines(log);
  std::string line, out;
  while (std::getline(lines, line)) {
    auto j = nlohmann::ordered_json::parse(line);
    j.erase("tokens_per_s");
    j.erase("elapsed_s");
    out += j.dump() + "\n";
  }
  return out;
}

TEST(CliTrain, SpiralsLossFallsAndLogsAreIdenticalAcrossRuns) {
  std::string dir = ::testing::TempDir();
  std::string a = dir + "train_a_" + std::to_string(::getpid()) + ".jsonl";
  std::string b = dir + "train_b_" + std::to_string(::getpid()) + ".jsonl";
  Cli r1 = volta("train --recipe mlp-spirals --steps 300 --seed 1 --log " + a);
  Cli r2 = volta("train --recipe mlp-spirals --steps 300 --seed 1 --log " + b);
  ASSERT_EQ(r1.code, 0) << r1.err;
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(r1.out, r2.out);
  std::string log = test::read_file(a);
  EXPECT_EQ(without_timings(log), without_timings(test::read_file(b)));
  EXPECT_NE(without_timings(log), log);
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 300);
  std::istringstream lines(log);
  std::string line;
  std::vector<double> losses;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"].get<int64_t>(), static_cast<int64_t>(losses.size()) + 1);
    for (const char* key : {"train_loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"}) EXPECT_TRUE(j.contains(key)) << key;
    losses.push_back(j["train_loss"].get<double>());
  }
  EXPECT_LT(losses.back(), 0.3 * losses.front());
  EXPECT_NE(r1.out.find("accuracy"), std::string::npos);
  EXPECT_NE(r1.out.find("optimizer_state"), std::string::npos);
  std::remove(a.c_str());
  std::remove(b.c_str());
}

// The determinism level, from --deterministic (before or after the command) or
// VOLTA_DETERMINISTIC, is recorded in the plan report, every line of the training log and the
// checkpoint's metadata.
TEST(CliTrain, TheDeterminismLevelIsRecordedInTheLogTheCheckpointAndThePlan) {
  const std::string dir = ::testing::TempDir() + "det_" + std::to_string(::getpid());
  const std::string lm = "train --recipe shakespeare-char --layers 1 --heads 1 --channels 8 --context 8 --batch 2 --steps 2 "
                         "--eval-every 2 --eval-iters 1 --data " + test::source_path("data/tinyshakespeare.txt") + " --out ";
  for (const char* level : {"run-to-run", "strict"}) {
    const std::string out = dir + "_" + level;
    Cli r = std::string(level) == "strict" ? volta(lm + out) : volta("--deterministic " + std::string(level) + " " + lm + out);
    ASSERT_EQ(r.code, 0) << r.err;
    std::istringstream lines(test::read_file(out + "/log.jsonl"));
    std::string line;
    int n = 0;
    for (; std::getline(lines, line); ++n) EXPECT_EQ(nlohmann::json::parse(line)["determinism"], level) << line;
    EXPECT_EQ(n, 2);
    auto ck = io::load_checkpoint(out + "/last.safetensors");
    ASSERT_OK(ck);
    EXPECT_EQ(ck->metadata.at("determinism"), level);
    std::filesystem::remove_all(out);
  }
  Cli json = volta("inspect " + test::source_path("examples/mlp.vir") + " --json --deterministic off");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out)["determinism"], "off");
  Cli bad = volta("--deterministic sometimes inspect " + test::source_path("examples/mlp.vir"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.err, "volta: error: --deterministic: unknown determinism level 'sometimes' (expected strict, run-to-run or off)\n");
  Cli many = volta("--threads 100000 inspect " + test::source_path("examples/mlp.vir"));
  EXPECT_EQ(many.code, 2);
  EXPECT_EQ(many.err, "volta: error: --threads must be in [0, 1024], got 100000\n");
}

// --trace-hashes on any command; diff-trace finds two trainings at 1 and 2 threads identical and
// names the first node where a differently seeded one departs.
TEST(CliTrain, TraceHashesAndDiffTrace) {
  const std::string dir = ::testing::TempDir() + "trace_cli_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string train = " train --recipe mlp-spirals --steps 3 --seed ";
  const std::vector<std::pair<std::string, std::string>> runs = {{"--threads 1 --trace-hashes ", "/t1.jsonl"},
                                                                  {"--threads 2 --trace-values --trace-hashes ", "/t2.jsonl"}};
  for (const auto& [flags, file] : runs) {
    Cli r = volta(flags + dir + file + train + "1");
    ASSERT_EQ(r.code, 0) << r.err;
  }
  Cli r3 = volta("--trace-hashes " + dir + "/s2.jsonl" + train + "2");
  ASSERT_EQ(r3.code, 0) << r3.err;
  Cli same = volta("diff-trace " + dir + "/t1.jsonl " + dir + "/t2.jsonl");
  EXPECT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.out.rfind("traces identical: ", 0), 0u) << same.out;
  Cli differ = volta("diff-trace " + dir + "/t1.jsonl " + dir + "/s2.jsonl");
  EXPECT_EQ(differ.code, 1);
  EXPECT_EQ(differ.out.rfind("first difference after ", 0), 0u) << differ.out;
  EXPECT_NE(differ.err.find("volta diff-trace: error: the traces differ at run 0"), std::string::npos) << differ.err;
  Cli lonely = volta("--trace-values inspect " + test::source_path("examples/mlp.vir"));
  EXPECT_EQ(lonely.code, 2);
  EXPECT_EQ(lonely.err, "volta: error: --trace-values needs --trace-hashes FILE\n");
  Cli dirout = volta("--trace-hashes " + dir + " inspect " + test::source_path("examples/mlp.vir"));
  EXPECT_EQ(dirout.code, 1);
  EXPECT_NE(dirout.err.find("--trace-hashes"), std::string::npos) << dirout.err;
  // A command that fails before any run leaves an earlier trace whole; a file that is not a
  // trace (here a checkpoint the command itself reads) is refused and left as it was.
  const auto size = [](const std::string& f) { return std::filesystem::file_size(f); };
  const uintmax_t t1 = size(dir + "/t1.jsonl");
  Cli failed = volta("--trace-hashes " + dir + "/t1.jsonl train --recipe shakespeare-char --data " + dir + "/missing.txt");
  EXPECT_NE(failed.code, 0);
  EXPECT_EQ(size(dir + "/t1.jsonl"), t1);
  Cli saved = volta("train --recipe shakespeare-char --steps 1 --eval-every 1 --eval-iters 1 --channels 32 --layers 1 --data " +
                    test::source_path("data/tinyshakespeare.txt") + " --out " + dir + "/ck");
  ASSERT_EQ(saved.code, 0) << saved.err;
  const std::string ck = dir + "/ck/last.safetensors";
  const uintmax_t ck_size = size(ck);
  Cli clobber = volta("--trace-hashes " + ck + " generate --checkpoint " + ck + " --tokens 2");
  EXPECT_EQ(clobber.code, 1);
  EXPECT_NE(clobber.err.find("is a Volta checkpoint (safetensors), not a hash trace (refusing to overwrite it)"), std::string::npos)
      << clobber.err;
  EXPECT_EQ(size(ck), ck_size);
  // Nor does it go where the command writes a checkpoint that is not there yet (the trace's lines
  // went into the saved checkpoint), nor keep values beside a device (/dev/null.values).
  Cli into = volta("--trace-hashes " + dir + "/ck2/best.safetensors train --recipe shakespeare-char --steps 1 --eval-every 1 "
                   "--eval-iters 1 --channels 32 --layers 1 --data " + test::source_path("data/tinyshakespeare.txt") + " --out " +
                   dir + "/ck2");
  EXPECT_EQ(into.code, 1);
  EXPECT_NE(into.err.find("--trace-hashes: '" + dir + "/ck2/best.safetensors' is '" + dir +
                          "/ck2/best.safetensors', which this command reads or writes"), std::string::npos) << into.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck2/best.safetensors"));
  Cli device = volta("--trace-hashes /dev/null --trace-values inspect " + test::source_path("examples/mlp.vir"));
  EXPECT_EQ(device.code, 1);
  EXPECT_NE(device.err.find("--trace-values: '/dev/null' is a device or FIFO"), std::string::npos) << device.err;
  // A symlinked FILE is written through to its target; no temporary file stays behind.
  std::filesystem::create_symlink(dir + "/t1.jsonl", dir + "/link.jsonl");
  Cli linked = volta("--trace-hashes " + dir + "/link.jsonl" + train + "1");
  ASSERT_EQ(linked.code, 0) << linked.err;
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.jsonl"));
  EXPECT_EQ(test::read_file(dir + "/t1.jsonl"), test::read_file(dir + "/t2.jsonl"));  // the same run's trace again
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  std::filesystem::remove_all(dir);
}

// A closed stdout stops a training run with one line and exit 1 (SIGPIPE killed it, 141).
TEST(CliTrain, AClosedStdoutStopsTheRun) {
  const std::string dir = ::testing::TempDir() + "pipe_cli_" + std::to_string(::getpid());
  const std::string rc = dir + ".rc", err = dir + ".err";
  test::run_command("cd " + std::string(VOLTA_SOURCE_DIR) + " && { env -u VOLTA_DEVICE " + VOLTA_CLI_PATH +
                        " train --recipe shakespeare-char --steps 20000 --layers 1 --channels 8 --heads 1 --context 8 --batch 2 "
                        "--eval-every 1 --eval-iters 1 --data data/tinyshakespeare.txt --out " + dir + " 2>" + err +
                        "; echo $? > " + rc + "; } | true",
                    nullptr, nullptr);
  EXPECT_EQ(test::read_file(rc), "1\n");
  EXPECT_EQ(test::read_file(err).rfind("volta train: error: cannot write to stdout", 0), 0u) << test::read_file(err);
  const std::string log = test::read_file(dir + "/log.jsonl");
  EXPECT_LT(std::count(log.begin(), log.end(), '\n'), 20000) << "the run went on";
  std::filesystem::remove_all(dir);
  std::remove(rc.c_str());
  std::remove(err.c_str());
}

// A thread count the system cannot start is one line naming --threads, exit 1 (an uncaught
// std::system_error gave "internal error", exit 3, and left the pool a slot no worker answered).
TEST(CliThreads, ThreadsTheSystemRefusesAreAnError) {
#ifdef VOLTA_SANITIZE_BUILD
  GTEST_SKIP() << "the address-space limit leaves AddressSanitizer no room for its shadow memory";
#endif
  std::string out, err;
  const int code = test::run_command("cd " + std::string(VOLTA_SOURCE_DIR) + " && ulimit -s 8192 && ulimit -v 2000000 && " + VOLTA_CLI_PATH +
                                         " --threads 1024 inspect examples/gpt_block.vir", &out, &err);
  EXPECT_EQ(code, 1) << err;
  EXPECT_EQ(err.rfind("volta: error: --threads 1024: the system refused a worker thread: ", 0), 0u) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(out, "");
}

// Two runs never write one log: the second is refused while the first holds it (both ran,
// interleaving their lines, or a spirals --log truncated a TinyLM run's log under it).
TEST(CliTrain, ALogAnotherRunWritesIsRefused) {
  const std::string dir = ::testing::TempDir() + "log_lock_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string log = dir + "/log.jsonl", pid = dir + "/pid", rc = dir + "/rc", err = dir + "/err";
  const std::string spirals = std::string(" train --recipe mlp-spirals --log ") + log;
  // The first run is bounded (timeout) and killed on the way out, whatever happens in between.
  test::run_command("cd " + dir + " && { timeout 120 " + VOLTA_CLI_PATH + spirals + " --steps 100000000 >/dev/null 2>&1 & echo $! > " +
                        pid + "; } && trap 'kill $(cat " + pid + ") 2>/dev/null' EXIT; for i in $(seq 400); do [ -s " + log +
                        " ] && break; sleep 0.05; done; timeout 60 " + VOLTA_CLI_PATH + spirals + " --steps 3 >/dev/null 2>" + err +
                        "; echo $? > " + rc,
                    nullptr, nullptr);
  EXPECT_EQ(test::read_file(rc), "1\n");
  EXPECT_EQ(test::read_file(err), "volta train: error: --log: another run is writing here: '" + log + "' is locked\n");
  std::filesystem::remove_all(dir);
}

// run-to-run lets the weight gradients run split-K: the same bits every run at 2 threads, the
// strict bits at 1 thread, other bits than strict at 2 (diff-trace names a matmul first), and the
// training's plan summary says so.
TEST(CliTrain, RunToRunSplitsTheWeightGradientsAndRepeats) {
  const std::string dir = ::testing::TempDir() + "rr_cli_" + std::to_string(::getpid());
  const std::string lm = " train --recipe shakespeare-char --layers 1 --heads 2 --channels 32 --context 32 --batch 8 "
                         "--steps 3 --eval-every 3 --eval-iters 1 --data " + test::source_path("data/tinyshakespeare.txt") +
                         " --out " + dir;
  std::map<std::string, std::map<std::string, Tensor>> params;
  for (const char* run : {"strict-1", "strict-2", "run-to-run-1", "run-to-run-2", "run-to-run-2b"}) {
    const std::string name = run, level = name.substr(0, name.rfind('-')), threads = name.substr(name.rfind('-') + 1, 1);
    Cli r = volta("--deterministic " + level + " --threads " + threads + " --trace-hashes " + dir + "_" + name + ".jsonl" +
                  lm + "/" + name);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("cpu.split-k (run-to-run)") != std::string::npos, level == "run-to-run") << r.out;
    auto ck = io::load_checkpoint(dir + "/" + name + "/last.safetensors");
    ASSERT_OK(ck);
    params[name] = ck->tensors;
  }
  auto same = [&](const std::string& a, const std::string& b) {
    for (const auto& [name, t] : params[a])
      if (!t.bitwise_equal(params[b].at(name))) return false;
    return true;
  };
  EXPECT_TRUE(same("strict-1", "strict-2"));
  EXPECT_TRUE(same("run-to-run-1", "strict-1"));
  EXPECT_TRUE(same("run-to-run-2", "run-to-run-2b"));
  EXPECT_FALSE(same("run-to-run-2", "strict-2"));
  Cli differ = volta("diff-trace " + dir + "_strict-2.jsonl " + dir + "_run-to-run-2.jsonl");
  EXPECT_EQ(differ.code, 1);
  EXPECT_NE(differ.out.find(" (matmul), f32["), std::string::npos) << differ.out;
  std::filesystem::remove_all(dir);
  for (const char* run : {"strict-1", "strict-2", "run-to-run-1", "run-to-run-2", "run-to-run-2b"})
    std::filesystem::remove(dir + "_" + run + ".jsonl");
}

TEST(CliTrain, BadFlagsAreOneLineErrors) {
  const std::vector<BadCase> cases = {
      {"train --recipe mlp-spirals --steps 3 --out x", 1, "--out is a shakespeare-char flag; --recipe mlp-spirals does not use it"},
      {"train --recipe shakespeare-char --log x.jsonl", 1, "--log is a mlp-spirals flag; --recipe shakespeare-char does not use it"},
      {"train --recipe mlp-spirals --arch llama", 1, "--arch is a shakespeare-char flag"},
      {"train --recipe nope", 1, "--recipe: unknown recipe 'nope' (available: mlp-spirals, shakespeare-char)"},
      {"train --recipe mlp-spirals --lr nan --steps 1", 2, "--lr: 'nan' is not a finite number"},
      {"train --recipe mlp-spirals --loss hinge", 1, "--loss must be ce or mse"},
      {"train --recipe mlp-spirals --optimizer lion", 1, "unknown optimizer 'lion'"},
      {"train --recipe mlp-spirals --numerics maybe", 1, "unknown numerics policy 'maybe'"},
      {"train --recipe mlp-spirals --batch 0", 1, "--batch must be in [1, 1000000]"},
      {"train --recipe mlp-spirals --schedule cosine --warmup 50 --steps 10", 1, "decay steps (10) must be greater"},
      {"train --recipe mlp-spirals --steps 2 --log /no/such/dir/log.jsonl", 1, "cannot write log '/no/such/dir/log.jsonl'"},
      {"train --steps 3", 2, "--recipe is required"},
      // The flag parser saturates a huge number to INT64_MAX: bounded, never a run of years or
      // an overflow of warmup + runs.
      {"train --recipe mlp-spirals --steps 99999999999999999999", 2, "--steps: '99999999999999999999' is out of the 64-bit range"},
      {"bench matmul --group decode --runs 1 --warmup 99999999999999999999", 2, "--warmup: '99999999999999999999' is out of the 64-bit range"},
      {"bench train --runs 99999999999999999999", 2, "--runs: '99999999999999999999' is out of the 64-bit range"},
      {"bench train --steps 0", 1, "--steps must be in [1, 100000], got 0"},
      {"bench matmul --group decode --profile-summary", 1, "--profile: bench matmul times the kernel outside a plan"},
      {"bench matmul --group bogus", 1, "--group must be all, square, tiny-gpt, decode, big-gpt or train-bwd, got 'bogus'"},
      // The flag parser's lenient conversions are refused: an empty value (which became 0), a
      // negative unsigned (which wrapped), a non-finite float, a negative batch (which fell back
      // to the recipe's).
      {"train --recipe mlp-spirals --steps ''", 2, "--steps: an empty value is not allowed"},
      {"train --recipe mlp-spirals --steps 1 --seed -1", 2, "--seed: '-1' is negative"},
      {"tune matmul --margin nan", 2, "--margin: 'nan' is not a finite number"},
      {"train --recipe mlp-spirals --steps 1 --lr inf", 2, "--lr: 'inf' is not a finite number"},
      {"train --recipe mlp-spirals --steps 1 --seed 18446744073709551616", 2, "--seed: '18446744073709551616' is out of the 64-bit range"},
      {"train --recipe mlp-spirals --steps -9223372036854775809", 2, "--steps: '-9223372036854775809' is out of the 64-bit range"},
      {"bench train --batch -1", 1, "--batch must be >= 1, got -1"},
      {"bench train --disable-pass no_such_pass", 1, "--disable-pass: unknown pass 'no_such_pass'"},
      {"bench train --compare-disable-pass no_such_pass", 1, "--compare-disable-pass: unknown pass 'no_such_pass'"},
      {"bench train --compare-disable-pass fuse_elementwise --profile-summary", 1, "profile one at a time"},
      {"bench infer --compare-disable-pass no_such_pass", 1, "--compare-disable-pass: unknown pass 'no_such_pass'"},
      {"bench infer --disable-pass no_such_pass", 1, "--disable-pass: unknown pass 'no_such_pass'"},
      // The model variant's flags.
      {"train --recipe shakespeare-char --out /tmp/x --arch mamba", 1, "unknown model architecture 'mamba' (available: gpt, llama)"},
      {"train --recipe shakespeare-char --out /tmp/x --kv-heads 2", 1, "--kv-heads needs --arch llama"},
      {"train --recipe shakespeare-char --out /tmp/x --arch llama --kv-heads 3", 1, "model kv_heads must divide heads (4), got 3"},
      {"train --recipe shakespeare-char --out /tmp/x --arch llama --kv-heads 0", 1, "--kv-heads must be >= 1, got 0"},
      {"train --recipe shakespeare-char --out /tmp/x --arch llama --ffn 0", 1, "--ffn must be >= 1, got 0"},
      {"train --recipe shakespeare-char --out /tmp/x --arch llama --bias", 1, "model bias is a gpt option"},
      {"train --recipe shakespeare-char --out /tmp/x --arch llama --rope-theta 1e300", 1,
       "model rope_theta must be in (1, 1e12], got 1e+300"},
      {"train --recipe shakespeare-char --out /tmp/x --arch llama --heads 8 --channels 24", 1,
       "the llama variant's head width (channels / heads) must be even for rope, got 3"},
  };
  expect_bad_cases(cases);
}

}  // namespace
}  // namespace volta
