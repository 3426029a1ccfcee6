// The shape/dtype rules of the attention family: attention, its fused gradient, rotary
// position embeddings and the KV cache's write.
#include <algorithm>

#include "ir/infer_rules.h"

namespace volta::ir {

Shape attention_probs_shape(const Shape& q, int64_t packed_heads, int64_t keys) {
  Shape p(q.begin(), q.end() - 2);
  if (packed_heads > 0) p.push_back(packed_heads);
  p.push_back(q[q.size() - 2]);
  p.push_back(keys);
  return p;
}

}  // namespace volta::ir

namespace volta::ir::rules {

namespace {

// Grouped-query attention: k and v have q's batch dims except the last (the heads), of which q
// has a multiple; query head h reads key head h / (q heads / k heads). An empty batch is one head.
bool kv_batch_fits(const Shape& q, const Shape& k) {
  const size_t r = q.size();
  if (k.size() != r) return false;
  if (r == 2) return true;
  if (!std::equal(q.begin(), q.end() - 3, k.begin())) return false;
  const int64_t hq = q[r - 3], hk = k[r - 3];
  return hk == hq || (hk > 0 && hq % hk == 0);
}

// packed_heads H: q, k and v one shape [..., T, 3 H D] (D > 0, T > 0); returns H D.
Result<int64_t> packed_width(Op op, std::span<const TensorType> qkv, const Attrs& attrs) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t heads, tagged(op, attrs.get_int("packed_heads", 0)));
  const Shape& x = qkv[0].shape;
  const int64_t w = x.empty() ? 0 : x.back();
  if (heads <= 0 || x.size() < 2 || qkv[1] != qkv[0] || qkv[2] != qkv[0] || w <= 0 || w % (3 * heads) != 0 ||
      x[x.size() - 2] == 0)
    return fail(op, "packed_heads " + std::to_string(heads) + " wants q, k and v of one shape [..., T, 3 H D] with T > 0 "
                        "and D > 0, got " + qkv[0].to_string() + ", " + qkv[1].to_string() + ", " + qkv[2].to_string());
  return w / 3;
}

// attention's result with store_probs: the output's elements, then the probabilities'.
Result<TensorType> with_probs(Op op, std::span<const TensorType> in, const Attrs& attrs, TensorType out) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t store, tagged(op, attrs.get_int("store_probs", 0)));
  if (store == 0) return out;
  if (store != 1) return fail(op, "store_probs must be 0 or 1, got " + std::to_string(store));
  if (in.size() != 3 || attrs.has("prefix")) return fail(op, "store_probs takes q, k and v only, without prefix");
  const Shape& k = in[1].shape;
  VOLTA_ASSIGN_OR_RETURN(const int64_t heads, tagged(op, attrs.get_int("packed_heads", 0)));
  const Shape p = attention_probs_shape(in[0].shape, heads, k[k.size() - 2]);
  const int64_t n = out.numel(), np = TensorType{DType::f32, p}.numel();
  if (n > (int64_t{1} << 62) - np) return fail(op, "store_probs: the result's size overflows");
  return TensorType{DType::f32, {n + np}};
}

// A layout flag of `op`: 0 or 1, absent 0.
Result<bool> flag01(Op op, const Attrs& attrs, const char* flag) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t t, tagged(op, attrs.get_int(flag, 0)));
  if (t != 0 && t != 1) return fail(op, std::string(flag) + " must be 0 or 1, got " + std::to_string(t));
  return t == 1;
}

// `keys_transposed` of `op`; when 1, `in` with input 1's last two dims swapped into `plain` (a
// key cache [..., D, S] checked as the [..., S, D] it holds).
Result<bool> keys_as_rows(Op op, std::span<const TensorType> in, const Attrs& attrs, std::vector<TensorType>& plain) {
  VOLTA_ASSIGN_OR_RETURN(const bool t, flag01(op, attrs, "keys_transposed"));
  if (!t) return false;
  if (in[1].shape.size() < 2) return fail(op, "a transposed k must have rank >= 2, got " + in[1].to_string());
  plain.assign(in.begin(), in.end());
  Shape& k = plain[1].shape;
  std::swap(k[k.size() - 1], k[k.size() - 2]);
  return true;
}

Result<TensorType> infer_attention_rows(std::span<const TensorType> in, const Attrs& attrs);

}  // namespace

