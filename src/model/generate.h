// Text generation with TinyLM: a prefill plan for the prompt, then one decode plan per
// position that reads the KV cache (per layer, per head: [B, H, pos, hd]) instead of
// recomputing past keys and values. Both run through the Runtime; plans are cached by shape.
#pragma once

#include <string>
#include <vector>

#include "model/tinylm.h"
#include "volta/runtime.h"

namespace volta::model {

struct SampleOptions {
  int64_t tokens = 200;      // new tokens per sample
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // nucleus mass
  uint64_t seed = 0;
  int64_t batch = 1;         // independent samples of the same prompt
  bool kv_cache = true;
};

// Fails naming the option that is out of range (`vocab` bounds top_k).
Status validate(const SampleOptions& o, int64_t vocab);

// Returns `batch` continuations (new token ids only). The model sees the last `context`
// tokens; with the cache, a window that slides past the context is recomputed from scratch,
// exactly as without the cache, so greedy output is identical either way.
Result<std::vector<std::vector<int32_t>>> generate(Runtime& rt, const TinyLMConfig& c, const Bindings& params,
                                                   const std::vector<int32_t>& prompt, const SampleOptions& o);

// Picks a token from one row of logits: argmax at temperature 0, else a draw with uniform `u`
// from the temperature / top-k / top-p distribution (computed in double).
int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& o, double u);

}  // namespace volta::model
