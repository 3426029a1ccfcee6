#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "ir/packed_weight.h"
#include "volta/passes.h"
#include "volta/rng.h"

namespace volta::model {

Status validate(const SampleOptions& o, int64_t vocab) {
  if (o.tokens < 1 || o.tokens > 1000000) return invalid_argument("--tokens must be in [1, 1000000], got " + std::to_string(o.tokens));
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    return invalid_argument("--temperature must be finite and >= 0, got " + std::to_string(o.temperature));
  if (o.top_k < 0 || o.top_k > vocab)
    return invalid_argument("--top-k must be in [0, " + std::to_string(vocab) + "] (the vocabulary size), got " + std::to_string(o.top_k));
  if (!std::isfinite(o.top_p) || o.top_p <= 0 || o.top_p > 1) return invalid_argument("--top-p must be in (0, 1], got " + std::to_string(o.top_p));
  if (o.batch < 1 || o.batch > 4096) return invalid_argument("--batch must be in [1, 4096], got " + std::to_string(o.batch));
  if (o.keep < 0) return invalid_argument("--keep must be >= 0, got " + std::to_string(o.keep));
  return Status::ok();
}

int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& o, double u) {
  SampleScratch scratch;
  return sample_token(logits, vocab, o, u, scratch);
}

int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& o, double u, SampleScratch& scratch) {
  if (o.temperature == 0.0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t>& order = scratch.order;
  order.resize(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Larger logits first, equal ones by id (the order a stable sort of the ids gives). A NaN
  // orders after every number, so the comparison stays a strict weak order (std::sort needs one)
  // and needs no buffer, unlike std::stable_sort.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const float x = logits[a], y = logits[b];
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) == std::isnan(y) ? a < b : std::isnan(y);
    return x != y ? x > y : a < b;
  });
  size_t keep = o.top_k > 0 ? static_cast<size_t>(o.top_k) : order.size();
  const double top = logits[order[0]];
  std::vector<double>& p = scratch.p;
  p.resize(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += p[i] = std::exp((logits[order[i]] - top) / o.temperature);
  if (o.top_p < 1.0) {  // the smallest prefix holding top_p of the mass
    double mass = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      mass += p[i] / total;
      if (mass >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
    total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  double target = u * total, acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += p[i];
    if (target < acc) return order[i];
  }
  return order[keep - 1];
}

Result<std::vector<std::string>> matmul_weights(const TinyLMConfig& c) {
  // The decode graph says which params are read only as matmul weights; the prefill reads them alike.
  VOLTA_ASSIGN_OR_RETURN(const ir::Graph step, build_tinylm_decode(c, 1));
  std::vector<std::string> names;
  VOLTA_RETURN_IF_ERROR(passes::store_weights_as(step, DType::bf16, &names).status());
  return names;
}

Bindings params_as(Bindings params, const std::vector<std::string>& matmul, DType weights) {
  for (auto& [name, t] : params) {
    const bool half = std::find(matmul.begin(), matmul.end(), name) != matmul.end();
    t = narrow_to(widen_to_f32(t), half ? weights : DType::f32);
  }
  return params;
}

Result<ir::Graph> Generator::with_weights(Result<ir::Graph> g) const {
  if (!g.is_ok()) return g;
  if (weights_ != DType::f32) g = passes::store_weights_as(*g, weights_);
  if (g.is_ok() && unties()) g = passes::untie_transposed_weights(*g);  // after: a tied head stays f32
  if (!g.is_ok() || packed_.empty()) return g;
  return passes::store_weights_packed(*g, packed_);
}

KeyCache key_cache_layout(Runtime& rt, const CompileOptions& opts) {
  const bool fused = !opts.pipeline.disabled.count("fuse_attention_keys_transposed");
  return fused && rt.backend().capabilities().has("attention.keys_transposed") ? KeyCache::Columns : KeyCache::Rows;
}

Result<Generator> Generator::create(Runtime& rt, const TinyLMConfig& c, const Bindings& params, DType weights,
                                     CompileOptions opts) {
  VOLTA_RETURN_IF_ERROR(validate(c));
  if (weights != DType::f32 && !is_half(weights))
    return invalid_argument(std::string("--weights must be f32, bf16 or f16, got ") + dtype_name(weights));
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, build_tinylm_loss(c, 1, 1));  // the params, by name and type
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Param) continue;
    auto it = params.find(n.name);
    if (it == params.end()) return invalid_argument("the model's param '" + n.name + "' is missing");
    const TensorType& t = it->second.type();
    if (t.shape != n.type.shape || (t.dtype != n.type.dtype && !is_half(t.dtype)))
      return invalid_argument("param '" + n.name + "' is " + t.to_string() + " but the model wants " + n.type.to_string());
  }
  Generator gen(rt, c, weights, std::move(opts));
  gen.keys_ = key_cache_layout(rt, gen.compile_);
  VOLTA_ASSIGN_OR_RETURN(const std::vector<std::string> matmul, matmul_weights(c));
  Bindings held = params_as(params, matmul, weights);
  // Matmul weights (f32, bf16 or f16) in the layout the backend's GEMM reads in place (where it
  // has one): a prompt's rows and a decode step's alike, each decode task's columns then one
  // contiguous piece.
  const bool packs = rt.backend().capabilities().has("matmul.packed_b");
  for (const std::string& name : packs ? matmul : std::vector<std::string>{}) {
    Tensor& w = held.at(name);
    if (w.shape().size() != 2) continue;
    const int64_t K = w.shape()[0], N = w.shape()[1];
    const auto layout = rt.backend().matmul_weight_packing(c.context, N, K);
    if (!layout || (*layout)[1] < 1 || N % (*layout)[1] != 0) continue;
    Tensor packed = Tensor::empty(w.dtype(), {K, N});  // repack_weight writes every element
    if (w.dtype() == DType::f32)
      ir::repack_weight(w.data<float>(), packed.data<float>(), K, N, (*layout)[0], (*layout)[1], true);
    else
      ir::repack_weight(w.data<uint16_t>(), packed.data<uint16_t>(), K, N, (*layout)[0], (*layout)[1], true);
    w = std::move(packed);
    gen.packed_[name] = *layout;
  }
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Param) VOLTA_RETURN_IF_ERROR(gen.state_.put(n.name, held.at(n.name), plan::MemClass::Param));
  // The transposed copies of params the plans' matmuls read transposed (the GPT's tied head),
  // for the CPU's decode products, which read a plain weight in place but transpose a transposed
  // one on every call; a device's GEMM reads either in place.
  std::vector<std::pair<std::string, std::string>> copies;
  VOLTA_ASSIGN_OR_RETURN(const ir::Graph step, build_tinylm_decode(c, 1));
  if (gen.unties()) VOLTA_RETURN_IF_ERROR(passes::untie_transposed_weights(step, &copies).status());
  for (const auto& [copy, original] : copies) {
    const Tensor& w = held.at(original);
    const int64_t rows = w.shape()[0], cols = w.shape()[1];
    Tensor t = Tensor::empty(DType::f32, {cols, rows});
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) t.data<float>()[k * rows + r] = w.data<float>()[r * cols + k];
    VOLTA_RETURN_IF_ERROR(gen.state_.put(copy, t, plan::MemClass::Param));
  }
  return gen;
}

