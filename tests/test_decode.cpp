// TinyLM's decode step against its KV cache: the bits of the prefill, the caches it leaves, the
// cache write, and what a step moves between host and device.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cpu_variant.h"
#include "model/generate.h"
#include "test_util.h"
#include "tiny_lm.h"
#include "volta/passes.h"

namespace volta {
namespace {

model::TinyLMConfig tiny_config() { return test::tiny_gpt(); }
using test::tiny_llama;
using test::tiny_params;

// The decode step at position p, after a prefill of positions 0..p-1, gives the bits of the
// prefill of positions 0..p at its last position, and leaves the caches as that prefill does:
// fused (its cache writes in the attention or not) or decomposed, the key caches rows or columns
// (stored transposed: the CPU's layout), with 1 and 2 threads; and the logits have the same bits
// whichever the layout. A position outside the cache is an error naming the node.
void decode_step_has_the_bits_of_the_prefill(const model::TinyLMConfig& c, bool unfused, const std::string& past_error) {
  const Bindings params = tiny_params(c);
  const int64_t B = 2;
  std::vector<int32_t> seq = {3, 7, 1, 9, 2, 2, 5, 10, 4, 6, 8, 0, 1, 3, 5, 7};  // two rows of 8
  auto tokens = [&](int64_t n) {
    Tensor t = Tensor::zeros(DType::i32, {B, n});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[b * n + i] = seq[static_cast<size_t>(b * c.context + i)];
    return t;
  };
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    Runtime full(make_cpu_backend());
    Runtime writes(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoCacheAttention));
    Runtime rows(std::make_unique<test::CpuVariant>(test::CpuVariant::kKeyRows));
    Runtime lacking(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoAttention));
    Runtime lacking_columns(std::make_unique<test::CpuVariant>(test::CpuVariant::kNoAttentionKeyColumns));
    std::vector<Runtime*> runtimes{&full, &writes, &rows};
    if (unfused) runtimes.push_back(&lacking), runtimes.push_back(&lacking_columns);
    std::vector<Tensor> first_logits;  // each position's step, from the first runtime
    for (Runtime* rt : runtimes) {
      const bool columns = rt != &rows && rt != &lacking;
      EXPECT_EQ(model::key_cache_layout(*rt), columns ? model::KeyCache::Columns : model::KeyCache::Rows) << rt->backend().name();
      auto gen = model::Generator::create(*rt, c, params);
      ASSERT_OK(gen);
      size_t step_index = 0;
      ASSERT_OK(gen->reserve(B));
      auto step = gen->decode_plan(B);
      ASSERT_OK(step);
      // Position 0: the step after no prefill at all (a one-token prompt's first token).
      for (int64_t pos : {int64_t{0}, int64_t{1}, int64_t{4}, c.context - 1}) {
        auto whole = gen->prefill_plan(B, pos + 1);
        ASSERT_OK(whole);
        auto cache_name = [](size_t i) { return (i % 2 ? "cache.v." : "cache.k.") + std::to_string(i / 2); };
        std::vector<Tensor> caches(static_cast<size_t>(2 * c.layers));
        auto clear_caches = [&] {  // zeros, so only rows written since count
          for (size_t i = 0; i < caches.size(); ++i) {
            auto t = gen->state().get(cache_name(i));
            ASSERT_OK(t);
            ASSERT_OK(gen->state().put(cache_name(i), Tensor::zeros(t->dtype(), t->shape()), plan::MemClass::KvCache));
          }
        };
        clear_caches();
        auto want = rt->run(**whole, {{"tokens", tokens(pos + 1)}}, &gen->state());
        ASSERT_OK(want);
        for (size_t i = 0; i < caches.size(); ++i) {  // as the whole prefill leaves them: the step must write the same rows
          auto t = gen->state().get(cache_name(i));
          ASSERT_OK(t);
          caches[i] = *t;
        }
        clear_caches();
        if (pos > 0) {
          auto part = gen->prefill_plan(B, pos);
          ASSERT_OK(part);
          ASSERT_OK(rt->run(**part, {{"tokens", tokens(pos)}}, &gen->state()));
        }
        Tensor last = Tensor::zeros(DType::i32, {B, 1});
        for (int64_t b = 0; b < B; ++b) last.data<int32_t>()[b] = seq[static_cast<size_t>(b * c.context + pos)];
        Tensor at = Tensor::zeros(DType::i32, {1});
        at.data<int32_t>()[0] = static_cast<int32_t>(pos);
        auto got = rt->run(**step, {{"tokens", last}, {"position", at}}, &gen->state());
        ASSERT_OK(got);
        EXPECT_TRUE((*got)[0].bitwise_equal((*want)[0])) << rt->backend().name() << " pos " << pos << " threads " << threads;
        if (rt == runtimes[0]) first_logits.push_back((*got)[0]);
        else EXPECT_TRUE((*got)[0].bitwise_equal(first_logits.at(step_index))) << rt->backend().name() << " pos " << pos;
        ++step_index;
        for (size_t i = 0; i < caches.size(); ++i) {
          auto t = gen->state().get(cache_name(i));
          ASSERT_OK(t);
          EXPECT_TRUE(t->bitwise_equal(caches[i])) << "cache " << i << " pos " << pos << " threads " << threads;
        }
      }
      Tensor past = Tensor::zeros(DType::i32, {1});
      past.data<int32_t>()[0] = static_cast<int32_t>(c.context);
      auto out = rt->run(**step, {{"tokens", Tensor::zeros(DType::i32, {B, 1})}, {"position", past}}, &gen->state());
      EXPECT_ERROR_CONTAINS(out, past_error);
    }
  }
  set_cpu_threads(0);
}

