// Runs the `volta` binary on the TinyLM jobs: train, resume, generate, eval and inspect, for
// both model variants, and their bad inputs.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
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

// One small shakespeare-char run shared by the TinyLM CLI tests.
class CliLM : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = ::testing::TempDir() + "cli_lm_" + std::to_string(::getpid());
    result_ = volta("train --recipe shakespeare-char --layers 2 --heads 2 --channels 32 --context 32 --batch 8 --steps 60 "
                    "--eval-every 30 --eval-iters 4 --warmup 5 --lr 3e-3 --decay-steps 60 --seed 2 --out " + dir_);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
  static Cli result_;
};
std::string CliLM::dir_;
Cli CliLM::result_;

// The llama variant end to end: train, resume bit for bit, generate with and without the KV
// cache, evaluate, inspect.
TEST(CliLlama, TrainsResumesGeneratesAndKeepsItsSettings) {
  const std::string dir = ::testing::TempDir() + "cli_llama_" + std::to_string(::getpid());
  const std::string flags = "train --recipe shakespeare-char --arch llama --layers 2 --heads 4 --channels 32 --context 32 "
                            "--batch 8 --eval-every 15 --eval-iters 2 --warmup 5 --lr 3e-3 --decay-steps 30 --seed 2 ";
  Cli full = volta(flags + "--steps 30 --out " + dir + "/full");
  ASSERT_EQ(full.code, 0) << full.err;
  EXPECT_NE(full.out.find("llama (kv heads 2, ffn 96)"), std::string::npos) << full.out;
  Cli half = volta(flags + "--steps 15 --out " + dir + "/half");
  ASSERT_EQ(half.code, 0) << half.err;
  Cli rest = volta(flags + "--steps 30 --out " + dir + "/half --resume " + dir + "/half/last.safetensors");
  ASSERT_EQ(rest.code, 0) << rest.err;
  EXPECT_EQ(test::read_file(dir + "/full/last.safetensors"), test::read_file(dir + "/half/last.safetensors"));
  Cli changed = volta(flags + "--steps 30 --kv-heads 4 --out " + dir + "/half --resume " + dir + "/half/last.safetensors");
  EXPECT_EQ(changed.code, 1);
  EXPECT_NE(changed.err.find("--kv-heads 4 differs from the checkpoint's 2 "), std::string::npos) << changed.err;

  const std::string ck = " --checkpoint " + dir + "/full/last.safetensors";
  Cli greedy = volta("generate" + ck + " --prompt 'ROMEO:' --tokens 50 --temperature 0");
  Cli greedy_nc = volta("generate" + ck + " --prompt 'ROMEO:' --tokens 50 --temperature 0 --no-kv-cache");
  ASSERT_EQ(greedy.code, 0) << greedy.err;
  EXPECT_EQ(greedy.out, greedy_nc.out);
  EXPECT_EQ(greedy.out.size(), 6u + 50u + 1u);
  Cli e = volta("eval" + ck + " --eval-iters 2");
  ASSERT_EQ(e.code, 0) << e.err;
  Cli i = volta("inspect" + ck.substr(std::string(" --checkpoint").size()) + " --json");
  ASSERT_EQ(i.code, 0) << i.err;
  const auto doc = nlohmann::json::parse(i.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_EQ(doc["model"]["arch"], "llama");
  EXPECT_EQ(doc["model"]["kv_heads"], 2);
  std::filesystem::remove_all(dir);
}

TEST_F(CliLM, TrainingLossFallsAndWritesLogAndCheckpoints) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/last.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/best.safetensors"));
  std::istringstream lines(test::read_file(dir_ + "/log.jsonl"));
  std::string line;
  std::vector<double> losses;
  int evals = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"step", "train_loss", "lr", "grad_norm", "tokens_per_s", "elapsed_s"}) EXPECT_TRUE(j.contains(key)) << key;
    evals += j.contains("val_loss");
    losses.push_back(j["train_loss"].get<double>());
  }
  ASSERT_EQ(losses.size(), 60u);
  EXPECT_EQ(evals, 2);
  double head = 0, tail = 0;
  for (int i = 0; i < 5; ++i) head += losses[static_cast<size_t>(i)] / 5, tail += losses[losses.size() - 1 - static_cast<size_t>(i)] / 5;
  EXPECT_LT(tail, head - 0.5) << "first steps " << head << ", last steps " << tail;
}