Status Generator::reserve(int64_t batch) {
  if (batch == cache_batch_) return Status::ok();
  // The decode plan holds the caches and the params: compiling it first checks they fit the
  // runtime's memory limit before any cache is allocated.
  VOLTA_RETURN_IF_ERROR(decode_plan(batch).status());
  for (const std::string& name : kv_cache_names(c_)) {
    state_.erase(name);
    const bool keys = name.starts_with("cache.k.");
    VOLTA_RETURN_IF_ERROR(state_.put(name, Tensor::zeros(DType::f32, kv_cache_type(c_, batch, keys, keys_).shape), plan::MemClass::KvCache));
  }
  cache_batch_ = batch;
  return Status::ok();
}

Result<std::shared_ptr<const plan::ExecutionPlan>> Generator::prefill_plan(int64_t batch, int64_t T) {
  return rt_->compile_keyed("tinylm.prefill " + config_ + " B=" + std::to_string(batch) + " T=" + std::to_string(T),
                            [&]() { return with_weights(build_tinylm_prefill(c_, batch, T, keys_)); }, compile_);
}

Result<std::shared_ptr<const plan::ExecutionPlan>> Generator::decode_plan(int64_t batch) {
  return rt_->compile_keyed("tinylm.decode " + config_ + " B=" + std::to_string(batch),
                            [&]() { return with_weights(build_tinylm_decode(c_, batch, keys_)); }, compile_);
}

