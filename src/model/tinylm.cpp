#include "model/tinylm.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <nlohmann/json.hpp>

namespace volta::model {

namespace {

std::string layer_name(int64_t l, const char* what) { return "h" + std::to_string(l) + "." + what; }

struct Builder {
  const TinyLMConfig& c;
  ModelBuilder& b;
  KeyCache keys = KeyCache::Rows;

  TensorType f32(Shape s) const { return {DType::f32, std::move(s)}; }

  Value matrix(const std::string& name, Shape s, double std) { return b.param(name, f32(std::move(s)), ParamInit::normal(std)); }
  Value gain(const std::string& name) { return b.param(name, f32({c.channels}), ParamInit::ones()); }
  Value bias(const std::string& name, int64_t n) { return c.bias ? b.param(name, f32({n}), ParamInit::zeros()) : Value{}; }

  Value layer_norm(Value x, const std::string& prefix) {
    Value g = gain(prefix + ".g");
    Value beta = bias(prefix + ".b", c.channels);
    return beta.valid() ? b.layer_norm(x, g, beta, 1e-5, prefix) : b.layer_norm(x, g, 1e-5, prefix);
  }
  Value linear(Value x, Value w, Value bias_v, const std::string& name) {
    Value y = b.matmul(x, w, bias_v.valid() ? name + ".mm" : name);
    return bias_v.valid() ? b.add(y, bias_v, name) : y;
  }
  // (B, T, heads hd) -> (B, heads, T, hd)
  Value split_heads(Value x, int64_t B, int64_t T, const std::string& name, int64_t heads) {
    return b.transpose(b.reshape(x, {B, T, heads, c.head_dim()}), {0, 2, 1, 3}, name);
  }
  bool key_columns() const { return keys == KeyCache::Columns; }

  // Layer l's keys and values written into its KV cache (params "cache.k.l", "cache.v.l", the
  // session's state, as kv_cache_type) at rows (key columns) `at`..; the written caches.
  std::pair<Value, Value> write_caches(int64_t l, Value k, Value v, Value at, int64_t B) {
    const ParamInit state{"zeros", 0.0, 0.0, false};
    const std::string id = std::to_string(l);
    ir::Attrs columns;
    if (key_columns()) columns.set("transposed", int64_t{1});
    return {b.op(ir::Op::CacheWrite, {b.param("cache.k." + id, kv_cache_type(c, B, true, keys), state), k, at}, columns,
                 layer_name(l, "attn.k_cache")),
            b.op(ir::Op::CacheWrite, {b.param("cache.v." + id, kv_cache_type(c, B, false, keys), state), v, at}, {},
                 layer_name(l, "attn.v_cache"))};
  }