// (q [..., T, D], k [..., S, D], v [..., S, E] (k and v may have fewer heads than q: grouped
// queries), then either k2, v2, a run-time position (i32) or an additive mask (f32)) -> [..., T, E].
// keys_transposed: k [..., D, S], in the position form only.
Result<TensorType> infer_attention(std::span<const TensorType> in, const Attrs& attrs) {
  std::vector<TensorType> plain;
  VOLTA_ASSIGN_OR_RETURN(const bool transposed, keys_as_rows(Op::Attention, in, attrs, plain));
  if (!transposed) return infer_attention_rows(in, attrs);
  if (in.size() != 4 || in[3].dtype == DType::f32 || attrs.has("packed_heads"))
    return fail(Op::Attention, "keys_transposed takes q, k, v and a position only");
  Result<TensorType> out = infer_attention_rows(plain, attrs);
  if (!out.is_ok())  // the rule names k as the rows it holds; say what was given
    return invalid_argument(out.status().message() + " (k " + in[1].to_string() + " is read as keys_transposed, " +
                           plain[1].to_string() + ")");
  return out;
}

namespace {

Result<TensorType> infer_attention_rows(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::Attention;
  const char* names[] = {"q", "k", "v", "k2", "v2"};
  const bool mask = in.size() == 4 && in[3].dtype == DType::f32;
  const bool run_time_position = in.size() == 4 && !mask;
  const size_t tensors = in.size() == 4 ? 3 : in.size();
  for (size_t i = 0; i < tensors; ++i) VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], names[i]));
  VOLTA_RETURN_IF_ERROR(finite_scale(op, attrs));
  VOLTA_RETURN_IF_ERROR(check_offset(op, attrs, "causal_offset"));
  VOLTA_ASSIGN_OR_RETURN(const int64_t zero_nan, tagged(op, attrs.get_int("zero_nan_probs", 0)));
  if (zero_nan != 0 && zero_nan != 1) return fail(op, "zero_nan_probs must be 0 or 1, got " + std::to_string(zero_nan));
  if (mask && attrs.has("prefix")) return fail(op, "prefix and a mask input cannot both be given");
  if (run_time_position) {
    if (in[3].dtype != DType::i32 || in[3].numel() != 1)
      return fail(op, "position must be i32 with one element, got " + in[3].to_string());
    if (attrs.has("prefix")) return fail(op, "prefix and a position input cannot both be given");
  }
  if (attrs.has("packed_heads")) {
    if (in.size() != 3 || attrs.has("prefix")) return fail(op, "packed_heads takes q, k and v only, without prefix");
    VOLTA_ASSIGN_OR_RETURN(const int64_t hd, packed_width(op, in, attrs));
    Shape out = in[0].shape;
    out.back() = hd;
    return with_probs(op, in, attrs, TensorType{DType::f32, out});
  }
  const Shape& q = in[0].shape;
  if (q.size() < 2) return fail(op, "q must have rank >= 2, got " + in[0].to_string());
  const size_t r = q.size();
  int64_t keys = 0;
  for (size_t i = 1; i + 1 < tensors; i += 2) {
    const Shape& k = in[i].shape;
    const Shape& v = in[i + 1].shape;
    if (!kv_batch_fits(q, k) || v.size() != r || !std::equal(k.begin(), k.end() - 2, v.begin()) ||
        !std::equal(k.begin(), k.end() - 2, in[1].shape.begin()) || k[r - 1] != q[r - 1] || v[r - 2] != k[r - 2] ||
        v[r - 1] != in[2].shape[r - 1])
      return fail(op, std::string(names[i]) + " " + in[i].to_string() + " and " + names[i + 1] + " " + in[i + 1].to_string() +
                          " do not match q " + in[0].to_string() +
                          " (want [..., S, D] and [..., S, E] with q's batch dims, or a divisor of q's heads)");
    keys += k[r - 2];
  }
  if (attrs.has("prefix")) {
    VOLTA_ASSIGN_OR_RETURN(int64_t prefix, tagged(op, attrs.get_int("prefix", 0)));
    const int64_t s1 = in[1].shape[r - 2];
    if (prefix < 0 || prefix > s1) return fail(op, "prefix " + std::to_string(prefix) + " is outside [0, " + std::to_string(s1) + "]");
    keys -= s1 - prefix;
  }
  if (keys == 0) return fail(op, "there are no keys");
  if (mask) {  // broadcasts to the scores [..., H, T, S], its last dim S
    Shape scores = q;
    scores.back() = keys;
    const Shape& m = in[3].shape;
    bool fits = !m.empty() && m.size() <= r && m.back() == keys;
    for (size_t i = 1; fits && i < m.size(); ++i) {
      const int64_t d = m[m.size() - 1 - i];
      fits = d == 1 || d == scores[r - 1 - i];
    }
    if (!fits)
      return fail(op, "mask " + in[3].to_string() + " does not broadcast to the scores " +
                          TensorType{DType::f32, scores}.to_string() + " (its last dim must be the keys, " +
                          std::to_string(keys) + "; a fourth input is an f32 mask or an i32 position with one element)");
  }
  Shape out = q;
  out.back() = in[2].shape.back();
  return with_probs(op, in, attrs, TensorType{DType::f32, out});
}

}  // namespace

