// TinyLM: data, generation with and without the KV cache, sampling, and the CLI around them.
#include <bit>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "backends/cpu/matmul.h"
#include "cpu_variant.h"
#include "model/generate.h"
#include "test_util.h"
#include "tiny_lm.h"
#include "train/lm.h"
#include "volta/rng.h"

namespace volta {
namespace {

model::TinyLMConfig tiny_config() { return test::tiny_gpt(); }
using test::tiny_llama;

using test::tiny_params;

// Samples from a generator made for the call (params uploaded into its state).
Result<std::vector<std::vector<int32_t>>> generate(Runtime& rt, const model::TinyLMConfig& c, const Bindings& params,
                                                   const std::vector<int32_t>& prompt, const model::SampleOptions& o) {
  VOLTA_ASSIGN_OR_RETURN(model::Generator gen, model::Generator::create(rt, c, params));
  return gen.generate(prompt, o);
}

// A gpt config's JSON has no llama keys (checkpoints from before the variant read back and hash
// the same); a llama config round-trips; bad ones name the field.
TEST(TinyLMConfig, JsonRoundTripsAndBadConfigsNameTheField) {
  const std::string gpt = model::config_to_json(tiny_config());
  EXPECT_EQ(gpt, R"({"bias":false,"channels":16,"context":8,"heads":2,"layers":2,"model":"tinylm","vocab":11})");
  const model::TinyLMConfig llama = tiny_llama();
  ASSERT_OK_AND_ASSIGN(model::TinyLMConfig back, model::config_from_json(model::config_to_json(llama)));
  EXPECT_EQ(back.arch, model::Arch::Llama);
  EXPECT_EQ(back.kv_heads, 2);
  EXPECT_EQ(back.ffn, 24);
  EXPECT_EQ(back.rope_theta, 10000.0);
  auto without = nlohmann::json::parse(model::config_to_json(llama));
  without.erase("ffn");
  EXPECT_ERROR_CONTAINS(model::config_from_json(without.dump()), "model config has no integer 'ffn'");
  without = nlohmann::json::parse(model::config_to_json(llama));
  without["arch"] = "rwkv";
  EXPECT_ERROR_CONTAINS(model::config_from_json(without.dump()), "unknown model architecture 'rwkv'");
  without["arch"] = "llama";
  without["kv_heads"] = 3;
  EXPECT_ERROR_CONTAINS(model::config_from_json(without.dump()), "model kv_heads must divide heads (4), got 3");
  without["kv_heads"] = 2;
  without["rope_theta"] = 1e300;
  EXPECT_ERROR_CONTAINS(model::config_from_json(without.dump()), "model rope_theta must be in (1, 1e12], got 1e+300");
  // Defaults: half the heads, and the ffn width that gives a gpt block's 12 C^2 weights.
  model::TinyLMConfig d{65, 64, 4, 4, 128, false};
  d.arch = model::Arch::Llama;
  model::llama_defaults(d);
  EXPECT_EQ(d.kv_heads, 2);
  EXPECT_EQ(d.ffn, 384);
}

TEST(Generate, GreedyIsIdenticalWithAndWithoutTheKVCache) {
  for (const model::TinyLMConfig& c : {tiny_config(), tiny_llama()}) {
    const Bindings params = tiny_params(c);
    Runtime rt(make_cpu_backend());
    for (int64_t batch : {1, 3}) {
      model::SampleOptions o;
      o.temperature = 0.0;
      o.tokens = 20;  // runs past the context of 8: the window moves on twice
      o.batch = batch;
      auto cached = generate(rt, c, params, {1, 2, 3}, o);
      o.kv_cache = false;
      auto plain = generate(rt, c, params, {1, 2, 3}, o);
      ASSERT_OK(cached);
      ASSERT_OK(plain);
      EXPECT_EQ(*cached, *plain) << model::arch_name(c.arch);
      EXPECT_EQ((*cached)[0].size(), 20u);
    }
  }
}

// bf16 / f16 weights: the generator narrows the matmul weights once, and its text is the f32
// generator's on weights rounded the same way, token for token (the kernels' bits are the f32
// kernels' on the widened weights), with and without the cache. The narrowed values are read
// from a generator on a backend without packing (the CPU's stores them packed).
TEST(Generate, HalfWeightsGiveTheTextOfF32WeightsRoundedOnce) {
  for (const model::TinyLMConfig& c : {tiny_config(), tiny_llama()}) {
    const Bindings params = tiny_params(c);
    for (DType half : {DType::bf16, DType::f16}) {
      Runtime rt(make_cpu_backend()), plain_rt(std::make_unique<test::CpuVariant>(test::CpuVariant::kUnpacked));
      auto gen = model::Generator::create(rt, c, params, half);
      auto plain = model::Generator::create(plain_rt, c, params, half);
      ASSERT_OK(gen);
      ASSERT_OK(plain);
      // The weights the plans read as half: every matmul weight, not the GPT's tied embedding.
      Bindings rounded = params;
      size_t narrowed = 0;
      for (auto& [name, t] : rounded) {
        EXPECT_EQ(gen->state().get(name)->dtype(), plain->state().get(name)->dtype()) << name;
        auto held = plain->state().get(name);
        ASSERT_OK(held);
        if (held->dtype() != half) continue;
        ++narrowed;
        EXPECT_TRUE(held->bitwise_equal(narrow_to(t, half))) << name;
        t = widen_to_f32(narrow_to(t, half));
      }
      EXPECT_EQ(narrowed, static_cast<size_t>(4 * c.layers + (c.arch == model::Arch::Llama ? 1 : 0))) << dtype_name(half);
      EXPECT_EQ(gen->state().get("wte")->dtype(), DType::f32);
      for (bool kv : {true, false}) {
        model::SampleOptions o;
        o.temperature = 0.8;
        o.tokens = 20;
        o.batch = 2;
        o.seed = 5;
        o.kv_cache = kv;
        auto got = gen->generate({1, 2}, o);
        auto want = generate(rt, c, rounded, {1, 2}, o);
        ASSERT_OK(got);
        ASSERT_OK(want);
        EXPECT_EQ(*got, *want) << model::arch_name(c.arch) << " " << dtype_name(half) << " kv " << kv;
      }
    }
  }
  Runtime rt(make_cpu_backend());
  EXPECT_ERROR_CONTAINS(model::Generator::create(rt, tiny_config(), tiny_params(tiny_config()), DType::i32),
                        "--weights must be f32, bf16 or f16, got i32");
}

// Matmuls of a plan that read their weight packed (b_packed).
int64_t packed_reads(const plan::ExecutionPlan& p) {
  int64_t reads = 0;
  for (const ir::Node& n : p.graph.nodes) reads += n.op == ir::Op::Matmul && n.attrs.has("b_packed") ? 1 : 0;
  return reads;
}

// f32 weights: the generator stores each matmul weight whose width is whole panels in the CPU
// GEMM's packed layout, and its prompt and decode plans read them in place with the bits of plain
// weights: the logits of both equal a generator's on a backend without packing, at 1 and 2
// threads, and so does the text.
TEST(Generate, F32WeightsStoredPackedKeepTheBits) {
  model::TinyLMConfig gpt{11, 16, 2, 2, 32, false};  // every block matrix whole 32-column panels
  model::TinyLMConfig llama = tiny_llama();
  llama.channels = 32, llama.ffn = 64;
  for (const model::TinyLMConfig& c : {gpt, llama}) {
    const Bindings params = tiny_params(c);
    for (int threads : {1, 2}) {
      set_cpu_threads(threads);
      Runtime packed_rt(make_cpu_backend());
      Runtime plain_rt(std::make_unique<test::CpuVariant>(test::CpuVariant::kUnpacked));
      auto packed = model::Generator::create(packed_rt, c, params);
      auto plain = model::Generator::create(plain_rt, c, params);
      ASSERT_OK(packed);
      ASSERT_OK(plain);
      for (const auto& [name, t] : params) EXPECT_TRUE(plain->state().get(name)->bitwise_equal(t)) << name;
      const int64_t B = 2, T = 5;
      Tensor prompt = Tensor::zeros(DType::i32, {B, T}), next = Tensor::zeros(DType::i32, {B, 1}), at = Tensor::zeros(DType::i32, {1});
      for (int64_t i = 0; i < B * T; ++i) prompt.data<int32_t>()[i] = static_cast<int32_t>((3 * i + 1) % c.vocab);
      next.data<int32_t>()[0] = 4, next.data<int32_t>()[1] = 9, at.data<int32_t>()[0] = static_cast<int32_t>(T);
      std::vector<std::vector<Tensor>> logits;
      for (auto [rt, gen] : {std::pair{&packed_rt, &*packed}, std::pair{&plain_rt, &*plain}}) {
        ASSERT_OK(gen->reserve(B));
        auto prefill = gen->prefill_plan(B, T);
        auto step = gen->decode_plan(B);
        ASSERT_OK(prefill);
        ASSERT_OK(step);
        // Every block matrix is read packed, on a vector ISA with packing.
        for (const auto* plan : {&**prefill, &**step}) {
          const bool packs = rt == &packed_rt && cpu::matmul_active_isa() != cpu::MatmulIsa::kScalar;
          EXPECT_EQ(packed_reads(*plan), packs ? 4 * c.layers : 0) << model::arch_name(c.arch) << " " << rt->backend().name();
        }
        auto p = rt->run(**prefill, {{"tokens", prompt}}, &gen->state());
        auto d = rt->run(**step, {{"tokens", next}, {"position", at}}, &gen->state());
        ASSERT_OK(p);
        ASSERT_OK(d);
        logits.push_back({(*p)[0], (*d)[0]});
      }
      EXPECT_TRUE(logits[0][0].bitwise_equal(logits[1][0])) << model::arch_name(c.arch) << " prompt, threads " << threads;
      // Both have the bits of the model's plain forward pass on the params as given (the tied
      // head read through its transposed copy, the weights packed).
      auto forward = model::build_tinylm_logits(c, B, T);
      ASSERT_OK(forward);
      Bindings in = params;
      in["tokens"] = prompt;
      auto plan = plain_rt.compile(*forward);
      ASSERT_OK(plan);
      auto all = plain_rt.run(**plan, in);
      ASSERT_OK(all);
      for (int64_t r = 0; r < B; ++r)
        for (int64_t v = 0; v < c.vocab; ++v)
          ASSERT_EQ(std::bit_cast<uint32_t>((*all)[0].data<float>()[(r * T + T - 1) * c.vocab + v]),
                    std::bit_cast<uint32_t>(logits[0][0].data<float>()[r * c.vocab + v]))
              << model::arch_name(c.arch) << " row " << r << " token " << v;
      EXPECT_TRUE(logits[0][1].bitwise_equal(logits[1][1])) << model::arch_name(c.arch) << " decode, threads " << threads;
      model::SampleOptions o;
      o.tokens = 24;  // past the context: a restart's prefill too
      o.batch = 2;
      auto a = packed->generate({1, 2, 3}, o);
      auto b = plain->generate({1, 2, 3}, o);
      ASSERT_OK(a);
      ASSERT_OK(b);
      EXPECT_EQ(*a, *b) << model::arch_name(c.arch);
    }
  }
  set_cpu_threads(0);
}

// bf16 / f16 weights stored packed: read in place panel by panel (decode-sized products) or
// widened in their layout (a longer prompt), with the bits of the same weights unpacked: the
// logits of 3 prompts of 5 positions and of a whole context (over 16 rows: the widened path)
// and of a decode step, and the text, at 1 and 2 threads.
TEST(Generate, HalfWeightsStoredPackedKeepTheBits) {
  model::TinyLMConfig gpt{11, 16, 2, 2, 32, false};  // every block matrix whole 32-column panels
  model::TinyLMConfig llama = tiny_llama();
  llama.channels = 32, llama.ffn = 64;
  for (const model::TinyLMConfig& c : {gpt, llama})
    for (DType half : {DType::bf16, DType::f16})
      for (int threads : {1, 2}) {
        set_cpu_threads(threads);
        const Bindings params = tiny_params(c);
        Runtime packed_rt(make_cpu_backend()), plain_rt(std::make_unique<test::CpuVariant>(test::CpuVariant::kUnpacked));
        auto packed = model::Generator::create(packed_rt, c, params, half);
        auto plain = model::Generator::create(plain_rt, c, params, half);
        ASSERT_OK(packed);
        ASSERT_OK(plain);
        const std::string what = std::string(model::arch_name(c.arch)) + " " + dtype_name(half) + " threads " + std::to_string(threads);
        const int64_t B = 3;
        for (int64_t T : {int64_t{5}, c.context}) {
          Tensor prompt = Tensor::zeros(DType::i32, {B, T}), next = Tensor::zeros(DType::i32, {B, 1}), at = Tensor::zeros(DType::i32, {1});
          for (int64_t i = 0; i < B * T; ++i) prompt.data<int32_t>()[i] = static_cast<int32_t>((5 * i + 2) % c.vocab);
          for (int64_t r = 0; r < B; ++r) next.data<int32_t>()[r] = static_cast<int32_t>((3 + 4 * r) % c.vocab);
          at.data<int32_t>()[0] = static_cast<int32_t>(T - 1);  // the step overwrites the last position
          std::vector<std::vector<Tensor>> logits;
          for (auto [rt, gen] : {std::pair{&packed_rt, &*packed}, std::pair{&plain_rt, &*plain}}) {
            ASSERT_OK(gen->reserve(B));
            auto prefill = gen->prefill_plan(B, T);
            auto step = gen->decode_plan(B);
            ASSERT_OK(prefill);
            ASSERT_OK(step);
            const bool packs = rt == &packed_rt && cpu::matmul_active_isa() != cpu::MatmulIsa::kScalar;
            EXPECT_EQ(packed_reads(**step), packs ? 4 * c.layers : 0) << what;
            auto p = rt->run(**prefill, {{"tokens", prompt}}, &gen->state());
            auto d = rt->run(**step, {{"tokens", next}, {"position", at}}, &gen->state());
            ASSERT_OK(p);
            ASSERT_OK(d);
            logits.push_back({(*p)[0], (*d)[0]});
          }
          EXPECT_TRUE(logits[0][0].bitwise_equal(logits[1][0])) << what << " prompt of " << T;
          EXPECT_TRUE(logits[0][1].bitwise_equal(logits[1][1])) << what << " decode after " << T;
        }
        model::SampleOptions o;
        o.tokens = 24;
        o.batch = 2;
        auto a = packed->generate({1, 2, 3}, o);
        auto b = plain->generate({1, 2, 3}, o);
        ASSERT_OK(a);
        ASSERT_OK(b);
        EXPECT_EQ(*a, *b) << what;
      }
  set_cpu_threads(0);
}

// Past the context the window restarts from its last `keep` tokens. The reference prefills the
// window a closed form gives for every step and takes the argmax, with no cache involved.
TEST(Generate, AFullWindowRestartsFromItsLastKeepTokens) {
  for (const model::TinyLMConfig& c : {tiny_config(), tiny_llama()}) {
    const Bindings params = tiny_params(c);
    Runtime rt(make_cpu_backend());
    auto gen = model::Generator::create(rt, c, params);
    ASSERT_OK(gen);
    for (int64_t keep : {int64_t{0}, int64_t{1}, int64_t{3}, c.context}) {
      const int64_t k = keep > 0 ? keep : c.context / 2;
      model::SampleOptions o;
      o.temperature = 0.0;
      o.tokens = 25;
      o.keep = keep;
      auto got = gen->generate({1, 2, 3}, o);
      ASSERT_OK(got);
      std::vector<int32_t> seq = {1, 2, 3};
      for (int64_t step = 0; step < o.tokens; ++step) {
        const int64_t len = static_cast<int64_t>(seq.size());
        // The window's first token: 0 until the context is full, then windows of k .. context
        // tokens, a restart every context - k + 1 tokens (every token when k is the context).
        const int64_t start = len <= c.context ? 0 : len - k - (len - c.context - 1) % (c.context - k + 1);
        Tensor tok = Tensor::zeros(DType::i32, {1, len - start});
        std::copy(seq.begin() + start, seq.end(), tok.data<int32_t>());
        auto plan = gen->prefill_plan(1, len - start);
        ASSERT_OK(plan);
        auto out = rt.run(**plan, {{"tokens", tok}}, &gen->state());
        ASSERT_OK(out);
        const float* logits = (*out)[0].data<float>();
        seq.push_back(static_cast<int32_t>(std::max_element(logits, logits + c.vocab) - logits));
      }
      EXPECT_EQ((*got)[0], std::vector<int32_t>(seq.begin() + 3, seq.end())) << model::arch_name(c.arch) << " keep " << keep;
    }
    model::SampleOptions wide;
    wide.keep = c.context + 1;
    EXPECT_ERROR_CONTAINS(gen->generate({1}, wide), "--keep must be at most the context (8), got 9");
    wide.keep = -1;
    EXPECT_ERROR_CONTAINS(gen->generate({1}, wide), "--keep must be >= 0, got -1");
  }
}

// One decode graph for every backend: fused into attention(q, k, v, position) where the backend
// has the op, the matmul / masked softmax / matmul over the whole cache where it does not.
TEST(Generate, TheFusedAndTheDecomposedDecodeStepGiveTheSameTokens) {
  const model::TinyLMConfig c = tiny_config();
  const Bindings params = tiny_params(c);
  Runtime full(make_cpu_backend());
  Runtime writes(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoCacheAttention));
  Runtime lacking(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoAttention));
  auto step = model::build_tinylm_decode(c, 2);
  ASSERT_OK(step);
  auto fused = full.compile(*step);
  auto separate = writes.compile(*step);
  auto unfused = lacking.compile(*step);
  ASSERT_OK(fused);
  ASSERT_OK(separate);
  ASSERT_OK(unfused);
  const auto layers = static_cast<size_t>(c.layers);
  EXPECT_EQ((*fused)->graph.nodes_of(ir::Op::CacheAttention).size(), layers);  // the writes in the attention
  EXPECT_EQ((*fused)->graph.nodes_of(ir::Op::CacheWrite).size(), 0u);
  EXPECT_EQ((*separate)->graph.nodes_of(ir::Op::Attention).size(), layers);
  EXPECT_EQ((*separate)->graph.nodes_of(ir::Op::CacheWrite).size(), 2 * layers);
  EXPECT_EQ((*unfused)->graph.nodes_of(ir::Op::Attention).size(), 0u);
  EXPECT_EQ((*unfused)->graph.nodes_of(ir::Op::CacheAttention).size(), 0u);
  model::SampleOptions o;
  o.temperature = 0.8;
  o.tokens = 12;
  o.batch = 2;
  o.seed = 3;
  auto a = generate(full, c, params, {4, 1}, o);
  auto b = generate(lacking, c, params, {4, 1}, o);
  auto w = generate(writes, c, params, {4, 1}, o);
  ASSERT_OK(a);
  ASSERT_OK(b);
  ASSERT_OK(w);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *w);
}

