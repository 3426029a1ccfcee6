// Checkpoint format v2: round trips, deterministic bytes, and every kind of damage reported.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "train/lm.h"
#include "volta/checkpoint.h"
#include "volta/rng.h"

namespace volta {
namespace {

io::Checkpoint small() {
  io::Checkpoint c;
  c.metadata["note"] = "hello";
  Tensor a = Tensor::zeros(DType::f32, {3, 5});
  fill_normal(a, 1, 1, 0.0f, 1.0f);
  c.tensors.emplace("b.weight", a);
  c.tensors.emplace("a.ids", Tensor::from_i64({2}, {7, -1}));
  c.tensors.emplace("z.scalar", Tensor::from_f32({}, {2.5f}));
  c.tensors.emplace("c.half", narrow_to(a, DType::bf16));
  c.tensors.emplace("d.half", narrow_to(a, DType::f16));
  return c;
}

TEST(Checkpoint, RoundTripAndDeterministicBytes) {
  const std::string bytes = io::serialize_checkpoint(small());
  EXPECT_EQ(bytes, io::serialize_checkpoint(small()));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 64, 0u) << "tensor data starts 64-byte aligned";
  auto back = io::parse_checkpoint(bytes, "mem");
  ASSERT_OK(back);
  EXPECT_EQ(back->metadata.at("note"), "hello");
  ASSERT_EQ(back->tensors.size(), 5u);
  EXPECT_EQ(back->tensors.at("c.half").type().to_string(), "bf16[3,5]");
  EXPECT_EQ(back->tensors.at("d.half").type().to_string(), "f16[3,5]");
  for (const auto& [name, t] : small().tensors) EXPECT_TRUE(back->tensors.at(name).bitwise_equal(t)) << name;
  EXPECT_EQ(io::serialize_checkpoint(*back), bytes);
}

// An empty tensor covers no bytes: it starts where the next tensor does, and loads beside it
// whichever of the two comes first by name.
TEST(Checkpoint, EmptyTensorsRoundTripBesideOthers) {
  io::Checkpoint c = small();
  c.tensors.emplace("a.empty", Tensor::zeros(DType::f32, {0, 4}));
  c.tensors.emplace("zz.empty", Tensor::zeros(DType::bf16, {3, 0}));
  auto back = io::parse_checkpoint(io::serialize_checkpoint(c), "mem");
  ASSERT_OK(back);
  ASSERT_EQ(back->tensors.size(), c.tensors.size());
  EXPECT_EQ(back->tensors.at("a.empty").type().to_string(), "f32[0,4]");
  EXPECT_EQ(back->tensors.at("zz.empty").type().to_string(), "bf16[3,0]");
  for (const auto& [name, t] : small().tensors) EXPECT_TRUE(back->tensors.at(name).bitwise_equal(t)) << name;
}

TEST(Checkpoint, HeaderIsSafetensorsJson) {
  const std::string bytes = io::serialize_checkpoint(small());
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  auto j = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(j["__metadata__"]["format"], "volta.checkpoint");
  EXPECT_EQ(j["__metadata__"]["format_version"], "2");
  EXPECT_EQ(j["__metadata__"]["header_checksum"].get<std::string>().rfind("fnv1a64:", 0), 0u);
  EXPECT_EQ(j["b.weight"]["dtype"], "F32");
  EXPECT_EQ(j["c.half"]["dtype"], "BF16");
  EXPECT_EQ(j["d.half"]["dtype"], "F16");
  EXPECT_EQ(j["b.weight"]["shape"], nlohmann::json({3, 5}));
  EXPECT_EQ(j["a.ids"]["data_offsets"], nlohmann::json({0, 16}));  // key order: a.ids first
}

TEST(Checkpoint, SaveIsAtomicAndLoadNamesMissingFiles) {
  std::string dir = ::testing::TempDir() + "ckpt_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/x.safetensors";
  ASSERT_OK(io::save_checkpoint(small(), path));
  for (const auto& e : std::filesystem::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "x.safetensors");
  ASSERT_OK(io::load_checkpoint(path));
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(dir + "/missing.safetensors"), "cannot open");
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(dir), "is a directory, not a regular file");
  EXPECT_ERROR_CONTAINS(io::save_checkpoint(small(), dir + "/no/such/dir/x.safetensors"), "cannot write");
  std::filesystem::remove_all(dir);
}

