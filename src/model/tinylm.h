// TinyLM: a decoder built with the ModelBuilder, in two variants.
// - gpt: token + learned position embeddings, pre-LayerNorm blocks of causal multi-head
//   self-attention and a 4x GELU MLP with residuals, a final LayerNorm and an LM head tied to the
//   token embedding.
// - llama: token embeddings, pre-RMSNorm blocks of causal grouped-query self-attention (kv_heads
//   key/value heads) with rotary position embeddings on queries and keys, and a SwiGLU MLP
//   (silu(x W_gate) * (x W_up), then W_down), a final RMSNorm and an untied LM head.
#pragma once

#include <string>

#include "volta/builder.h"

namespace volta::model {

enum class Arch { Gpt, Llama };
const char* arch_name(Arch a);
Result<Arch> parse_arch(const std::string& name);

struct TinyLMConfig {
  int64_t vocab = 65;
  int64_t context = 64;
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t channels = 128;
  bool bias = false;  // gpt: biases on linear layers and LayerNorms
  Arch arch = Arch::Gpt;
  // llama only (0 until llama_defaults fills them):
  int64_t kv_heads = 0;  // key/value heads, a divisor of heads
  int64_t ffn = 0;       // the SwiGLU MLP's hidden width
  double rope_theta = 10000.0;

  int64_t head_dim() const { return channels / heads; }
  int64_t cache_heads() const { return arch == Arch::Llama ? kv_heads : heads; }  // heads of the KV cache
};

// A llama config's unset sizes: kv_heads = heads / 2 (heads when odd), and the ffn width that
// gives a block as many weights as a gpt block of the same width (12 C^2).
void llama_defaults(TinyLMConfig& c);

Status validate(const TinyLMConfig& c);
std::string config_to_json(const TinyLMConfig& c);
Result<TinyLMConfig> config_from_json(const std::string& text);

// Training / evaluation: tokens, targets i32 [B, T] -> mean cross-entropy; outputs: loss.
Result<ir::Graph> build_tinylm_loss(const TinyLMConfig& c, int64_t batch, int64_t T);

// Scoring / export: tokens i32 [B, T] -> outputs: logits [B, T, V] of every position.
Result<ir::Graph> build_tinylm_logits(const TinyLMConfig& c, int64_t batch, int64_t T);

// Inference keeps each layer's keys and values in a KV cache, params "cache.k.l" and "cache.v.l"
// of [B, cache_heads, context, hd] (not trainable, zeros at first): the session's state, which the graphs
// write in place (cache_write) and read where they are (kv_cache_names lists them).
// KeyCache::Columns stores the keys transposed, "cache.k.l" [B, cache_heads, hd, context]: a
// decode step's scores then read consecutive keys as vectors (for backends whose attention reads
// keys as columns: the "attention.keys_transposed" feature). The values stay rows.
enum class KeyCache { Rows, Columns };
TensorType kv_cache_type(const TinyLMConfig& c, int64_t batch, bool keys, KeyCache layout);

// Prefill: tokens i32 [B, T] -> outputs: logits of the last position [B, V]; writes positions
// 0..T-1 of every cache.
Result<ir::Graph> build_tinylm_prefill(const TinyLMConfig& c, int64_t batch, int64_t T, KeyCache keys = KeyCache::Rows);

// One decode step, the same graph for every position and backend: tokens i32 [B, 1] and
// position i32 [1] (the new token's position, the rows already cached) -> outputs: logits
// [B, V]; writes the new position's keys and values into the caches, then attends over rows
// 0..position of each, in place (one attention op where the backend has it, the matmul /
// masked softmax / matmul it fuses from otherwise).
Result<ir::Graph> build_tinylm_decode(const TinyLMConfig& c, int64_t batch, KeyCache keys = KeyCache::Rows);

std::vector<std::string> kv_cache_names(const TinyLMConfig& c);

// Names of the params in the order the builders create them.
std::vector<std::string> tinylm_param_names(const TinyLMConfig& c);

}  // namespace volta::model