TEST_F(CliLM, GenerateIsSeededAndTheSameWithAndWithoutKVCache) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  const std::string ck = " --checkpoint " + dir_ + "/last.safetensors";
  Cli greedy = volta("generate" + ck + " --prompt 'ROMEO:' --tokens 80 --temperature 0");
  Cli greedy_nc = volta("generate" + ck + " --prompt 'ROMEO:' --tokens 80 --temperature 0 --no-kv-cache");
  ASSERT_EQ(greedy.code, 0) << greedy.err;
  EXPECT_EQ(greedy.out, greedy_nc.out);
  EXPECT_EQ(greedy.out.rfind("ROMEO:", 0), 0u) << greedy.out;
  EXPECT_EQ(greedy.out.size(), 6u + 80u + 1u);
  Cli s1 = volta("generate" + ck + " --tokens 50 --seed 4 --batch 3 --top-k 10");
  Cli s2 = volta("generate" + ck + " --tokens 50 --seed 4 --batch 3 --top-k 10");
  Cli s3 = volta("generate" + ck + " --tokens 50 --seed 5 --batch 3 --top-k 10");
  ASSERT_EQ(s1.code, 0) << s1.err;
  EXPECT_EQ(s1.out, s2.out);
  EXPECT_NE(s1.out, s3.out);
  EXPECT_EQ(s1.err, "");
  // Long prompts are cropped to the context, and say so on stderr.
  Cli longp = volta("generate" + ck + " --prompt '" + std::string(40, 'a') + "' --tokens 5 --temperature 0");
  ASSERT_EQ(longp.code, 0) << longp.err;
  EXPECT_NE(longp.err.find("sees only the last 32"), std::string::npos) << longp.err;
}

// --weights bf16 / f16: generation and evaluation read the matmul weights at half the bytes; the
// loss moves by rounding only, and a bad value is a one-line error.
TEST_F(CliLM, HalfWeightsGenerateAndEvaluate) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  const std::string ck = " --checkpoint " + dir_ + "/last.safetensors";
  auto loss_of = [](const std::string& out) { return std::stod(out.substr(out.find("val loss ") + 9)); };
  Cli f32 = volta("eval" + ck + " --eval-iters 3");
  ASSERT_EQ(f32.code, 0) << f32.err;
  for (const char* w : {"bf16", "f16"}) {
    Cli e = volta("eval" + ck + " --eval-iters 3 --weights " + w);
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_NEAR(loss_of(e.out), loss_of(f32.out), 0.02) << w;
    Cli g = volta("generate" + ck + " --prompt 'ROMEO:' --tokens 40 --temperature 0 --weights " + std::string(w));
    ASSERT_EQ(g.code, 0) << g.err;
    EXPECT_EQ(g.out.size(), 6u + 40u + 1u);
  }
  Cli bad = volta("generate" + ck + " --weights f8");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("--weights must be f32, bf16 or f16, got 'f8'"), std::string::npos) << bad.err;

  // An inference checkpoint with bf16 matmul weights: a quarter of the training checkpoint's
  // bytes (no optimizer state, half the weight bytes); read as stored, it gives what
  // --weights bf16 gives on the original, and it cannot be resumed.
  const std::string inf = dir_ + "/bf16.safetensors";
  Cli ex = volta("export" + ck + " --safetensors " + inf + " --weights bf16");
  ASSERT_EQ(ex.code, 0) << ex.err;
  EXPECT_NE(ex.out.find("matmul weights bf16, no optimizer state"), std::string::npos) << ex.out;
  EXPECT_LT(std::filesystem::file_size(inf) * 4, std::filesystem::file_size(dir_ + "/last.safetensors"));
  const std::string greedy = " --prompt 'ROMEO:' --tokens 40 --temperature 0";
  EXPECT_EQ(volta("generate --checkpoint " + inf + greedy).out, volta("generate" + ck + greedy + " --weights bf16").out);
  EXPECT_EQ(volta("eval --checkpoint " + inf + " --eval-iters 3").out, volta("eval" + ck + " --eval-iters 3 --weights bf16").out);
  Cli resume = volta("train --recipe shakespeare-char --resume " + inf + " --out " + dir_ + "/resumed");
  EXPECT_EQ(resume.code, 1);
  EXPECT_NE(resume.err.find("holds no optimizer state"), std::string::npos) << resume.err;
  Cli both = volta("export" + ck + " --safetensors " + inf + " --onnx " + dir_ + "/m.onnx");
  EXPECT_NE(both.err.find("export needs one of --onnx FILE and --safetensors FILE"), std::string::npos) << both.err;
  Cli onnx_half = volta("export" + ck + " --onnx " + dir_ + "/m.onnx --weights bf16");
  EXPECT_NE(onnx_half.err.find("--weights applies to --safetensors"), std::string::npos) << onnx_half.err;
}