// (q, k, v, dy[, p]) -> [3, ..., T, D]: the gradients of self-attention attention(q, k, v) with
// respect to q, k and v, in that order along the new leading axis. k and v may have fewer heads
// than q (grouped queries); their gradients are then per query head, which the gradient rule
// sums over each key head's group. p: the forward's probabilities [..., H, T, T].
Result<TensorType> infer_attention_grad(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::AttentionGrad;
  const char* names[] = {"q", "k", "v", "dy", "p"};
  for (size_t i = 0; i < in.size(); ++i) VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], names[i]));
  if (in.size() == 5) {
    VOLTA_ASSIGN_OR_RETURN(const TensorType out, infer_attention_grad(in.first(4), attrs));
    const Shape& q = in[0].shape;
    VOLTA_ASSIGN_OR_RETURN(const int64_t heads, tagged(op, attrs.get_int("packed_heads", 0)));
    const Shape p = attention_probs_shape(q, heads, q[q.size() - 2]);
    if (in[4].shape != p)
      return fail(op, "p " + in[4].to_string() + " must be " + TensorType{DType::f32, p}.to_string() +
                          " (the probabilities of q " + in[0].to_string() + ")");
    return out;
  }
  if (attrs.has("packed_heads")) {
    VOLTA_RETURN_IF_ERROR(finite_scale(op, attrs));
    VOLTA_RETURN_IF_ERROR(check_offset(op, attrs, "causal_offset"));
    VOLTA_ASSIGN_OR_RETURN(const int64_t hd, packed_width(op, in.first(3), attrs));
    Shape dy = in[0].shape;
    dy.back() = hd;
    if (in[3].shape != dy) return fail(op, "dy " + in[3].to_string() + " must be " + TensorType{DType::f32, dy}.to_string());
    return in[0];
  }
  const Shape& q = in[0].shape;
  if (in[3] != in[0] || in[2] != in[1] || !kv_batch_fits(q, in[1].shape) ||
      !std::equal(q.end() - 2, q.end(), in[1].shape.end() - 2))
    return fail(op, "q " + in[0].to_string() + ", k " + in[1].to_string() + ", v " + in[2].to_string() + " and dy " +
                        in[3].to_string() + " do not fit self-attention (q and dy of one shape, k and v of one shape "
                        "with q's or a divisor of q's heads)");
  VOLTA_RETURN_IF_ERROR(finite_scale(op, attrs));
  VOLTA_RETURN_IF_ERROR(check_offset(op, attrs, "causal_offset"));
  if (q.size() < 2 || q[q.size() - 2] == 0) return fail(op, "q must have rank >= 2 and at least one key, got " + in[0].to_string());
  Shape out = q;
  out.insert(out.begin(), 3);
  return TensorType{DType::f32, out};
}

// cache [..., S, D] ([..., D, S] transposed), rows [..., T, D] (the same leading dims, T <= S),
// position i32 [1] -> cache.
Result<TensorType> infer_cache_write(std::span<const TensorType> in, const Attrs& attrs) {
  const Op op = Op::CacheWrite;
  VOLTA_ASSIGN_OR_RETURN(const bool transposed, flag01(op, attrs, "transposed"));
  Shape c = in[0].shape;
  const Shape& r = in[1].shape;
  if (c.size() < 2) return fail(op, "cache must have rank >= 2, got " + in[0].to_string());
  if (transposed) std::swap(c[c.size() - 1], c[c.size() - 2]);  // checked as the rows it holds
  if (in[1].dtype != in[0].dtype || r.size() != c.size() || !std::equal(c.begin(), c.end() - 2, r.begin()) ||
      r.back() != c.back() || r[r.size() - 2] > c[c.size() - 2])
    return fail(op, "rows " + in[1].to_string() + " do not fit cache " + in[0].to_string() +
                        (transposed ? " (want the cache's dtype and leading dims, its axis -2 as their last, at most "
                                      "its columns along axis -1)"
                                    : " (want the cache's dtype and dims, at most its rows along axis -2)"));
  if (in[2].dtype != DType::i32 || in[2].numel() != 1)
    return fail(op, "position must be i32 with one element, got " + in[2].to_string());
  return in[0];
}