TEST(Generate, DecodeStepHasTheBitsOfThePrefill) {
  decode_step_has_the_bits_of_the_prefill(tiny_config(), true, "[embedding] id 8 at flat position 0 is outside [0, 8) (node 'pos_emb')");
}

// The llama variant's step emits attention itself (grouped queries over the cache in place): no
// decomposed form. Its first use of the position is the queries' rotation.
TEST(Generate, LlamaDecodeStepHasTheBitsOfThePrefill) {
  decode_step_has_the_bits_of_the_prefill(tiny_llama(), false, "[rope] position 8 is outside [0, 7] (node 'h0.attn.q_rot')");
}

// cache_write writes the state in place, its value is the written cache, and a position past the
// cache is an error naming the node (never a write out of bounds).
TEST(Generate, CacheWriteWritesTheStateInPlace) {
  ModelBuilder b("write");
  const ParamInit state{"zeros", 0.0, 0.0, false};
  Value w = b.op(ir::Op::CacheWrite, {b.param("cache", {DType::f32, {2, 4, 3}}, state), b.input("rows", {DType::f32, {2, 2, 3}}),
                                      b.input("position", {DType::i32, {1}})}, {}, "w");
  b.output(b.mul(w, b.scalar(2.0f), "twice"));
  auto g = b.build();
  ASSERT_OK(g);
  for (bool device : {false, true}) {
    Runtime rt = device ? Runtime(std::make_unique<test::CpuVariant>(test::CpuVariant::kDevice)) : Runtime(make_cpu_backend());
    auto plan = rt.compile(*g);
    ASSERT_OK(plan);
    State s(rt.backend());
    ASSERT_OK(s.put("cache", Tensor::zeros(DType::f32, {2, 4, 3}), plan::MemClass::KvCache));
    Tensor rows = Tensor::zeros(DType::f32, {2, 2, 3});
    for (int64_t i = 0; i < rows.numel(); ++i) rows.data<float>()[i] = static_cast<float>(i + 1);
    Tensor at = Tensor::zeros(DType::i32, {1});
    at.data<int32_t>()[0] = 1;
    auto out = rt.run(**plan, {{"position", at}, {"rows", rows}}, &s);
    ASSERT_OK(out);
    auto cache = s.get("cache");
    ASSERT_OK(cache);
    const std::vector<float> want = {0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, 0};
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(cache->data<float>()[i], want[i]) << i;
      EXPECT_EQ((*out)[0].data<float>()[i], 2 * want[i]) << i;
    }
    at.data<int32_t>()[0] = 3;  // rows 3 and 4 of 4
    EXPECT_ERROR_CONTAINS(rt.run(**plan, {{"position", at}, {"rows", rows}}, &s), "[cache_write] position 3 is outside [0, 2] (node 'w')");
    at.data<int32_t>()[0] = -1;
    EXPECT_ERROR_CONTAINS(rt.run(**plan, {{"position", at}, {"rows", rows}}, &s), "position -1 is outside [0, 2]");
  }
}