  // The decoder on tokens (B, T) at positions 0..T-1, or, with a valid `position` (i32 [1], T = 1),
  // one decode step at that position. With `caches`, each layer writes its keys and values into
  // its KV cache (params "cache.k.l", "cache.v.l" [B, H, context, hd], the session's state) at
  // rows position.. (0 for a sequence); a decode step then attends over its cache in place.
  // Returns the final hidden state (B, T, C).
  Value decoder(Value tokens, int64_t B, int64_t T, Value position, bool caches, Value& wte) {
    if (c.arch == Arch::Llama) return llama_decoder(tokens, B, T, position, caches);
    const int64_t C = c.channels;
    wte = matrix("wte", {c.vocab, C}, 0.02);                                   // (V, C)
    Value wpe = matrix("wpe", {c.context, C}, 0.02);                           // (ctx, C)
    const bool step = position.valid();
    Value pos_ids = position, at = position;
    if (!step) {
      Tensor positions = Tensor::zeros(DType::i32, {T});
      for (int64_t t = 0; t < T; ++t) positions.data<int32_t>()[t] = static_cast<int32_t>(t);
      pos_ids = b.constant("positions", positions);
      if (caches) at = b.constant("cache.position", Tensor::zeros(DType::i32, {1}));
    }
    Value x = b.add(b.embedding(wte, tokens, "tok_emb"), b.embedding(wpe, pos_ids, "pos_emb"), "x0");  // (B, T, C)
    const float scale_f = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim())));
    const Value scale = b.scalar(scale_f, "attn_scale");
    for (int64_t l = 0; l < c.layers; ++l) {
      auto n = [&](const char* what) { return layer_name(l, what); };
      // attention
      Value h = layer_norm(x, n("ln1"));                                                     // (B, T, C)
      Value qkv = linear(h, matrix(n("attn.wqkv"), {C, 3 * C}, 0.02), bias(n("attn.bqkv"), 3 * C), n("attn.qkv"));  // (B, T, 3C)
      Value q = split_heads(b.slice(qkv, 2, 0, C), B, T, n("attn.q"), c.heads);             // (B, H, T, hd)
      Value k = split_heads(b.slice(qkv, 2, C, 2 * C), B, T, n("attn.k"), c.heads);
      Value v = split_heads(b.slice(qkv, 2, 2 * C, 3 * C), B, T, n("attn.v"), c.heads);
      if (caches) {
        const auto [kc, vc] = write_caches(l, k, v, at, B);
        if (step) {  // every cache row, those past the position masked exactly to 0 at run time
          Value att = b.op(ir::Op::Softmax, {b.matmul(q, kc, n("attn.scores"), false, !key_columns()), position},
                           {{"axis", int64_t{-1}}, {"scale", static_cast<double>(scale_f)}, {"causal_offset", int64_t{0}}},
                           n("attn.probs"));                                                 // (B, H, 1, context)
          x = mlp(attention_out(x, b.matmul(att, vc, n("attn.y")), B, T, l), l);
          continue;
        }
      }
      Value att = b.mul(b.matmul(q, k, n("attn.scores"), false, true), scale, n("attn.scaled"));  // (B, H, T, T)
      att = b.softmax(b.causal_mask(att, 0, n("attn.masked")), -1, n("attn.probs"));
      x = mlp(attention_out(x, b.matmul(att, v, n("attn.y")), B, T, l), l);                 // y: (B, H, T, hd)
    }
    return layer_norm(x, "lnf");                                                             // (B, T, C)
  }

  // The residual stream after layer l's attention output y (B, H, T, hd).
  Value attention_out(Value x, Value y, int64_t B, int64_t T, int64_t l) {
    auto n = [&](const char* what) { return layer_name(l, what); };
    const int64_t C = c.channels;
    y = b.reshape(b.transpose(y, {0, 2, 1, 3}), {B, T, C}, n("attn.merged"));             // (B, T, C)
    return b.add(x, linear(y, matrix(n("attn.wo"), {C, C}, proj_std()), bias(n("attn.bo"), C), n("attn.out")), n("x_attn"));
  }

  // The residual stream after layer l's MLP.
  Value mlp(Value x, int64_t l) {
    auto n = [&](const char* what) { return layer_name(l, what); };
    const int64_t C = c.channels;
    Value h2 = layer_norm(x, n("ln2"));
    Value fc = linear(h2, matrix(n("mlp.w_fc"), {C, 4 * C}, 0.02), bias(n("mlp.b_fc"), 4 * C), n("mlp.fc"));  // (B, T, 4C)
    Value proj = linear(b.gelu(fc, n("mlp.gelu")), matrix(n("mlp.w_proj"), {4 * C, C}, proj_std()), bias(n("mlp.b_proj"), C),
                        n("mlp.proj"));                                                      // (B, T, C)
    return b.add(x, proj, n("x_mlp"));
  }

  double proj_std() const { return 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers)); }

  // The llama variant's decoder, with the gpt decoder's contract. Queries and keys are rotated
  // by rope before the keys are cached, so a decode step reads its cache as it is.
  Value llama_decoder(Value tokens, int64_t B, int64_t T, Value position, bool caches) {
    const int64_t C = c.channels, H = c.heads, KV = c.kv_heads, hd = c.head_dim(), F = c.ffn;
    Value x = b.embedding(matrix("wte", {c.vocab, C}, 0.02), tokens, "tok_emb");  // (B, T, C)
    const Value cos = b.constant("rope.cos", rope_table(c.context, hd, c.rope_theta, false));
    const Value sin = b.constant("rope.sin", rope_table(c.context, hd, c.rope_theta, true));
    const bool step = position.valid();
    const Value at = step || !caches ? position : b.constant("cache.position", Tensor::zeros(DType::i32, {1}));
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    const ir::Attrs attn{{"scale", scale}, {"causal_offset", int64_t{0}}};
    for (int64_t l = 0; l < c.layers; ++l) {
      auto n = [&](const char* what) { return layer_name(l, what); };
      Value h = b.rms_norm(x, gain(n("ln1.g")), 1e-5, n("ln1"));
      Value qkv = b.matmul(h, matrix(n("attn.wqkv"), {C, C + 2 * KV * hd}, 0.02), n("attn.qkv"));  // (B, T, C + 2 KV hd)
      Value q = b.rope(split_heads(b.slice(qkv, 2, 0, C), B, T, n("attn.q"), H), cos, sin, position, n("attn.q_rot"));
      Value k = b.rope(split_heads(b.slice(qkv, 2, C, C + KV * hd), B, T, n("attn.k"), KV), cos, sin, position, n("attn.k_rot"));
      Value v = split_heads(b.slice(qkv, 2, C + KV * hd, C + 2 * KV * hd), B, T, n("attn.v"), KV);
      Value y;
      if (caches) {
        const auto [kc, vc] = write_caches(l, k, v, at, B);
        ir::Attrs read = attn;
        if (key_columns()) read.set("keys_transposed", int64_t{1});
        if (step) y = b.op(ir::Op::Attention, {q, kc, vc, position}, read, n("attn.y"));  // the cache read in place
      }
      if (!y.valid()) y = b.op(ir::Op::Attention, {q, k, v}, attn, n("attn.y"));  // (B, H, T, hd)
      y = b.reshape(b.transpose(y, {0, 2, 1, 3}), {B, T, C}, n("attn.merged"));
      x = b.add(x, b.matmul(y, matrix(n("attn.wo"), {C, C}, proj_std()), n("attn.out")), n("x_attn"));
      Value h2 = b.rms_norm(x, gain(n("ln2.g")), 1e-5, n("ln2"));
      Value gu = b.matmul(h2, matrix(n("mlp.w_gate_up"), {C, 2 * F}, 0.02), n("mlp.gate_up"));  // (B, T, 2F)
      Value act = b.op(ir::Op::Swiglu, {gu}, {}, n("mlp.swiglu"));  // silu(gate) * up: (B, T, F)
      x = b.add(x, b.matmul(act, matrix(n("mlp.w_down"), {F, C}, proj_std()), n("mlp.down")), n("x_mlp"));
    }
    return b.rms_norm(x, gain("lnf.g"), 1e-5, "lnf");  // (B, T, C)
  }

  // Logits of the final hidden state x (..., C): the tied token embedding (gpt) or the head.
  Value logits(Value x, Value wte) {
    if (c.arch == Arch::Gpt) return b.matmul(x, wte, "logits", false, true);
    return b.matmul(x, matrix("w_head", {c.channels, c.vocab}, 0.02), "logits");
  }
};

}  // namespace

