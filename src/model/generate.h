// Text generation with TinyLM: the Generator holds the model's inference state on the runtime's
// backend (params uploaded once, one KV cache per layer) and runs two kinds of plan on it: a
// prefill of the prompt, which fills the caches, and one decode step for every position, which
// writes its new keys and values into them and attends over them in place. Per token only the
// token ids and the position go in, and the logits come out.
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/tinylm.h"
#include "volta/runtime.h"
#include "volta/state.h"

namespace volta::model {

struct SampleOptions {
  int64_t tokens = 200;      // new tokens per sample
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // nucleus mass
  uint64_t seed = 0;
  int64_t batch = 1;         // independent samples of the same prompt
  bool kv_cache = true;
  // Tokens a full window keeps when it moves on (0: half the context). The context itself slides
  // the window by one token, re-encoding a whole window per token (the widest view, the slowest).
  int64_t keep = 0;
};

// Fails naming the option that is out of range (`vocab` bounds top_k).
Status validate(const SampleOptions& o, int64_t vocab);

// The key cache layout the runtime's backend reads best: Columns where its attention reads keys
// as columns ("attention.keys_transposed") and the pass that fuses that form runs, else Rows (so
// `--compare-disable-pass fuse_attention_keys_transposed` times the two layouts).
KeyCache key_cache_layout(Runtime& rt, const CompileOptions& opts = {});

class Generator {
 public:
  // Uploads `params` (every TinyLM param of `c`, checked by name and type) into a State on rt's
  // backend. With `weights` bf16 or f16 the matmul weights are narrowed to it once here and the
  // plans read them so (passes::store_weights_as); either way they are stored in the backend's
  // packed layout where it has one (passes::store_weights_packed). Its plans are compiled with
  // `opts` (a pass switched off, to time what it gains). The runtime must outlive the generator.
  static Result<Generator> create(Runtime& rt, const TinyLMConfig& c, const Bindings& params, DType weights = DType::f32,
                                  CompileOptions opts = {});

  // Returns `batch` continuations (new token ids only). The model sees a window of at most
  // `context` tokens; when it would overflow, it restarts from its last `keep` tokens (one
  // prefill), as llama.cpp's context shift does. With or without the cache the window moves
  // alike, so the output is identical either way.
  Result<std::vector<std::vector<int32_t>>> generate(const std::vector<int32_t>& prompt, const SampleOptions& o);

  // Allocates the KV caches for `batch` sequences (zeros), replacing those of another batch size.
  Status reserve(int64_t batch);
  // The prefill plan for (batch, T) and the decode-step plan for batch, compiled once each.
  Result<std::shared_ptr<const plan::ExecutionPlan>> prefill_plan(int64_t batch, int64_t T);
  Result<std::shared_ptr<const plan::ExecutionPlan>> decode_plan(int64_t batch);

  State& state() { return state_; }
  const TinyLMConfig& config() const { return c_; }

 private:
  Generator(Runtime& rt, const TinyLMConfig& c, DType weights, CompileOptions opts)
      : rt_(&rt), c_(c), config_(config_to_json(c) + " weights=" + dtype_name(weights)), weights_(weights),
        compile_(std::move(opts)), state_(rt.backend()) {}
  // `g` with the weights in weights_ (as is for f32).
  Result<ir::Graph> with_weights(Result<ir::Graph> g) const;
  // Whether params read transposed get a transposed copy (passes::untie_transposed_weights): on
  // host memory, where the CPU's decode products would transpose them on every call.
  bool unties() const { return rt_->backend().host_memory(); }
  Runtime* rt_;
  TinyLMConfig c_;
  std::string config_;  // the model's JSON and the weights' dtype, part of the plan keys
  DType weights_;
  CompileOptions compile_;  // every plan's (the runtime keys its plans by the pipeline too)
  std::map<std::string, std::array<int64_t, 2>> packed_;  // matmul weights stored packed: their layouts
  State state_;
  int64_t cache_batch_ = 0;  // the batch size the caches hold (0: none yet)
  KeyCache keys_ = KeyCache::Rows;  // Columns where the backend's attention reads keys so
};

// The params inference reads only as matmul weights, which `--weights bf16 | f16` stores so
// (every block's matrices and the llama head; not the GPT's tied embedding).
Result<std::vector<std::string>> matmul_weights(const TinyLMConfig& c);
// `params` as plans built for `weights` read them: those named in `matmul` (matmul_weights, or
// the names store_weights_as returned) in `weights`, every other one in f32. Stored half values
// (an inference checkpoint) are widened exactly first.
Bindings params_as(Bindings params, const std::vector<std::string>& matmul, DType weights);

// Picks a token from one row of logits: argmax at temperature 0, else a draw with uniform `u`
// from the temperature / top-k / top-p distribution (computed in double). Equal logits rank by
// id; a NaN ranks below every number.
int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& o, double u);
// The same with the ranking's buffers kept by the caller, who then allocates once per generation.
struct SampleScratch {
  std::vector<int32_t> order;
  std::vector<double> p;
};
int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& o, double u, SampleScratch& scratch);

}  // namespace volta::model