// A transposed cache_write (a key cache stored [.., D, S]) writes each row as a column, in place;
// rows that do not fit the columns and a position past them are errors naming the node.
TEST(Generate, TransposedCacheWriteWritesColumns) {
  ModelBuilder b("write");
  const ParamInit state{"zeros", 0.0, 0.0, false};
  b.output(b.op(ir::Op::CacheWrite, {b.param("cache", {DType::f32, {2, 3, 4}}, state), b.input("rows", {DType::f32, {2, 2, 3}}),
                                     b.input("position", {DType::i32, {1}})},
                {{"transposed", int64_t{1}}}, "w"));
  auto g = b.build();
  ASSERT_OK(g);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(*g);
  ASSERT_OK(plan);
  State s(rt.backend());
  ASSERT_OK(s.put("cache", Tensor::zeros(DType::f32, {2, 3, 4}), plan::MemClass::KvCache));
  Tensor rows = Tensor::zeros(DType::f32, {2, 2, 3});
  for (int64_t i = 0; i < rows.numel(); ++i) rows.data<float>()[i] = static_cast<float>(i + 1);
  Tensor at = Tensor::zeros(DType::i32, {1});
  at.data<int32_t>()[0] = 2;  // columns 2 and 3 of 4
  ASSERT_OK(rt.run(**plan, {{"position", at}, {"rows", rows}}, &s));
  auto cache = s.get("cache");
  ASSERT_OK(cache);
  const std::vector<float> want = {0, 0, 1, 4, 0, 0, 2, 5, 0, 0, 3, 6, 0, 0, 7, 10, 0, 0, 8, 11, 0, 0, 9, 12};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(cache->data<float>()[i], want[i]) << i;
  at.data<int32_t>()[0] = 3;
  EXPECT_ERROR_CONTAINS(rt.run(**plan, {{"position", at}, {"rows", rows}}, &s), "[cache_write] position 3 is outside [0, 2] (node 'w')");
  ModelBuilder bad("bad");
  bad.output(bad.op(ir::Op::CacheWrite, {bad.param("cache", {DType::f32, {2, 3, 4}}, state), bad.input("rows", {DType::f32, {2, 2, 4}}),
                                         bad.input("position", {DType::i32, {1}})},
                    {{"transposed", int64_t{1}}}, "w"));
  EXPECT_ERROR_CONTAINS(bad.build(), "its axis -2 as their last");
}

// cache_attention writes its new rows into the caches in place (those are state, class
// kv_cache), and a position past the caches is an error naming the node, never a write out of
// bounds.
TEST(Generate, CacheAttentionWritesTheCachesInPlace) {
  ModelBuilder b("attend");
  const ParamInit state{"zeros", 0.0, 0.0, false};
  const TensorType cache{DType::f32, {1, 2, 4, 2}}, rows{DType::f32, {1, 2, 1, 2}};
  b.output(b.op(ir::Op::CacheAttention,
                {b.input("q", {DType::f32, {1, 2, 1, 2}}), b.param("ck", cache, state), b.param("cv", cache, state),
                 b.input("k", rows), b.input("v", rows), b.input("position", {DType::i32, {1}})},
                {{"causal_offset", int64_t{0}}}, "att"));
  auto g = b.build();
  ASSERT_OK(g);
  Runtime rt(make_cpu_backend());
  auto plan = rt.compile(*g);
  ASSERT_OK(plan);
  EXPECT_EQ((*plan)->memory.peak[static_cast<size_t>(plan::MemClass::KvCache)], 2 * cache.bytes());
  State s(rt.backend());
  ASSERT_OK(s.put("ck", Tensor::zeros(DType::f32, {1, 2, 4, 2}), plan::MemClass::KvCache));
  ASSERT_OK(s.put("cv", Tensor::zeros(DType::f32, {1, 2, 4, 2}), plan::MemClass::KvCache));
  Tensor k = Tensor::zeros(DType::f32, {1, 2, 1, 2}), v = Tensor::zeros(DType::f32, {1, 2, 1, 2});
  const Tensor q = Tensor::zeros(DType::f32, {1, 2, 1, 2});
  for (int64_t i = 0; i < 4; ++i) k.data<float>()[i] = static_cast<float>(i + 1), v.data<float>()[i] = static_cast<float>(-i - 1);
  Tensor at = Tensor::zeros(DType::i32, {1});
  at.data<int32_t>()[0] = 2;
  auto out = rt.run(**plan, {{"q", q}, {"k", k}, {"v", v}, {"position", at}}, &s);
  ASSERT_OK(out);
  auto ck = s.get("ck"), cv = s.get("cv");
  ASSERT_OK(ck);
  ASSERT_OK(cv);
  const std::vector<float> want = {0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 3, 4, 0, 0};  // row 2 of each head
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(ck->data<float>()[i], want[i]) << i;
    EXPECT_EQ(cv->data<float>()[i], -want[i]) << i;
  }
  at.data<int32_t>()[0] = 4;
  EXPECT_ERROR_CONTAINS(rt.run(**plan, {{"q", q}, {"k", k}, {"v", v}, {"position", at}}, &s),
                        "[cache_attention] position 4 is outside [0, 3] (node 'att')");
  auto after = s.get("ck");
  ASSERT_OK(after);
  EXPECT_TRUE(after->bitwise_equal(*ck));
}