Result<std::vector<std::vector<int32_t>>> Generator::generate(const std::vector<int32_t>& prompt, const SampleOptions& o) {
  VOLTA_RETURN_IF_ERROR(validate(o, c_.vocab));
  if (o.keep > c_.context)
    return invalid_argument("--keep must be at most the context (" + std::to_string(c_.context) + "), got " + std::to_string(o.keep));
  if (prompt.empty()) return invalid_argument("the prompt is empty");
  const int64_t B = o.batch;
  VOLTA_RETURN_IF_ERROR(reserve(B));
  // Everything a token touches is made here, so a decode step allocates nothing: the sequences'
  // room, the step's bindings (its token ids written in place), the outputs (Runtime::run
  // writes into them) and the sampler's scratch.
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(B), prompt);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    seqs[static_cast<size_t>(b)].reserve(prompt.size() + static_cast<size_t>(o.tokens));
    out[static_cast<size_t>(b)].reserve(static_cast<size_t>(o.tokens));
  }
  const int64_t keep = o.keep > 0 ? o.keep : std::max<int64_t>(1, c_.context / 2);
  int64_t start = std::max<int64_t>(0, static_cast<int64_t>(prompt.size()) - c_.context);  // the window's first token
  int64_t cached = 0;  // the window's positions held in the caches (0: none valid)
  const uint64_t stream = stream_for("generate");
  // A decode step's inputs (the params and caches are the state's).
  Bindings step_in = {{"tokens", Tensor::zeros(DType::i32, {B, 1})}, {"position", Tensor::zeros(DType::i32, {1})}};
  int32_t* step_tokens = step_in.at("tokens").data<int32_t>();
  int32_t* step_position = step_in.at("position").data<int32_t>();
  std::vector<Tensor> res;
  SampleScratch scratch;
  std::shared_ptr<const plan::ExecutionPlan> step_plan;  // looked up once, not per token
  for (int64_t step = 0; step < o.tokens; ++step) {
    const int64_t len = static_cast<int64_t>(seqs[0].size());
    // A full window restarts from its last `keep` tokens, so a prefill of `keep` tokens pays for
    // the next context - keep decode steps. Both paths move the window alike: same text with and
    // without the cache.
    if (len - start > c_.context) start = len - keep;
    const int64_t window = len - start;
    if (o.kv_cache && cached == window - 1) {
      // Decode one position against the caches. A one-token prompt is a decode step at position
      // 0 too (it reads no cached row): the bits of its prefill, at a step's cost (a prefill
      // plan's run took about 2.7 decode steps' time at 2 threads).
      for (int64_t b = 0; b < B; ++b) step_tokens[b] = seqs[static_cast<size_t>(b)].back();
      step_position[0] = static_cast<int32_t>(cached);
      if (!step_plan) {
        VOLTA_ASSIGN_OR_RETURN(step_plan, decode_plan(B));
      }
      VOLTA_RETURN_IF_ERROR(rt_->run(*step_plan, step_in, &state_, res));
      cached += 1;
    } else {
      // Prefill the window (the prompt, or the kept tail of a full window).
      Tensor tok = Tensor::zeros(DType::i32, {B, window});
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(seqs[static_cast<size_t>(b)].end() - window, window, tok.data<int32_t>() + b * window);
      const Bindings in = {{"tokens", std::move(tok)}};
      VOLTA_ASSIGN_OR_RETURN(auto plan, prefill_plan(B, window));
      VOLTA_RETURN_IF_ERROR(rt_->run(*plan, in, &state_, res));
      cached = o.kv_cache ? window : 0;
    }
    const Tensor& logits = res[0];  // [B, V]
    for (int64_t b = 0; b < B; ++b) {
      // Text sampled from nan logits would look like any other (finite weights near f32's limit
      // overflow on the way): an error, not output.
      const float* row = logits.data<float>() + b * c_.vocab;
      if (const float* bad = std::find_if(row, row + c_.vocab, [](float v) { return !std::isfinite(v); }); bad != row + c_.vocab)
        return numeric_error("generate: the logits of sequence " + std::to_string(b) + " at token " + std::to_string(step + 1) +
                             " hold " + (std::isnan(*bad) ? "nan" : "an infinity") +
                             ": the model's arithmetic overflows (its weights are finite but too large)");
      const double u = uniform01(o.seed, stream, static_cast<uint64_t>(step * B + b));
      const int32_t next = sample_token(logits.data<float>() + b * c_.vocab, c_.vocab, o, u, scratch);
      seqs[static_cast<size_t>(b)].push_back(next);
      out[static_cast<size_t>(b)].push_back(next);
    }
  }
  return out;
}

}  // namespace volta::model