// load_checkpoint looks at the first bytes before reading the rest: a file of zeros, a header
// that is no JSON object, a header length past the end are refused with parse_checkpoint's words.
TEST(Checkpoint, LoadRefusesABadHeaderBeforeReadingTheRest) {
  const std::string dir = ::testing::TempDir() + "ckpt_head_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const auto file = [&](const std::string& name, const std::string& head, size_t zeros) {
    std::ofstream(dir + "/" + name, std::ios::binary) << head << std::string(zeros, '\0');
    return dir + "/" + name;
  };
  const std::string len3("\x03\0\0\0\0\0\0\0", 8);
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(file("zeros", "", 1 << 20)), "header at offset 8 is not a JSON object");
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(file("array", len3 + "[1]", 1 << 20)), "header at offset 8 is not a JSON object");
  const std::string huge("\0\0\0\0\0\0\x01\0", 8);
  EXPECT_ERROR_CONTAINS(io::load_checkpoint(file("past", huge + "{}", 100)),
                        "header length 281474976710656 at offset 0 runs past the end of the 110-byte file");
  std::filesystem::remove_all(dir);
}

// A save killed between writing its temporary file and the rename leaves `x.tmp.<pid>`; the next
// save removes it once that process is gone, and leaves a live process's save alone.
TEST(Checkpoint, TheNextSaveRemovesTheTemporaryFilesOfKilledSaves) {
  std::string dir = ::testing::TempDir() + "ckpt_tmp_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/x.safetensors";
  const std::string dead = path + ".tmp.999999999", live = path + ".tmp." + std::to_string(::getppid()),
                    other = dir + "/y.safetensors.tmp.999999999", odd = path + ".tmp.12ab";
  for (const std::string& f : {dead, live, other, odd}) std::ofstream(f) << "partial";
  ASSERT_OK(io::save_checkpoint(small(), path));
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(other));  // another file's
  EXPECT_TRUE(std::filesystem::exists(odd));    // not a pid
  ASSERT_OK(io::load_checkpoint(path));
  std::filesystem::remove_all(dir);
}

// The atomic rename replaces whatever is at the path, so it must only ever replace a regular
// file: a FIFO or device there is refused and left as it is; a symlink is written through.
TEST(Checkpoint, SavingNeverReplacesAFileThatIsNotRegular) {
  const std::string dir = ::testing::TempDir() + "ckpt_special_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_ERROR_CONTAINS(io::save_checkpoint(small(), fifo), "it is not a regular file (refusing to replace it)");
  EXPECT_TRUE(std::filesystem::is_fifo(fifo));
  EXPECT_ERROR_CONTAINS(io::save_checkpoint(small(), dir), "not a regular file");
  const std::string target = dir + "/target.safetensors", link = dir + "/link.safetensors";
  std::ofstream(target) << "old";
  std::filesystem::create_symlink(target, link);
  ASSERT_OK(io::save_checkpoint(small(), link));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  ASSERT_OK(io::load_checkpoint(target));
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, TruncationAtAnyOffsetIsAnError) {
  const std::string bytes = io::serialize_checkpoint(small());
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, size_t{20}, bytes.size() / 2, bytes.size() - 1}) {
    auto r = io::parse_checkpoint(std::string_view(bytes).substr(0, cut), "cut");
    EXPECT_FALSE(r.is_ok()) << "cut at " << cut;
  }
  for (size_t cut = 0; cut < bytes.size(); ++cut) EXPECT_FALSE(io::parse_checkpoint(std::string_view(bytes).substr(0, cut)).is_ok());
}

TEST(Checkpoint, DamageIsExplained) {
  const std::string good = io::serialize_checkpoint(small());
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  // A flipped byte in the tensor data: the checksum catches it.
  std::string bad = good;
  bad[8 + n + 5] ^= 0x40;
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(bad, "f"), "checksum mismatch");
  // A flipped byte in the header JSON.
  bad = good;
  bad[8 + 1] = '#';
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(bad, "f"), "header at offset 8 is not a JSON object");
  // Header length beyond the file.
  bad = good;
  bad[6] = 0x7f;
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(bad, "f"), "runs past the end");
  // Wrong magic: not a Volta checkpoint, and an unknown version.
  auto rewrite = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos);
    s.replace(at, from.size(), to);
    return s;
  };
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(rewrite("volta.checkpoint", "other.checkpoint"), "f"), "format is 'other.checkpoint'");
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(rewrite("\"format_version\":\"2\"", "\"format_version\":\"9\""), "f"),
                        "unsupported format version '9'");
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(rewrite("\"F32\"", "\"F8_E4M3\""), "f"), "unsupported dtype 'F8_E4M3'");
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(rewrite("\"F32\"", "\"F16\""), "f"), "has 60 bytes but f16[3,5] needs 30");
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(rewrite("[3,5]", "[3,6]"), "f"), "has 60 bytes but f32[3,6] needs 72");
  // Two tensors that start at one offset: the second named with the first.
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(rewrite("[16,76]", " [0,60]"), "f"),
                        "tensor 'b.weight': starts at data offset 0, as tensor 'a.ids' does");
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(std::string(8, '\0'), "f"), "not a JSON object");
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint("short", "f"), "too short");
}