const char* arch_name(Arch a) { return a == Arch::Llama ? "llama" : "gpt"; }

Result<Arch> parse_arch(const std::string& name) {
  if (name == "gpt") return Arch::Gpt;
  if (name == "llama") return Arch::Llama;
  return invalid_argument("unknown model architecture '" + name + "' (available: gpt, llama)");
}

void llama_defaults(TinyLMConfig& c) {
  if (c.kv_heads == 0) c.kv_heads = c.heads % 2 == 0 ? c.heads / 2 : c.heads;
  if (c.ffn == 0 && c.heads > 0 && c.kv_heads > 0) {
    const int64_t C = c.channels, attention = C * (C + 2 * c.kv_heads * c.head_dim()) + C * C;
    c.ffn = std::max<int64_t>(1, (12 * C * C - attention) / (3 * C));
  }
}

Status validate(const TinyLMConfig& c) {
  auto in = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  if (!in(c.vocab, 1, 1 << 20)) return invalid_argument("model vocab must be in [1, 2^20], got " + std::to_string(c.vocab));
  if (!in(c.context, 1, 1 << 16)) return invalid_argument("model context must be in [1, 65536], got " + std::to_string(c.context));
  if (!in(c.layers, 1, 256)) return invalid_argument("model layers must be in [1, 256], got " + std::to_string(c.layers));
  if (!in(c.heads, 1, 256)) return invalid_argument("model heads must be in [1, 256], got " + std::to_string(c.heads));
  if (!in(c.channels, 1, 1 << 16) || c.channels % c.heads != 0)
    return invalid_argument("model channels must be in [1, 65536] and divisible by heads (" + std::to_string(c.heads) +
                            "), got " + std::to_string(c.channels));
  if (c.arch == Arch::Gpt) return Status::ok();
  if (c.bias) return invalid_argument("model bias is a gpt option; the llama variant has no biases");
  if (!in(c.kv_heads, 1, c.heads) || c.heads % c.kv_heads != 0)
    return invalid_argument("model kv_heads must divide heads (" + std::to_string(c.heads) + "), got " + std::to_string(c.kv_heads));
  if (!in(c.ffn, 1, 1 << 20)) return invalid_argument("model ffn must be in [1, 2^20], got " + std::to_string(c.ffn));
  if (c.head_dim() % 2 != 0)
    return invalid_argument("the llama variant's head width (channels / heads) must be even for rope, got " +
                            std::to_string(c.head_dim()));
  if (!(c.rope_theta > 1.0 && c.rope_theta <= 1e12))
    return invalid_argument("model rope_theta must be in (1, 1e12], got " + number_for_message(c.rope_theta));
  return Status::ok();
}