TEST_F(CliLM, EvalAndInspectReadTheCheckpoint) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  Cli e = volta("eval --checkpoint " + dir_ + "/last.safetensors --eval-iters 3");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("val loss"), std::string::npos);
  Cli i = volta("inspect " + dir_ + "/last.safetensors");
  ASSERT_EQ(i.code, 0) << i.err;
  for (const char* needle : {"step 60", "\"layers\":2", "wte", "training step", "adamw updates of the state in place",
                             "optimizer_state", "grad", "inference"})
    EXPECT_NE(i.out.find(needle), std::string::npos) << needle;
  // --json: one object with the checkpoint, the params and both plans.
  Cli j = volta("inspect " + dir_ + "/last.safetensors --json");
  ASSERT_EQ(j.code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.out.substr(0, 200);
  EXPECT_EQ(doc["checkpoint"]["step"], 60);
  EXPECT_EQ(doc["model"]["layers"], 2);
  EXPECT_GT(doc["params"].size(), 0u);
  EXPECT_EQ(doc["training_step"]["optimizer_updates"], doc["params"].size());
  EXPECT_GT(doc["training_step"]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_GT(doc["inference"]["peak_bytes"].get<int64_t>(), 0);
}

TEST_F(CliLM, BadInputsAreOneLineErrors) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  const std::string ck = " --checkpoint " + dir_ + "/last.safetensors";
  std::string bad_dir = dir_ + "/bad";
  std::filesystem::create_directories(bad_dir);
  std::ofstream(bad_dir + "/empty.txt");
  std::ofstream(bad_dir + "/small.txt") << "too short";
  std::ofstream(bad_dir + "/array.npy", std::ios::binary) << "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }";
  std::filesystem::remove(bad_dir + "/fifo");
  ASSERT_EQ(::mkfifo((bad_dir + "/fifo").c_str(), 0600), 0);
  std::string bytes = test::read_file(dir_ + "/last.safetensors");
  std::ofstream(bad_dir + "/truncated.safetensors", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::filesystem::create_directories(bad_dir + "/q/best.safetensors");  // a folder where a checkpoint goes
  {  // a checkpoint Volta would not write: one weight nan (made elsewhere, or changed)
    auto nan_ck = io::load_checkpoint(dir_ + "/last.safetensors");
    ASSERT_OK(nan_ck);
    nan_ck->tensors.at("wte").data<float>()[3] = std::nanf("");
    ASSERT_OK(io::save_checkpoint(*nan_ck, bad_dir + "/nan.safetensors"));
    nan_ck->tensors.at("wte").data<float>()[3] = 0.0f;  // and one past f16's range: finite in f32
    nan_ck->tensors.at("h0.attn.wo").data<float>()[5] = 1e6f;
    ASSERT_OK(io::save_checkpoint(*nan_ck, bad_dir + "/big.safetensors"));
    Tensor& wte = nan_ck->tensors.at("wte");  // finite, but every logit overflows
    std::fill_n(wte.data<float>(), wte.numel(), 3e38f);
    ASSERT_OK(io::save_checkpoint(*nan_ck, bad_dir + "/huge.safetensors"));
  }
  const std::vector<BadCase> cases = {
      {"generate" + ck + " --tokens 0", 1, "--tokens must be in [1, 1000000]"},
      {"export --checkpoint " + bad_dir + "/big.safetensors --safetensors " + bad_dir + "/f16.safetensors --weights f16", 1,
       "--weights f16: param 'h0.attn.wo' element 5 does not fit f16 (it overflows to infinity); '" + bad_dir + "/f16.safetensors' was not written"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/q --overwrite --steps 2", 1,
       "--out: '" + bad_dir + "/q/best.safetensors' is a directory, not a file to write"},
      {"generate --checkpoint " + bad_dir + "/huge.safetensors --tokens 2", 1,
       "generate: the logits of sequence 0 at token 1 hold nan: the model's arithmetic overflows"},
      {"eval --checkpoint " + bad_dir + "/huge.safetensors --eval-iters 1 --data data/tinyshakespeare.txt", 1,
       "eval: the val loss of '" + bad_dir + "/huge.safetensors' is nan: the model's arithmetic overflows"},
      {"generate --checkpoint " + bad_dir + "/nan.safetensors --tokens 2", 1,
       bad_dir + "/nan.safetensors: param 'wte' element 3 is nan or inf: a diverged or damaged model (Volta refuses to save one)"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/n --resume " + bad_dir + "/nan.safetensors --steps 70", 1,
       "param 'wte' element 3 is nan or inf"},
      {"generate" + ck + " --top-k 1000", 1, "--top-k must be in [0, 65]"},
      {"generate" + ck + " --temperature -1", 1, "--temperature must be finite and >= 0"},
      {"generate" + ck + " --prompt 'caf\xc3\xa9'", 1, "--prompt: characters not in the vocabulary: byte 0xc3, byte 0xa9"},
      {"generate --checkpoint " + bad_dir + "/truncated.safetensors", 1, "truncated.safetensors"},
      {"generate --checkpoint " + bad_dir + "/none.safetensors", 1, "cannot open"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --data " + bad_dir + "/missing.txt", 1, "--data: cannot open"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --data " + bad_dir + "/empty.txt", 1, "is empty"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --data " + bad_dir + "/small.txt", 1, "too few"},
      {"train --recipe shakespeare-char --steps 5", 1, "--out DIR is required"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --channels 30 --heads 4", 1, "divisible by heads"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --resume " + dir_ + "/last.safetensors --lr 0.5", 1,
       "--lr 0.5 differs from the checkpoint's 0.003 "},
      // a rate off in its eighth digit is still another rate (six decimals printed both as 0.003000)
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --resume " + dir_ + "/last.safetensors --lr 0.0030000001", 1,
       "--lr 0.0030000001 differs from the checkpoint's 0.003 "},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --resume " + dir_ + "/last.safetensors --optimizer sgd", 1,
       "--optimizer sgd differs from the checkpoint's adamw "},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --resume " + dir_ + "/last.safetensors --momentum 0.5", 1,
       "--momentum 0.5 differs from the checkpoint's 0 "},
      // found before the work, not after it (the text was printed, then the profile failed)
      {"generate" + ck + " --tokens 2 --profile " + bad_dir + "/nodir/p.json", 1,
       "--profile: '" + bad_dir + "/nodir/p.json': there is no directory '" + bad_dir + "/nodir'"},
      {"export" + ck + " --onnx " + bad_dir + "/nodir/m.onnx", 1, "there is no directory '" + bad_dir + "/nodir'"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --data " + bad_dir + "/array.npy", 1,
       "is a NumPy .npy file, not a text corpus"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --data " + dir_ + "/last.safetensors", 1,
       "--data: '" + dir_ + "/last.safetensors' is a Volta checkpoint (safetensors), not a text corpus"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --lr 1e308", 1, "learning rate 1e+308 overflows the warm-up schedule (100 steps)"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --resume " + dir_ + "/last.safetensors --steps 10", 1,
       "--steps 10 is below the checkpoint's step 60"},
      {"eval" + ck + " --data " + bad_dir + "/small.txt", 1, "too few"},
      {"eval" + ck + " --eval-iters 1000000000", 1, "--eval-iters must be in [1, 100000], got 1000000000"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --eval-iters 1000000000", 1, "--eval-iters must be in [1, 100000]"},
      {"export" + ck + " --onnx " + dir_ + "/./last.safetensors", 1, "--onnx: '" + dir_ + "/./last.safetensors' is '" + dir_ + "/last.safetensors', which this command reads or writes (refusing to overwrite it)"},
      {"generate" + ck + " --tokens 5 > /dev/full", 1, "cannot write to stdout"},
      {"--memory-limit 200K generate" + ck + " --batch 64 --tokens 2", 1, "but the memory limit is 200.0 KiB"},
      {"generate" + ck + " --tokens 2 --profile " + dir_ + "/last.safetensors", 1,
       "--profile: '" + dir_ + "/last.safetensors' is '" + dir_ + "/last.safetensors', which this command reads or writes"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/o --steps 2 --data " + bad_dir + "/small.txt --profile " + bad_dir + "/small.txt", 1,
       "which this command reads or writes (refusing to overwrite it)"},
      {"train --recipe shakespeare-char --out " + bad_dir + "/p --steps 2 --profile " + bad_dir + "/p/last.safetensors", 1,
       "which this command reads or writes"},
      {"train --recipe mlp-spirals --steps 2 --log " + bad_dir + "/fifo", 1, "log: '" + bad_dir + "/fifo' is a FIFO that nothing reads"},
      {"train --recipe mlp-spirals --steps 2 --log " + dir_ + "/last.safetensors", 1,
       "log: '" + dir_ + "/last.safetensors' exists and is a Volta checkpoint (safetensors), not the JSON this flag writes"},
      {"export" + ck + " --onnx " + bad_dir + "/small.txt", 1, "--onnx: '" + bad_dir + "/small.txt' exists and is a text file, not an ONNX model"},
      {"train --recipe mlp-spirals --steps 2 --profile " + bad_dir + "/fifo", 1, "--profile: '" + bad_dir + "/fifo' is a FIFO that nothing reads"},
      {"tune matmul --no-save --dim 16 --runs 1 --warmup 99999999999999999999", 2, "--warmup: '99999999999999999999' is out of the 64-bit range"},
      {"--memory-limit 200K train --recipe shakespeare-char --out " + bad_dir + "/o --steps 2", 1, "but the memory limit is 200.0 KiB"},
      {"inspect " + dir_ + "/last.safetensors > /dev/full", 1, "cannot write to stdout"},
  };
  expect_bad_cases(cases);
  EXPECT_EQ(test::read_file(dir_ + "/last.safetensors"), bytes);  // the refused export left it alone
}

