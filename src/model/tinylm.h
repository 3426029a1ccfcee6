// TinyLM: a GPT-style decoder built with the ModelBuilder. Token + learned position embeddings,
// pre-LayerNorm blocks of causal multi-head self-attention and a 4x GELU MLP with residuals, a
// final LayerNorm and an LM head tied to the token embedding.
#pragma once

#include <string>

#include "volta/builder.h"

namespace volta::model {

struct TinyLMConfig {
  int64_t vocab = 65;
  int64_t context = 64;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t channels = 128;
  bool bias = false;  // biases on linear layers and LayerNorms

  int64_t head_dim() const { return channels / heads; }
};

Status validate(const TinyLMConfig& c);
std::string config_to_json(const TinyLMConfig& c);
Result<TinyLMConfig> config_from_json(const std::string& text);

// Training / evaluation: tokens, targets i32 [B, T] -> mean cross-entropy; outputs: loss.
Result<ir::Graph> build_tinylm_loss(const TinyLMConfig& c, int64_t batch, int64_t T);

// Scoring / export: tokens i32 [B, T] -> outputs: logits [B, T, V] of every position.
Result<ir::Graph> build_tinylm_logits(const TinyLMConfig& c, int64_t batch, int64_t T);

// Inference keeps each layer's keys and values in a KV cache, params "cache.k.l" and "cache.v.l"
// of [B, H, context, hd] (not trainable, zeros at first): the session's state, which the graphs
// write in place (cache_write) and read where they are (kv_cache_names lists them).
//
// Prefill: tokens i32 [B, T] -> outputs: logits of the last position [B, V]; writes positions
// 0..T-1 of every cache.
Result<ir::Graph> build_tinylm_prefill(const TinyLMConfig& c, int64_t batch, int64_t T);

// One decode step, the same graph for every position and backend: tokens i32 [B, 1] and
// position i32 [1] (the new token's position, the rows already cached) -> outputs: logits
// [B, V]; writes the new position's keys and values into the caches, then attends over rows
// 0..position of each, in place (one attention op where the backend has it, the matmul /
// masked softmax / matmul it fuses from otherwise).
Result<ir::Graph> build_tinylm_decode(const TinyLMConfig& c, int64_t batch);

std::vector<std::string> kv_cache_names(const TinyLMConfig& c);

// Names of the params in the order the builders create them.
std::vector<std::string> tinylm_param_names(const TinyLMConfig& c);

}  // namespace volta::model