// A gpt config's JSON is unchanged by the llama fields (checkpoints written before them read
// back, and hash, the same).
std::string config_to_json(const TinyLMConfig& c) {
  nlohmann::json j = {{"model", "tinylm"}, {"vocab", c.vocab},     {"context", c.context}, {"layers", c.layers},
                      {"heads", c.heads},   {"channels", c.channels}, {"bias", c.bias}};
  if (c.arch == Arch::Llama) {
    j["arch"] = arch_name(c.arch);
    j["kv_heads"] = c.kv_heads;
    j["ffn"] = c.ffn;
    j["rope_theta"] = c.rope_theta;
  }
  return j.dump();
}

Result<TinyLMConfig> config_from_json(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return parse_error("model config is not a JSON object");
  if (!j.contains("model") || j["model"] != "tinylm") return parse_error("model config is not a tinylm config");
  TinyLMConfig c;
  auto integers = [&](std::initializer_list<std::pair<const char*, int64_t*>> fields) -> Status {
    for (auto [key, field] : fields) {
      if (!j.contains(key) || !j[key].is_number_integer()) return parse_error(std::string("model config has no integer '") + key + "'");
      *field = j[key].get<int64_t>();
    }
    return Status::ok();
  };
  VOLTA_RETURN_IF_ERROR(integers({{"vocab", &c.vocab}, {"context", &c.context}, {"layers", &c.layers}, {"heads", &c.heads},
                                  {"channels", &c.channels}}));
  if (!j.contains("bias") || !j["bias"].is_boolean()) return parse_error("model config has no boolean 'bias'");
  c.bias = j["bias"].get<bool>();
  if (j.contains("arch")) {
    if (!j["arch"].is_string()) return parse_error("model config 'arch' is not a string");
    auto arch = parse_arch(j["arch"].get<std::string>());
    if (!arch.is_ok()) return parse_error("model config: " + arch.status().message());
    c.arch = *arch;
  }
  if (c.arch == Arch::Llama) {
    VOLTA_RETURN_IF_ERROR(integers({{"kv_heads", &c.kv_heads}, {"ffn", &c.ffn}}));
    if (!j.contains("rope_theta") || !j["rope_theta"].is_number()) return parse_error("model config has no number 'rope_theta'");
    c.rope_theta = j["rope_theta"].get<double>();
  }
  // A key this arch does not read is refused rather than ignored: a gpt config holding a llama's
  // kv_heads and ffn (an "arch" left out) built another model than its writer meant.
  for (const auto& [key, value] : j.items()) {
    static const std::set<std::string> gpt = {"model", "arch", "vocab", "context", "layers", "heads", "channels", "bias"};
    const bool llama_key = key == "kv_heads" || key == "ffn" || key == "rope_theta";
    if (!gpt.contains(key) && !(llama_key && c.arch == Arch::Llama))
      return parse_error("model config has '" + key + "', which a " + arch_name(c.arch) + " config does not take");
  }
  VOLTA_RETURN_IF_ERROR(validate(c));
  return c;
}

