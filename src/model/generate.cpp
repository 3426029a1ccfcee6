#include "model/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

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
  return Status::ok();
}

int32_t sample_token(const float* logits, int64_t vocab, const SampleOptions& o, double u) {
  if (o.temperature == 0.0) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = o.top_k > 0 ? static_cast<size_t>(o.top_k) : order.size();
  const double top = logits[order[0]];
  std::vector<double> p(keep);
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

namespace {

// Keys and values of one layer for every sample: [B, H, capacity, hd], position-major per head.
// The decode graph reads them in place (bound as they are), so a step copies one position in.
struct Cache {
  int64_t B, H, cap, hd;
  Tensor k, v;
  Cache(int64_t b, int64_t h, int64_t c, int64_t d)
      : B(b), H(h), cap(c), hd(d), k(Tensor::zeros(DType::f32, {b, h, c, d})), v(Tensor::zeros(DType::f32, {b, h, c, d})) {}
  // Writes positions [pos, pos + n) from a [B, H, n, hd] tensor.
  void append(Tensor& dst, const Tensor& src, int64_t pos, int64_t n) {
    for (int64_t bh = 0; bh < B * H; ++bh)
      std::memcpy(dst.data<float>() + (bh * cap + pos) * hd, src.data<float>() + bh * n * hd, static_cast<size_t>(n * hd) * sizeof(float));
  }
};

// Runs the prefill (pos = 0) or decode graph of (B, length), compiled once per runtime. `b`
// holds the params and this step's inputs; `config` is the model's JSON (part of the key).
Result<std::vector<Tensor>> run(Runtime& rt, const TinyLMConfig& c, const std::string& config, bool decode, int64_t B,
                                int64_t length, const Bindings& b) {
  const std::string key = std::string(decode ? "tinylm.decode " : "tinylm.prefill ") + config + " B=" + std::to_string(B) +
                          " n=" + std::to_string(length);
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile_keyed(key, [&]() {
    return decode ? build_tinylm_decode(c, B, length) : build_tinylm_prefill(c, B, length);
  }));
  return rt.run(*plan, b);
}

}  // namespace

Result<std::vector<std::vector<int32_t>>> generate(Runtime& rt, const TinyLMConfig& c, const Bindings& params,
                                                   const std::vector<int32_t>& prompt, const SampleOptions& o) {
  VOLTA_RETURN_IF_ERROR(validate(o, c.vocab));
  if (prompt.empty()) return invalid_argument("the prompt is empty");
  const int64_t B = o.batch;
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(B), prompt);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(B));
  std::vector<Cache> caches;
  int64_t cached = 0;  // positions held in the caches (0: none valid)
  const uint64_t stream = stream_for("generate");
  const std::string config = config_to_json(c);
  Bindings in = params;  // the params once; each step sets the inputs
  std::vector<std::string> cache_names;
  for (int64_t l = 0; l < c.layers; ++l) {
    cache_names.push_back("cache.k." + std::to_string(l));
    cache_names.push_back("cache.v." + std::to_string(l));
  }

  // With the attention op, one decode graph serves every position (compiled once, its plan
  // kept hot); otherwise each position has its own graph of slices and concats.
  const bool one_step_graph = rt.backend().capabilities().supports(ir::Op::Attention);
  std::shared_ptr<const plan::ExecutionPlan> step_plan;
  Tensor at = Tensor::zeros(DType::i32, {1});  // the new position = the cached count (bindings share it)
  for (int64_t step = 0; step < o.tokens; ++step) {
    const int64_t len = static_cast<int64_t>(seqs[0].size());
    const int64_t window = std::min(len, c.context);
    std::vector<Tensor> res;
    if (o.kv_cache && cached > 0 && cached == len - 1 && len <= c.context) {
      // Decode one position against the cache.
      Tensor tok = Tensor::zeros(DType::i32, {B, 1});
      for (int64_t b = 0; b < B; ++b) tok.data<int32_t>()[b] = seqs[static_cast<size_t>(b)].back();
      in.insert_or_assign("tokens", tok);
      for (int64_t l = 0; l < c.layers; ++l) {  // the same tensors every step: no copy
        const Cache& cache = caches[static_cast<size_t>(l)];
        in.insert_or_assign(cache_names[static_cast<size_t>(2 * l)], cache.k);
        in.insert_or_assign(cache_names[static_cast<size_t>(2 * l + 1)], cache.v);
      }
      if (one_step_graph) {
        if (!step_plan) {
          VOLTA_ASSIGN_OR_RETURN(step_plan, rt.compile_keyed("tinylm.decode_step " + config + " B=" + std::to_string(B),
                                                             [&]() { return build_tinylm_decode_step(c, B); }));
        }
        at.data<int32_t>()[0] = static_cast<int32_t>(cached);
        in.insert_or_assign("positions", at);
        in.insert_or_assign("cache.length", at);
        VOLTA_ASSIGN_OR_RETURN(res, rt.run(*step_plan, in));
      } else {
        VOLTA_ASSIGN_OR_RETURN(res, run(rt, c, config, true, B, cached, in));
      }
      for (int64_t l = 0; l < c.layers; ++l) {
        Cache& cache = caches[static_cast<size_t>(l)];
        cache.append(cache.k, res[static_cast<size_t>(1 + 2 * l)], cached, 1);
        cache.append(cache.v, res[static_cast<size_t>(2 + 2 * l)], cached, 1);
      }
      cached += 1;
    } else {
      // Prefill the window (the prompt, or a window that slid past the context).
      Tensor tok = Tensor::zeros(DType::i32, {B, window});
      for (int64_t b = 0; b < B; ++b)
        std::copy_n(seqs[static_cast<size_t>(b)].end() - window, window, tok.data<int32_t>() + b * window);
      in.insert_or_assign("tokens", tok);
      for (const std::string& name : cache_names) in.erase(name);  // the prefill graph has no caches
      in.erase("positions");
      in.erase("cache.length");
      VOLTA_ASSIGN_OR_RETURN(res, run(rt, c, config, false, B, window, in));
      cached = 0;
      if (o.kv_cache && window == len) {
        caches.clear();
        for (int64_t l = 0; l < c.layers; ++l) {
          caches.emplace_back(B, c.heads, c.context, c.head_dim());
          caches.back().append(caches.back().k, res[static_cast<size_t>(1 + 2 * l)], 0, window);
          caches.back().append(caches.back().v, res[static_cast<size_t>(2 + 2 * l)], 0, window);
        }
        cached = window;
      }
    }
    const Tensor& logits = res[0];  // [B, V]
    for (int64_t b = 0; b < B; ++b) {
      const double u = uniform01(o.seed, stream, static_cast<uint64_t>(step * B + b));
      const int32_t next = sample_token(logits.data<float>() + b * c.vocab, c.vocab, o, u);
      seqs[static_cast<size_t>(b)].push_back(next);
      out[static_cast<size_t>(b)].push_back(next);
    }
  }
  return out;
}

}  // namespace volta::model
