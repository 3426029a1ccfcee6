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

// Prefill: tokens i32 [B, T] -> outputs: logits of the last position [B, V], then for each
// layer l the keys and values of every position, "k.l" and "v.l" [B, H, T, hd].
Result<ir::Graph> build_tinylm_prefill(const TinyLMConfig& c, int64_t batch, int64_t T);

// One decode step at position `pos`: token i32 [B, 1] and per-layer caches "cache.k.l",
// "cache.v.l" [B, H, context, hd] whose first pos positions hold positions 0..pos-1 (the rest is
// not read) -> outputs: logits [B, V], then the new position's "k.l", "v.l" [B, H, 1, hd] for
// each layer. The caller keeps the caches and writes each new position into them in place.
Result<ir::Graph> build_tinylm_decode(const TinyLMConfig& c, int64_t batch, int64_t pos);

// The same step for every position, compiled once: "positions" i32 [1] (the new token's
// position) and "cache.length" i32 [1] (the positions held in the caches, equal to it) are
// inputs, and each layer's `attention` reads that many cache rows. Needs a backend with the
// `attention` op; the same bits as build_tinylm_decode at that position.
Result<ir::Graph> build_tinylm_decode_step(const TinyLMConfig& c, int64_t batch);

// Names of the params in the order the builders create them.
std::vector<std::string> tinylm_param_names(const TinyLMConfig& c);

}  // namespace volta::model