// The bytes of `c` as a version 1 writer left them: no header_checksum.
std::string as_version_1(const io::Checkpoint& c) {
  const std::string v2 = io::serialize_checkpoint(c);
  uint64_t n = 0;
  std::memcpy(&n, v2.data(), 8);
  nlohmann::json header = nlohmann::json::parse(v2.substr(8, n));
  header["__metadata__"].erase("header_checksum");
  header["__metadata__"]["format_version"] = "1";
  std::string text = header.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');
  std::string out(8, '\0');
  const uint64_t len = text.size();
  std::memcpy(out.data(), &len, 8);
  return out + text + v2.substr(8 + n);
}

// A changed metadata byte (the tokenizer's symbols, the step, a tensor's name) fails to load as
// a changed tensor byte does; before version 2 it loaded and changed what the model did.
TEST(Checkpoint, AChangedHeaderFailsItsChecksum) {
  io::Checkpoint c = small();
  c.metadata["tokenizer"] = "{\"chars\":\"abcde\"}";
  const std::string good = io::serialize_checkpoint(c);
  ASSERT_OK(io::parse_checkpoint(good, "f"));
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    return s;
  };
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"abcde", "abcdf"}, {"hello", "hellp"}, {"b.weight", "b.weighu"}})
    EXPECT_ERROR_CONTAINS(io::parse_checkpoint(edited(from, to), "f"),
                          "f: header checksum mismatch: header_checksum says 'fnv1a64:");
  // Reformatting the JSON changes no entry: still the same header.
  uint64_t n = 0;
  std::memcpy(&n, good.data(), 8);
  std::string spaced = good;
  const size_t brace = spaced.find(',', 8);
  ASSERT_LT(brace, 8 + n);
  spaced.insert(brace + 1, " ");
  spaced.erase(8 + n, 1);  // the padding keeps the length
  ASSERT_OK(io::parse_checkpoint(spaced, "f"));
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(edited("\"header_checksum\"", "\"header_checksun\""), "f"),
                        "f: version 2 header has no header_checksum");
  // The header alone, as a resume reads it to compare two checkpoints' steps.
  const std::string dir = ::testing::TempDir() + "ckpt_hdr_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/good.safetensors", std::ios::binary) << good;
  std::ofstream(dir + "/bad.safetensors", std::ios::binary) << edited("abcde", "abcdf");
  ASSERT_OK(io::load_checkpoint_metadata(dir + "/good.safetensors"));
  EXPECT_ERROR_CONTAINS(io::load_checkpoint_metadata(dir + "/bad.safetensors"), "header checksum mismatch");
  std::filesystem::remove_all(dir);
}

// Version 1 files (no header checksum) still load, with the same contents.
TEST(Checkpoint, Version1FilesStillLoad) {
  const std::string v1 = as_version_1(small());
  auto back = io::parse_checkpoint(v1, "v1");
  ASSERT_OK(back);
  EXPECT_EQ(back->metadata, small().metadata);
  for (const auto& [name, t] : small().tensors) EXPECT_TRUE(back->tensors.at(name).bitwise_equal(t)) << name;
  EXPECT_EQ(io::serialize_checkpoint(*back), io::serialize_checkpoint(small()));  // saved again as version 2
  std::string damaged = v1;
  damaged[damaged.size() - 1] ^= 0x40;
  EXPECT_ERROR_CONTAINS(io::parse_checkpoint(damaged, "v1"), "checksum mismatch");
}

train::LMCheckpoint tiny_lm() {
  train::LMCheckpoint ck;
  ck.recipe = train::shakespeare_char();
  ck.recipe.model = {5, 8, 1, 2, 8, false};
  ck.tokenizer = train::CharTokenizer::from_text("abcde");
  auto g = model::build_tinylm_loss(ck.recipe.model, 1, 8);
  EXPECT_TRUE(g.is_ok());
  ck.state.params = *init_params(*g, 1);
  for (const auto& [name, t] : ck.state.params) ck.state.slots[name] = {t.clone(), t.clone()};
  ck.state.step = 17;
  ck.state.seed = 3;
  ck.best_val_loss = 1.5;
  return ck;
}