namespace {

// What a graph over a whole sequence (positions 0..T-1) returns.
enum class Head { Loss, AllLogits, Prefill };

Result<ir::Graph> build_sequence(const TinyLMConfig& c, int64_t batch, int64_t T, const char* name, Head head,
                                 KeyCache keys = KeyCache::Rows) {
  VOLTA_RETURN_IF_ERROR(validate(c));
  if (T < 1 || T > c.context)
    return invalid_argument(std::string(head == Head::Prefill ? "prompt" : "sequence") + " length " + std::to_string(T) +
                            " is outside [1, context]");
  ModelBuilder b(name);
  Builder m{c, b, keys};
  Value tokens = b.input("tokens", {DType::i32, {batch, T}});
  Value targets = head == Head::Loss ? b.input("targets", {DType::i32, {batch, T}}) : Value{};
  Value wte;
  Value x = m.decoder(tokens, batch, T, Value{}, head == Head::Prefill, wte);
  switch (head) {
    case Head::Loss: b.output(b.cross_entropy(m.logits(x, wte), targets, "loss")); break;
    case Head::AllLogits: b.output(m.logits(x, wte)); break;  // (B, T, V)
    case Head::Prefill: {
      Value last = b.reshape(b.slice(x, 1, T - 1, T), {batch, c.channels}, "x_last");  // (B, C)
      b.output(m.logits(last, wte));                                                    // (B, V)
      break;
    }
  }
  return b.build();
}

}  // namespace

Result<ir::Graph> build_tinylm_loss(const TinyLMConfig& c, int64_t batch, int64_t T) {
  return build_sequence(c, batch, T, "tinylm", Head::Loss);
}

Result<ir::Graph> build_tinylm_logits(const TinyLMConfig& c, int64_t batch, int64_t T) {
  return build_sequence(c, batch, T, "tinylm_logits", Head::AllLogits);
}

TensorType kv_cache_type(const TinyLMConfig& c, int64_t batch, bool keys, KeyCache layout) {
  if (keys && layout == KeyCache::Columns) return {DType::f32, {batch, c.cache_heads(), c.head_dim(), c.context}};
  return {DType::f32, {batch, c.cache_heads(), c.context, c.head_dim()}};
}

Result<ir::Graph> build_tinylm_prefill(const TinyLMConfig& c, int64_t batch, int64_t T, KeyCache keys) {
  return build_sequence(c, batch, T, "tinylm_prefill", Head::Prefill, keys);
}

Result<ir::Graph> build_tinylm_decode(const TinyLMConfig& c, int64_t batch, KeyCache keys) {
  VOLTA_RETURN_IF_ERROR(validate(c));
  ModelBuilder b("tinylm_decode");
  Builder m{c, b, keys};
  Value token = b.input("tokens", {DType::i32, {batch, 1}});
  Value position = b.input("position", {DType::i32, {1}});
  Value wte;
  Value x = m.decoder(token, batch, 1, position, true, wte);
  b.output(m.logits(b.reshape(x, {batch, c.channels}, "x_last"), wte));  // (B, V)
  return b.build();
}

std::vector<std::string> kv_cache_names(const TinyLMConfig& c) {
  std::vector<std::string> names;
  for (int64_t l = 0; l < c.layers; ++l) {
    names.push_back("cache.k." + std::to_string(l));
    names.push_back("cache.v." + std::to_string(l));
  }
  return names;
}

std::vector<std::string> tinylm_param_names(const TinyLMConfig& c) {
  auto g = build_tinylm_loss(c, 1, 1);
  std::vector<std::string> names;
  if (!g.is_ok()) return names;
  for (const ir::Node& n : g->nodes)
    if (n.op == ir::Op::Param) names.push_back(n.name);
  return names;
}

}  // namespace volta::model