// A second run into a folder that holds a run's checkpoints is refused, before it writes
// anything, unless it resumes from one of them or is told to start over (--overwrite).
// A file larger than its header (or the input's type) says is refused from its size before it
// is read: under a 1 GB address-space limit, 3 GB files (sparse) that were read whole first and
// ran out of memory.
TEST_F(CliLM, FilesLargerThanTheirHeadersAreRefusedBeforeTheyAreRead) {
#ifdef VOLTA_SANITIZE_BUILD
  GTEST_SKIP() << "the address-space limit leaves AddressSanitizer no room for its shadow memory";
#endif
  ASSERT_EQ(result_.code, 0) << result_.err;
  const std::string dir = dir_ + "_big";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(dir_ + "/last.safetensors", dir + "/grown.safetensors", std::filesystem::copy_options::overwrite_existing);
  const uint64_t size = std::filesystem::file_size(dir + "/grown.safetensors");
  std::filesystem::resize_file(dir + "/grown.safetensors", 3'000'000'000);
  std::ofstream(dir + "/neg.vir") << "graph g {\n  %x: f32[1] = input()\n  %y: f32[1] = neg(%x)\n  return %y\n}\n";
  std::ofstream(dir + "/big.bin").close();
  std::filesystem::resize_file(dir + "/big.bin", 3'000'000'000);
  const auto run = [&](const std::string& args) {
    Cli r;
    r.code = test::run_command("cd " + std::string(VOLTA_SOURCE_DIR) + " && ulimit -v 1000000 && env -u VOLTA_DEVICE " + VOLTA_CLI_PATH +
                                   " " + args, &r.out, &r.err);
    return r;
  };
  Cli ck = run("--threads 1 eval --checkpoint " + dir + "/grown.safetensors --eval-iters 1");  // a many-core host's stacks fit too
  EXPECT_EQ(ck.code, 1);
  uint64_t header = 0;
  std::memcpy(&header, test::read_file(dir_ + "/last.safetensors").data(), 8);
  EXPECT_EQ(ck.err, "volta eval: error: " + dir + "/grown.safetensors: data section is " + std::to_string(3'000'000'000 - 8 - header) +
                        " bytes but the tensors cover " + std::to_string(size - 8 - header) + "\n");
  Cli raw = run("--threads 1 run " + dir + "/neg.vir --input x=" + dir + "/big.bin");
  EXPECT_EQ(raw.code, 1);
  EXPECT_EQ(raw.err, "volta run: error: --input x: '" + dir + "/big.bin' has 3000000000 bytes but f32[1] needs 4 (raw little-endian)\n");
  std::filesystem::remove_all(dir);
}

TEST_F(CliLM, ASecondRunIntoTheSameOutKeepsTheFirstRunsCheckpoints) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  const std::string last = test::read_file(dir_ + "/last.safetensors"), best = test::read_file(dir_ + "/best.safetensors"),
                    log = test::read_file(dir_ + "/log.jsonl");
  const std::string tiny = "train --recipe shakespeare-char --layers 1 --heads 2 --channels 16 --context 16 --batch 2 --steps 2 "
                           "--eval-iters 1 ",
                    small = tiny + "--eval-every 1 ";
  Cli again = volta(small + "--out " + dir_);
  EXPECT_EQ(again.code, 1);
  EXPECT_EQ(again.err, "volta train: error: --out " + dir_ + ": holds last.safetensors of an earlier run; continue it with --resume " +
                           dir_ + "/last.safetensors, or start over in it with --overwrite (its checkpoints are replaced)\n");
  const std::string other = dir_ + "_other";
  Cli elsewhere = volta(small + "--out " + other);  // a run of its own, then resumed into dir_ from there
  ASSERT_EQ(elsewhere.code, 0) << elsewhere.err;
  Cli into = volta("train --recipe shakespeare-char --steps 3 --resume " + other + "/last.safetensors --out " + dir_);
  EXPECT_EQ(into.code, 1);
  EXPECT_NE(into.err.find("holds last.safetensors of an earlier run"), std::string::npos) << into.err;
  EXPECT_EQ(test::read_file(dir_ + "/last.safetensors"), last);
  EXPECT_EQ(test::read_file(dir_ + "/best.safetensors"), best);
  EXPECT_EQ(test::read_file(dir_ + "/log.jsonl"), log);
  // Resuming from the folder's own last checkpoint continues it (here without evaluating: past
  // its best); --overwrite starts over in it.
  Cli resumed = volta("train --recipe shakespeare-char --steps 3 --eval-every 10 --resume " + other + "/last.safetensors --out " + other);
  EXPECT_EQ(resumed.code, 0) << resumed.err;
  const std::string before = test::read_file(other + "/last.safetensors"),
                    best_before = test::read_file(other + "/best.safetensors"), log_before = test::read_file(other + "/log.jsonl");
  // From the best, behind that last, it would roll the run back (its log cut to the best's step,
  // its last replaced): refused, the files as they were.
  Cli back = volta("train --recipe shakespeare-char --steps 3 --resume " + other + "/best.safetensors --out " + other);
  EXPECT_EQ(back.code, 1);
  EXPECT_NE(back.err.find("goes on past its best, to " + other + "/last.safetensors"), std::string::npos) << back.err;
  EXPECT_EQ(test::read_file(other + "/last.safetensors"), before);
  EXPECT_EQ(test::read_file(other + "/log.jsonl"), log_before);
  // With --overwrite it starts over from that best: the best stays (it is the new run's best so
  // far), the later last goes at the first save, the log keeps its lines up to the best's step.
  const std::string back_dir = dir_ + "_back";
  std::filesystem::copy(other, back_dir, std::filesystem::copy_options::recursive);
  std::filesystem::remove(back_dir + "/.lock");
  auto best_meta = io::load_checkpoint_metadata(back_dir + "/best.safetensors");
  ASSERT_OK(best_meta);
  const int64_t best_step = nlohmann::json::parse(best_meta->at("train_state"))["step"].get<int64_t>();
  ASSERT_LT(best_step, 3);
  Cli over_best = volta("train --recipe shakespeare-char --steps 3 --eval-every 10 --overwrite --resume " + back_dir +
                        "/best.safetensors --out " + back_dir);
  EXPECT_EQ(over_best.code, 0) << over_best.err;
  EXPECT_EQ(test::read_file(back_dir + "/best.safetensors"), best_before);
  const std::string log_back = test::read_file(back_dir + "/log.jsonl");
  EXPECT_EQ(log_back.rfind("{\"step\":1,", 0), 0u) << log_back;
  EXPECT_EQ(std::count(log_back.begin(), log_back.end(), '\n'), 3) << log_back;  // steps 1..best, then best+1..3
  std::filesystem::remove_all(back_dir);
  // Starting over replaces the earlier run at the new run's first save: one that fails before it
  // (diverged at step 2, its first save) leaves the earlier run's checkpoints and log as they
  // were, its own log beside them.
  const std::string diverging = tiny + "--overwrite --eval-every 2 --warmup 1 --decay-steps 2 --lr 1e30 --clip 0 --out " + other;
  Cli failed = volta(diverging);
  EXPECT_EQ(failed.code, 1);
  EXPECT_NE(failed.err.find("the run diverged"), std::string::npos) << failed.err;
  EXPECT_EQ(test::read_file(other + "/last.safetensors"), before);
  EXPECT_EQ(test::read_file(other + "/best.safetensors"), best_before);
  EXPECT_EQ(test::read_file(other + "/log.jsonl"), log_before);
  EXPECT_NE(test::read_file(other + "/log.jsonl.new").find("{\"step\":1,"), std::string::npos);
  // Saved at step 1, failed at step 2: the folder holds that run alone (the earlier run's best,
  // which would pass for this run's, is gone).
  Cli saved_once = volta(diverging + " --save-every 1");
  EXPECT_EQ(saved_once.code, 1);
  EXPECT_NE(test::read_file(other + "/last.safetensors"), before);
  EXPECT_FALSE(std::filesystem::exists(other + "/best.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(other + "/log.jsonl.new"));
  EXPECT_EQ(test::read_file(other + "/log.jsonl").rfind("{\"step\":1,", 0), 0u);
  const std::string last_saved_once = test::read_file(other + "/last.safetensors");
  Cli over = volta(small + "--seed 9 --overwrite --out " + other);
  EXPECT_EQ(over.code, 0) << over.err;
  EXPECT_NE(test::read_file(other + "/last.safetensors"), last_saved_once);
  EXPECT_TRUE(std::filesystem::exists(other + "/best.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(other + "/log.jsonl.new"));
  const std::string log_over = test::read_file(other + "/log.jsonl");
  EXPECT_EQ(std::count(log_over.begin(), log_over.end(), '\n'), 2) << log_over;
  // A run resumed from another folder replaces the earlier run the same way: its log holds its
  // own steps alone (not the earlier run's lines up to its step).
  const std::string third = dir_ + "_third";
  ASSERT_EQ(volta(small + "--seed 5 --out " + third).code, 0);
  const std::string best_over = test::read_file(other + "/best.safetensors");
  Cli moved = volta("train --recipe shakespeare-char --steps 3 --overwrite --resume " + third + "/last.safetensors --out " + other);
  EXPECT_EQ(moved.code, 0) << moved.err;
  const std::string log_moved = test::read_file(other + "/log.jsonl");
  EXPECT_EQ(log_moved.rfind("{\"step\":3,", 0), 0u) << log_moved;
  EXPECT_EQ(std::count(log_moved.begin(), log_moved.end(), '\n'), 1) << log_moved;
  EXPECT_TRUE(!std::filesystem::exists(other + "/best.safetensors") || test::read_file(other + "/best.safetensors") != best_over);
  std::filesystem::remove_all(third);
  std::filesystem::remove_all(other);
}

// A run that diverges stops before writing nan parameters over its last checkpoint, which keeps
// the last finite step's state.
TEST(CliTrainLM, ADivergedRunWritesNoNanCheckpoint) {
  const std::string dir = ::testing::TempDir() + "cli_diverge_" + std::to_string(::getpid());
  Cli r = volta("train --recipe shakespeare-char --layers 1 --channels 32 --context 32 --batch 8 --steps 6 --eval-every 1 "
                "--eval-iters 1 --warmup 1 --decay-steps 6 --lr 1e30 --clip 0 --out " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds nan or inf (the run diverged: try a lower --lr, or --clip); '" + dir + "/last.safetensors' was not written"),
            std::string::npos)
      << r.err;
  if (std::filesystem::exists(dir + "/last.safetensors")) {
    auto ck = io::load_checkpoint(dir + "/last.safetensors");
    ASSERT_OK(ck);
    for (const auto& [name, t] : ck->tensors)
      for (int64_t i = 0; t.dtype() == DType::f32 && i < t.numel(); ++i) ASSERT_TRUE(std::isfinite(t.data<float>()[i])) << name;
  }
  std::filesystem::remove_all(dir);
}

// Generated text goes to stdout byte for byte, NUL characters included.
TEST(CliGenerate, TextIsByteExact) {
  train::LMCheckpoint ck;
  ck.recipe = train::shakespeare_char();
  const std::string text("a\0b\0c", 5);
  ck.tokenizer = train::CharTokenizer::from_text(text);
  ck.recipe.model = {ck.tokenizer.vocab_size(), 8, 1, 2, 8, false};
  auto g = model::build_tinylm_loss(ck.recipe.model, 1, 8);
  ASSERT_OK(g);
  ck.state.params = *init_params(*g, 1);
  for (auto& [name, t] : ck.state.params)  // a peaked distribution, far from uniform
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= 30.0f;
  const std::string path = ::testing::TempDir() + "nul_" + std::to_string(::getpid()) + ".safetensors";
  ASSERT_OK(io::save_checkpoint(train::to_checkpoint(ck), path));
  Cli r = volta("generate --checkpoint " + path + " --prompt a --tokens 60 --seed 2");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out.size(), 1u + 60u + 1u);
  EXPECT_NE(r.out.find('\0'), std::string::npos);
  for (char c : r.out.substr(0, 61)) EXPECT_NE(text.find(c), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace volta
