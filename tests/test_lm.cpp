// TinyLM: data, generation with and without the KV cache, sampling, and the CLI around them.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cpu_variant.h"
#include "model/generate.h"
#include "test_util.h"
#include "train/lm.h"
#include "volta/rng.h"

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

// A backend without the attention op decodes with one graph per position (slices of the cache);
// the CPU backend with the one step graph whose cache length is an input. Same tokens.
TEST(Generate, TheOneStepGraphAndThePerPositionGraphsGiveTheSameTokens) {
  const model::TinyLMConfig c = tiny_config();
  const Bindings params = tiny_params(c);
  Runtime full(make_cpu_backend());
  Runtime lacking(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoAttention));
  model::SampleOptions o;
  o.temperature = 0.8;
  o.tokens = 12;
  o.batch = 2;
  o.seed = 3;
  auto a = model::generate(full, c, params, {4, 1}, o);
  auto b = model::generate(lacking, c, params, {4, 1}, o);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_EQ(*a, *b);
}

// The step graph at run-time position p has the bits of the graph built for p, fused or not,
// with 1 and 2 threads; a cache length outside the cache is an error naming the node.
TEST(Generate, DecodeStepGraphHasTheBitsOfThePerPositionGraph) {
  const model::TinyLMConfig c = tiny_config();
  const Bindings params = tiny_params(c);
  const int64_t B = 2;
  auto step = model::build_tinylm_decode_step(c, B);
  ASSERT_OK(step);
  size_t run_time = 0;
  for (const ir::Node& n : step->nodes) run_time += n.op == ir::Op::Attention && n.inputs.size() == 6;
  EXPECT_EQ(run_time, static_cast<size_t>(c.layers));
  Bindings in = params;
  Tensor tokens = Tensor::zeros(DType::i32, {B, 1});
  tokens.data<int32_t>()[0] = 3, tokens.data<int32_t>()[1] = 7;
  in.insert_or_assign("tokens", tokens);
  for (int64_t l = 0; l < c.layers; ++l)
    for (const char* kv : {"cache.k.", "cache.v."}) {
      Tensor t = Tensor::zeros(DType::f32, {B, c.heads, c.context, c.head_dim()});
      fill_normal(t, 9, static_cast<uint64_t>(2 * l + (kv[6] == 'v')), 0.0f, 1.0f);
      in.insert_or_assign(kv + std::to_string(l), t);
    }
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    Runtime full(make_cpu_backend());
    Runtime lacking(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoAttention));
    auto step_plan = full.compile(*step);
    ASSERT_OK(step_plan);
    for (int64_t pos : {int64_t{1}, int64_t{4}, c.context - 1}) {
      auto fixed = model::build_tinylm_decode(c, B, pos);
      ASSERT_OK(fixed);
      auto fused = full.compile(*fixed);
      auto unfused = lacking.compile(*fixed);
      ASSERT_OK(fused);
      ASSERT_OK(unfused);
      auto want = full.run(**fused, in);
      auto want_unfused = lacking.run(**unfused, in);
      ASSERT_OK(want);
      ASSERT_OK(want_unfused);
      Bindings with_pos = in;
      Tensor at = Tensor::zeros(DType::i32, {1});
      at.data<int32_t>()[0] = static_cast<int32_t>(pos);
      with_pos.insert_or_assign("positions", at);
      with_pos.insert_or_assign("cache.length", at);
      auto got = full.run(**step_plan, with_pos);
      ASSERT_OK(got);
      ASSERT_EQ(got->size(), want->size());
      for (size_t i = 0; i < got->size(); ++i) {
        EXPECT_TRUE((*got)[i].bitwise_equal((*want)[i])) << "output " << i << " pos " << pos << " threads " << threads;
        EXPECT_TRUE((*got)[i].bitwise_equal((*want_unfused)[i])) << "output " << i << " pos " << pos;
      }
    }
    Bindings bad = in;
    Tensor past = Tensor::zeros(DType::i32, {1});
    past.data<int32_t>()[0] = static_cast<int32_t>(c.context + 1);
    bad.insert_or_assign("positions", Tensor::zeros(DType::i32, {1}));
    bad.insert_or_assign("cache.length", past);
    auto out = full.run(**step_plan, bad);
    EXPECT_ERROR_CONTAINS(out, "[attention] length 9 is outside [0, 8]");
    EXPECT_ERROR_CONTAINS(out, "h0.attn.y");
  }
  set_cpu_threads(0);
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
