// TinyLM: data, generation with and without the KV cache, sampling, and the CLI around them.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "model/generate.h"
#include "test_util.h"
#include "train/lm.h"

namespace volta {
namespace {

model::TinyLMConfig tiny_config() { return {11, 8, 2, 2, 16, false}; }

Bindings tiny_params(const model::TinyLMConfig& c) {
  auto g = model::build_tinylm_loss(c, 1, c.context);
  EXPECT_TRUE(g.is_ok());
  auto p = init_params(*g, 5);
  // Larger weights than the init so the logits are far from uniform.
  for (auto& [name, t] : *p)
    if (t.shape().size() == 2)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= 25.0f;
  return *p;
}

TEST(Generate, GreedyIsIdenticalWithAndWithoutTheKVCache) {
  const model::TinyLMConfig c = tiny_config();
  const Bindings params = tiny_params(c);
  Runtime rt(make_cpu_backend());
  for (int64_t batch : {1, 3}) {
    model::SampleOptions o;
    o.temperature = 0.0;
    o.tokens = 20;  // runs past the context of 8: the window slides
    o.batch = batch;
    auto cached = model::generate(rt, c, params, {1, 2, 3}, o);
    o.kv_cache = false;
    auto plain = model::generate(rt, c, params, {1, 2, 3}, o);
    ASSERT_OK(cached);
    ASSERT_OK(plain);
    EXPECT_EQ(*cached, *plain);
    EXPECT_EQ((*cached)[0].size(), 20u);
  }
}

TEST(Generate, SeededSamplingIsReproducibleAndBatchSamplesDiffer) {
  const model::TinyLMConfig c = tiny_config();
  const Bindings params = tiny_params(c);
  Runtime rt(make_cpu_backend());
  model::SampleOptions o;
  o.tokens = 30;
  o.batch = 4;
  o.seed = 11;
  o.top_k = 5;
  o.top_p = 0.9;
  auto a = model::generate(rt, c, params, {4}, o);
  auto b = model::generate(rt, c, params, {4}, o);
  o.kv_cache = false;
  auto nc = model::generate(rt, c, params, {4}, o);
  o.kv_cache = true;
  o.seed = 12;
  auto other = model::generate(rt, c, params, {4}, o);
  ASSERT_OK(a);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *nc);
  EXPECT_NE(*a, *other);
  EXPECT_NE((*a)[0], (*a)[1]);
}

TEST(Generate, SampleTokenHonoursTemperatureTopKAndTopP) {
  const float logits[4] = {1.0f, 3.0f, 2.0f, 0.0f};
  model::SampleOptions greedy;
  greedy.temperature = 0.0;
  EXPECT_EQ(model::sample_token(logits, 4, greedy, 0.99), 1);
  model::SampleOptions top1;
  top1.top_k = 1;
  for (double u : {0.0, 0.5, 0.999}) EXPECT_EQ(model::sample_token(logits, 4, top1, u), 1);
  model::SampleOptions top2;
  top2.top_k = 2;  // {1: e^3, 2: e^2} -> p(1) = 0.731
  EXPECT_EQ(model::sample_token(logits, 4, top2, 0.70), 1);
  EXPECT_EQ(model::sample_token(logits, 4, top2, 0.75), 2);
  model::SampleOptions nucleus;
  nucleus.top_p = 0.5;  // the most likely token already holds 0.64 of the mass
  for (double u : {0.0, 0.9}) EXPECT_EQ(model::sample_token(logits, 4, nucleus, u), 1);
  model::SampleOptions all;
  EXPECT_EQ(model::sample_token(logits, 4, all, 0.999), 3);  // the tail is reachable
}

TEST(Generate, BadOptionsNameTheFlag) {
  model::SampleOptions o;
  o.tokens = 0;
  EXPECT_ERROR_CONTAINS(model::validate(o, 65), "--tokens must be in [1, 1000000]");
  o = {};
  o.top_k = 66;
  EXPECT_ERROR_CONTAINS(model::validate(o, 65), "--top-k must be in [0, 65]");
  o = {};
  o.temperature = -0.5;
  EXPECT_ERROR_CONTAINS(model::validate(o, 65), "--temperature must be finite and >= 0");
  o = {};
  o.top_p = 0.0;
  EXPECT_ERROR_CONTAINS(model::validate(o, 65), "--top-p must be in (0, 1]");
}

TEST(TextData, TokenizerRoundTripsAndNamesUnknownCharacters) {
  auto tok = train::CharTokenizer::from_text("hello world");
  EXPECT_EQ(tok.vocab_size(), 8);
  auto ids = tok.encode("word");
  ASSERT_OK(ids);
  EXPECT_EQ(tok.decode(*ids), "word");
  EXPECT_ERROR_CONTAINS(tok.encode("hex!"), "characters not in the vocabulary: 'x', '!'");
  auto back = train::CharTokenizer::from_json(tok.to_json());
  ASSERT_OK(back);
  EXPECT_EQ(back->chars(), tok.chars());
}

TEST(TextData, MissingEmptyOrTooSmallFilesAreErrors) {
  std::string dir = ::testing::TempDir() + "textdata_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/empty.txt");
  std::ofstream(dir + "/small.txt") << "tiny text";
  EXPECT_ERROR_CONTAINS(train::load_text_data(dir + "/none.txt", 64), "cannot open");
  EXPECT_ERROR_CONTAINS(train::load_text_data(dir + "/empty.txt", 64), "is empty");
  EXPECT_ERROR_CONTAINS(train::load_text_data(dir + "/small.txt", 64), "too few");
  EXPECT_ERROR_CONTAINS(train::load_text_data(dir, 64), "is a directory");
  std::filesystem::remove_all(dir);
}

TEST(TextData, BatchesAreNextTokenWindowsDrawnBySeedAndIndex) {
  std::vector<int32_t> data(100);
  for (int i = 0; i < 100; ++i) data[static_cast<size_t>(i)] = i;
  Bindings a = train::lm_batch(data, 4, 8, 1, "train", 3);
  Bindings b = train::lm_batch(data, 4, 8, 1, "train", 3);
  Bindings c = train::lm_batch(data, 4, 8, 1, "train", 4);
  EXPECT_TRUE(a.at("tokens").bitwise_equal(b.at("tokens")));
  EXPECT_FALSE(a.at("tokens").bitwise_equal(c.at("tokens")));
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(a.at("targets").data<int32_t>()[i], a.at("tokens").data<int32_t>()[i] + 1);
}

}  // namespace
}  // namespace volta