// fuse_cache_attention folds the two writes into the attention that reads them only when that
// attention is each write's one reader and the writes fill two caches.
TEST(Passes, FuseCacheAttentionNeedsTwoCachesAndOneReader) {
  auto graph = [](const std::string& v_cache, const std::string& outputs) {
    return test::parse_ir(R"(graph g {
  %q: f32[1,2,1,4] = input()
  %k: f32[1,2,1,4] = input()
  %v: f32[1,2,1,4] = input()
  %p: i32[1] = input()
  %ck: f32[1,2,6,4] = param()
  %cv: f32[1,2,6,4] = param()
  %kw: f32[1,2,6,4] = cache_write(%ck, %k, %p)
  %vw: f32[1,2,6,4] = cache_write(%)" + v_cache + R"(, %v, %p)
  %y: f32[1,2,1,4] = attention(%q, %kw, %vw, %p) {causal_offset=0, scale=0.5}
  return )" + outputs + "\n}\n");
  };
  auto count = [](const ir::Graph& g, ir::Op op) {
    size_t n = 0;
    for (const ir::Node& x : g.nodes) n += x.op == op;
    return n;
  };
  auto fused = passes::fuse_cache_attention(graph("cv", "%y"));
  ASSERT_OK(fused);
  EXPECT_EQ(count(*fused, ir::Op::CacheAttention), 1u);
  EXPECT_EQ(count(*fused, ir::Op::CacheWrite), 0u);
  for (const auto& [v_cache, outputs] : {std::pair{"ck", "%y"}, std::pair{"cv", "%y, %kw"}}) {
    auto kept = passes::fuse_cache_attention(graph(v_cache, outputs));
    ASSERT_OK(kept);
    EXPECT_EQ(count(*kept, ir::Op::CacheAttention), 0u) << v_cache << " " << outputs;
    EXPECT_EQ(count(*kept, ir::Op::CacheWrite), 2u);
  }
  // A key cache written as columns and read so fuses with keys_transposed; a layout written one
  // way and read the other (a square cache type-checks either way) stays unfused.
  auto layouts = [](const std::string& write, const std::string& read) {
    return test::parse_ir(R"(graph g {
  %q: f32[1,2,1,4] = input()
  %k: f32[1,2,1,4] = input()
  %v: f32[1,2,1,4] = input()
  %p: i32[1] = input()
  %ck: f32[1,2,4,4] = param()
  %cv: f32[1,2,4,4] = param()
  %kw: f32[1,2,4,4] = cache_write(%ck, %k, %p) {transposed=)" + write + R"(}
  %vw: f32[1,2,4,4] = cache_write(%cv, %v, %p)
  %y: f32[1,2,1,4] = attention(%q, %kw, %vw, %p) {causal_offset=0, keys_transposed=)" + read + R"(}
  return %y
}
)");
  };
  auto columns = passes::fuse_cache_attention(layouts("1", "1"));
  ASSERT_OK(columns);
  ASSERT_EQ(count(*columns, ir::Op::CacheAttention), 1u);
  for (const ir::Node& n : columns->nodes) {
    if (n.op == ir::Op::CacheAttention) {
      EXPECT_EQ(*n.attrs.get_int("keys_transposed", 0), 1);
    }
  }
  for (const auto& [write, read] : {std::pair{"1", "0"}, std::pair{"0", "1"}}) {
    auto kept = passes::fuse_cache_attention(layouts(write, read));
    ASSERT_OK(kept);
    EXPECT_EQ(count(*kept, ir::Op::CacheAttention), 0u) << write << " " << read;
  }
}