// Params that do not fit the model are an error naming the tensor.
TEST(Generate, ParamsThatDoNotFitTheModelAreAClearError) {
  const model::TinyLMConfig c = tiny_config();
  Bindings params = tiny_params(c);
  Runtime rt(make_cpu_backend());
  Bindings wrong = params;
  wrong["wpe"] = Tensor::zeros(DType::f32, {3, 3});
  EXPECT_ERROR_CONTAINS(model::Generator::create(rt, c, wrong), "param 'wpe' is f32[3,3] but the model wants f32[8,16]");
  wrong = params;
  wrong.erase("lnf.g");
  EXPECT_ERROR_CONTAINS(model::Generator::create(rt, c, wrong), "the model's param 'lnf.g' is missing");
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
  auto a = generate(rt, c, params, {4}, o);
  auto b = generate(rt, c, params, {4}, o);
  o.kv_cache = false;
  auto nc = generate(rt, c, params, {4}, o);
  o.kv_cache = true;
  o.seed = 12;
  auto other = generate(rt, c, params, {4}, o);
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

// Equal logits rank by id and a NaN below every number, so top-k keeps the same tokens on every
// run; a scratch kept across calls gives the same draws as a fresh one.
TEST(Generate, SampleTokenRanksTiesByIdAndNanLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float ties[5] = {0.0f, 2.0f, nan, 2.0f, 2.0f};
  model::SampleOptions top1;
  top1.top_k = 1;
  EXPECT_EQ(model::sample_token(ties, 5, top1, 0.9), 1);  // of the three 2.0s, the lowest id
  model::SampleOptions top3;
  top3.top_k = 3;  // tokens 1, 3, 4 at a third each
  EXPECT_EQ(model::sample_token(ties, 5, top3, 0.10), 1);
  EXPECT_EQ(model::sample_token(ties, 5, top3, 0.50), 3);
  EXPECT_EQ(model::sample_token(ties, 5, top3, 0.90), 4);
  model::SampleOptions top4;
  top4.top_k = 4;  // then token 0, never the NaN
  EXPECT_EQ(model::sample_token(ties, 5, top4, 0.9999), 0);
  model::SampleScratch scratch;
  for (double u : {0.1, 0.5, 0.9, 0.999})
    for (const model::SampleOptions& o : {top1, top3, top4})
      EXPECT_EQ(model::sample_token(ties, 5, o, u, scratch), model::sample_token(ties, 5, o, u));
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