TEST(LMCheckpoint, RoundTripsTheWholeTrainingState) {
  train::LMCheckpoint ck = tiny_lm();
  const std::string bytes = io::serialize_checkpoint(train::to_checkpoint(ck));
  auto c = io::parse_checkpoint(bytes, "lm");
  ASSERT_OK(c);
  auto back = train::from_checkpoint(*c, "lm");
  ASSERT_OK(back);
  EXPECT_TRUE(back->state.bitwise_equal(ck.state));
  EXPECT_EQ(back->best_val_loss, 1.5);
  EXPECT_EQ(back->tokenizer.chars(), ck.tokenizer.chars());
  EXPECT_EQ(train::recipe_to_json(back->recipe), train::recipe_to_json(ck.recipe));
  EXPECT_EQ(io::serialize_checkpoint(train::to_checkpoint(*back)), bytes);
}

TEST(LMCheckpoint, ShapesMustMatchTheConfig) {
  train::LMCheckpoint ck = tiny_lm();
  io::Checkpoint c = train::to_checkpoint(ck);
  c.tensors["wte"] = Tensor::zeros(DType::f32, {6, 8});
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(c, "x"), "tensor 'wte' is f32[6,8] but the model config needs f32[5,8]");
  c = train::to_checkpoint(ck);
  c.tensors.erase("lnf.g");
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(c, "x"), "tensor 'lnf.g' of the model is missing");
  c = train::to_checkpoint(ck);
  c.tensors.emplace("stray", Tensor::zeros(DType::f32, {1}));
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(c, "x"), "tensors but the model config accounts for");
  // bf16 / f16 matrices make an inference checkpoint: without optimizer state only, and never a
  // half vector or a half of another shape.
  c = train::to_checkpoint(ck);
  c.tensors["h0.attn.wqkv"] = narrow_to(c.tensors["h0.attn.wqkv"], DType::bf16);
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(c, "x"), "tensor 'h0.attn.wqkv' is bf16[8,24] but the checkpoint holds optimizer state");
  train::LMCheckpoint inference = ck;
  inference.state.slots.clear();
  inference.state.params["h0.attn.wqkv"] = narrow_to(inference.state.params["h0.attn.wqkv"], DType::f16);
  auto half = train::from_checkpoint(train::to_checkpoint(inference), "x");
  ASSERT_OK(half);
  EXPECT_EQ(train::stored_weights(*half), DType::f16);
  EXPECT_EQ(train::stored_weights(ck), DType::f32);
  inference.state.params["lnf.g"] = narrow_to(inference.state.params["lnf.g"], DType::bf16);
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(train::to_checkpoint(inference), "x"), "tensor 'lnf.g' is bf16[8] but the model config needs f32[8]");
  c = train::to_checkpoint(ck);
  c.metadata["model_config"] = "{\"model\":\"tinylm\"}";
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(c, "x"), "model config has no integer 'vocab'");
  // A key the config's arch does not read: a gpt config with a llama's fields, or a stray one.
  for (const char* extra : {"\"kv_heads\":1", "\"dropout\":0.5"}) {
    c = train::to_checkpoint(ck);
    std::string config = c.metadata["model_config"];
    c.metadata["model_config"] = config.insert(config.size() - 1, std::string(",") + extra);
    EXPECT_ERROR_CONTAINS(train::from_checkpoint(c, "x"), "which a gpt config does not take");
  }
}

// A resumed run, eval and generate trust the recipe they load, so it is checked like flags
// (a zero batch gave NaN losses, a zero evaluation cadence a division by zero).
TEST(LMCheckpoint, TheRecipeIsValidatedOnLoad) {
  train::LMCheckpoint ck = tiny_lm();
  ck.recipe.batch = 0;
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(train::to_checkpoint(ck), "x"), "x: recipe: --batch must be in [1, 65536], got 0");
  ck = tiny_lm();
  ck.recipe.eval_every = 0;
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(train::to_checkpoint(ck), "x"), "x: recipe: --eval-every must be >= 1, got 0");
  ck = tiny_lm();
  ck.recipe.optimizer.lr = -1;
  EXPECT_ERROR_CONTAINS(train::from_checkpoint(train::to_checkpoint(ck), "x"), "x: recipe:");
  ck = tiny_lm();
  ck.recipe.save_every = 0;  // means "at every evaluation"
  EXPECT_TRUE(train::from_checkpoint(train::to_checkpoint(ck), "x").is_ok());
}

}  // namespace
}  // namespace volta