// The key caches stored transposed ([B, H, hd, context]): the scores product reads them as they
// lie, and the pipeline fuses it into attention with keys_transposed (its cache writes kept, or
// folded into cache_attention, the key cache's written as columns); without the pass (a backend
// without the feature) it stays the product.
TEST(Passes, KeyColumnsDecodeFusesWithKeysTransposed) {
  model::TinyLMConfig c;
  auto count = [](const ir::Graph& g, ir::Op op) {
    size_t n = 0;
    for (const ir::Node& x : g.nodes) n += x.op == op;
    return n;
  };
  passes::PipelineOptions unfused_writes;
  unfused_writes.disabled = {"fuse_cache_attention"};
  auto columns = model::build_tinylm_decode(c, 1, model::KeyCache::Columns);
  ASSERT_OK(columns);
  for (bool cache_attention : {false, true}) {
    auto d = passes::run_pipeline(*columns, cache_attention ? passes::PipelineOptions{} : unfused_writes);
    ASSERT_OK(d);
    const ir::Op fused = cache_attention ? ir::Op::CacheAttention : ir::Op::Attention;
    EXPECT_EQ(count(*d, fused), static_cast<size_t>(c.layers));
    EXPECT_EQ(count(*d, ir::Op::Softmax), 0u);
    EXPECT_EQ(count(*d, ir::Op::CacheWrite), cache_attention ? 0u : static_cast<size_t>(2 * c.layers));
    for (const ir::Node& n : d->nodes) {
      if (n.op == fused) {
        EXPECT_EQ(*n.attrs.get_int("keys_transposed", 0), 1);
        EXPECT_EQ(d->node(n.inputs[1]).type.shape, (Shape{1, c.heads, c.head_dim(), c.context}));
      }
      if (n.op == ir::Op::CacheWrite) {
        EXPECT_EQ(*n.attrs.get_int("transposed", 0), n.name.ends_with("k_cache") ? 1 : 0) << n.name;
      }
    }
  }
  passes::PipelineOptions no_columns;
  no_columns.disabled = {"fuse_attention_keys_transposed"};
  auto d = passes::run_pipeline(*columns, no_columns);
  ASSERT_OK(d);
  EXPECT_EQ(count(*d, ir::Op::Attention), 0u);
  EXPECT_EQ(count(*d, ir::Op::Softmax), static_cast<size_t>(c.layers));
}

// keys_transposed is the position form's: with q, k and v alone it is an error naming the op.
TEST(Generate, KeysTransposedNeedsThePositionForm) {
  ModelBuilder b("attend");
  auto q = b.input("q", {DType::f32, {1, 2, 3, 4}});
  auto kt = b.input("kt", {DType::f32, {1, 2, 4, 3}});
  auto v = b.input("v", {DType::f32, {1, 2, 3, 4}});
  b.output(b.op(ir::Op::Attention, {q, kt, v}, {{"keys_transposed", int64_t{1}}}, "att"));
  EXPECT_ERROR_CONTAINS(b.build(), "[attention] keys_transposed takes q, k, v and a position only");
}