// (q [..., H, T, D], k cache [..., Hk, S, D], v cache [..., Hk, S, E], k [..., Hk, T, D],
// v [..., Hk, T, E], position i32 [1]) -> [..., H, T, E].
Result<TensorType> infer_cache_attention(std::span<const TensorType> in, const Attrs& attrs) {
  const std::span<const TensorType> given = in;  // messages name the inputs as written
  std::vector<TensorType> plain;                  // keys_transposed: the k cache [..., Hk, D, S] checked as its rows
  VOLTA_ASSIGN_OR_RETURN(const bool transposed, keys_as_rows(Op::CacheAttention, in, attrs, plain));
  if (transposed) in = plain;
  const Op op = Op::CacheAttention;
  const char* names[] = {"q", "k cache", "v cache", "k", "v"};
  for (size_t i = 0; i < 5; ++i) VOLTA_RETURN_IF_ERROR(require_f32(op, in[i], names[i]));
  VOLTA_RETURN_IF_ERROR(finite_scale(op, attrs));
  VOLTA_RETURN_IF_ERROR(check_offset(op, attrs, "causal_offset"));
  if (in[5].dtype != DType::i32 || in[5].numel() != 1)
    return fail(op, "position must be i32 with one element, got " + in[5].to_string());
  const Shape& q = in[0].shape;
  if (q.size() < 2) return fail(op, "q must have rank >= 2, got " + in[0].to_string());
  const size_t r = q.size();
  const Shape &kc = in[1].shape, &vc = in[2].shape;
  if (!kv_batch_fits(q, kc) || vc.size() != r || !std::equal(kc.begin(), kc.end() - 1, vc.begin()) || kc[r - 1] != q[r - 1])
    return fail(op, "k cache " + given[1].to_string() + " and v cache " + in[2].to_string() + " do not match q " +
                        in[0].to_string() + " (want " + (transposed ? "[..., D, S]" : "[..., S, D]") +
                        " and [..., S, E] with q's batch dims, or a divisor of q's heads)");
  Shape k = kc, v = vc;
  k[r - 2] = v[r - 2] = q[r - 2];
  if (in[3].shape != k || in[4].shape != v || q[r - 2] > kc[r - 2])
    return fail(op, "k " + in[3].to_string() + " and v " + in[4].to_string() + " must be the caches' rows for q's " +
                        std::to_string(q[r - 2]) + " positions, " + TensorType{DType::f32, k}.to_string() + " and " +
                        TensorType{DType::f32, v}.to_string() + ", at most the caches' " + std::to_string(kc[r - 2]) + (transposed ? " columns" : " rows"));
  Shape out = q;
  out.back() = vc[r - 1];
  return TensorType{DType::f32, out};
}

// (x [..., T, D], cos [P, D/2], sin [P, D/2], optionally position i32 [1]) -> x's type.
Result<TensorType> infer_rope(std::span<const TensorType> in) {
  const Op op = Op::Rope;
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[0], "x"));
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[1], "cos"));
  VOLTA_RETURN_IF_ERROR(require_f32(op, in[2], "sin"));
  const Shape& x = in[0].shape;
  if (x.size() < 2 || x.back() % 2 != 0)
    return fail(op, "x must be [..., T, D] with D even, got " + in[0].to_string());
  const int64_t T = x[x.size() - 2], half = x.back() / 2;
  if (in[1].shape.size() != 2 || in[1].shape[1] != half || in[2].shape != in[1].shape)
    return fail(op, "cos " + in[1].to_string() + " and sin " + in[2].to_string() + " must both be [P, " +
                        std::to_string(half) + "] for x " + in[0].to_string());
  if (in.size() == 4) {
    if (in[3].dtype != DType::i32 || in[3].numel() != 1)
      return fail(op, "position must be i32 with one element, got " + in[3].to_string());
  }
  if (T > in[1].shape[0])
    return fail(op, "x " + in[0].to_string() + " has " + std::to_string(T) + " positions but the tables have " +
                        std::to_string(in[1].shape[0]));
  return in[0];
}

}  // namespace volta::ir::rules