// A transposed key cache of the wrong size is named as written ([..., D, S]), not as the rows it holds.
TEST(Generate, KeysTransposedMismatchNamesTheKeysAsGiven) {
  {
    ModelBuilder b("attend");
    auto q = b.input("q", {DType::f32, {1, 2, 1, 4}});
    auto kt = b.input("kt", {DType::f32, {1, 2, 5, 8}});  // D 5 against q's 4
    auto v = b.input("v", {DType::f32, {1, 2, 8, 4}});
    auto pos = b.input("pos", {DType::i32, {1}});
    b.output(b.op(ir::Op::Attention, {q, kt, v, pos}, {{"keys_transposed", int64_t{1}}}, "att"));
    EXPECT_ERROR_CONTAINS(b.build(), "(k f32[1,2,5,8] is read as keys_transposed, f32[1,2,8,5])");
  }
  ModelBuilder b("cached");
  auto q = b.input("q", {DType::f32, {1, 2, 1, 4}});
  auto kc = b.input("kc", {DType::f32, {1, 2, 5, 8}});
  auto vc = b.input("vc", {DType::f32, {1, 2, 8, 4}});
  auto k = b.input("k", {DType::f32, {1, 2, 1, 4}});
  auto v = b.input("v", {DType::f32, {1, 2, 1, 4}});
  auto pos = b.input("pos", {DType::i32, {1}});
  b.output(b.op(ir::Op::CacheAttention, {q, kc, vc, k, v, pos}, {{"keys_transposed", int64_t{1}}}, "att"));
  EXPECT_ERROR_CONTAINS(b.build(), "k cache f32[1,2,5,8] and v cache f32[1,2,8,4] do not match q f32[1,2,1,4] (want [..., D, S]");
}

// On a device, the caches and params stay there: a decode step uploads the token ids and the
// position, downloads the logits, and nothing else crosses.
TEST(Generate, ADecodeStepMovesOnlyTokenIdsPositionAndLogits) {
  const model::TinyLMConfig c = tiny_config();
  const Bindings params = tiny_params(c);
  auto* dev = new test::CpuVariant(test::CpuVariant::kDevice);
  Runtime rt{std::unique_ptr<Backend>(dev)};
  auto gen = model::Generator::create(rt, c, params);
  ASSERT_OK(gen);
  size_t param_bytes = 0;
  for (const auto& [name, t] : params) param_bytes += t.bytes();
  EXPECT_EQ(gen->state().uploaded_bytes(), param_bytes);
  const int64_t B = 3;
  model::SampleOptions o;
  o.temperature = 0.0;
  o.batch = B;
  o.tokens = 1;  // the prefill alone: its plan, its constants
  ASSERT_OK(gen->generate({1, 2}, o));
  const size_t cache_bytes = static_cast<size_t>(2 * c.layers * B * c.heads * c.context * c.head_dim()) * sizeof(float);
  EXPECT_EQ(gen->state().bytes(plan::MemClass::KvCache), cache_bytes);
  EXPECT_EQ(gen->state().uploaded_bytes(), param_bytes + cache_bytes);  // the caches start as zeros, once
  o.tokens = 2;  // the prefill and one decode step, which compiles the step plan and uploads its constants
  ASSERT_OK(gen->generate({1, 2}, o));
  const TransferStats before = rt.transfers();
  const size_t copied = dev->copied_in;
  o.tokens = 5;  // the prefill again and four decode steps
  ASSERT_OK(gen->generate({1, 2}, o));
  const size_t prefill_in = static_cast<size_t>(B * 2) * 4, step_in = static_cast<size_t>(B) * 4 + 4;
  const size_t logits = static_cast<size_t>(B * c.vocab) * 4;
  EXPECT_EQ(rt.transfers().h2d_bytes - before.h2d_bytes, prefill_in + 4 * step_in);
  EXPECT_EQ(rt.transfers().d2h_bytes - before.d2h_bytes, 5 * logits);
  EXPECT_EQ(rt.transfers().param_uploads, before.param_uploads);
  EXPECT_EQ(dev->copied_in - copied, prefill_in + 4 * step_in);
  EXPECT_EQ(gen->state().uploaded_bytes(), param_bytes + cache_bytes);
  // A one-token prompt needs no prefill: its first token is a decode step at position 0.
  const TransferStats one = rt.transfers();
  o.tokens = 3;
  auto three = gen->generate({1}, o);
  ASSERT_OK(three);
  EXPECT_EQ(rt.transfers().h2d_bytes - one.h2d_bytes, 3 * step_in);
  EXPECT_EQ(rt.transfers().d2h_bytes - one.d2h_bytes, 3 * logits);
  // ...with the tokens of the generation that prefills every window.
  o.kv_cache = false;
  auto plain = gen->generate({1}, o);
  ASSERT_OK(plain);
  EXPECT_EQ(*three, *plain);
}

}  // namespace
}  // namespace volta
