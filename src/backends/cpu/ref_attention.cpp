// Reference attention: the composition it replaces, written out per query row in double
// (scores rounded to f32 as a matmul stores them, softmax as ref_softmax, then the weighted sum).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/ref_util.h"

namespace volta::cpu::ref {

namespace {
// The scale and causal mask of attention's or attention_grad's attributes.
template <typename A>
AttentionArgs scaled_mask(const A& attrs) {
  AttentionArgs at;
  at.scale = attrs.scale;
  at.causal = attrs.causal_offset.has_value();
  at.offset = attrs.causal_offset.value_or(0);
  return at;
}

// packed_heads H: q, k, v [..., T, 3 H D], groups the batch times the heads.
AttentionArgs packed(AttentionArgs at, const Shape& x, int64_t heads) {
  const size_t r = x.size();
  at.T = at.cap[0] = at.used[0] = x[r - 2];
  at.D = at.E = x[r - 1] / (3 * heads);
  at.G = dims_product(x, 0, r - 2) * heads;
  at.set_layout(heads);
  return at;
}

// The plain layout's sizes: q [.., T, D] and k [.., S, D] (keys_transposed: [.., D, S]), v [.., S, E]
// with G / rep groups.
void grouped(AttentionArgs& at, const KernelArgs& a, bool keys_transposed) {
  const Shape& qs = a.in[0].shape();
  const size_t r = qs.size();
  at.G = dims_product(qs, 0, r - 2), at.T = qs[r - 2], at.D = qs[r - 1], at.E = a.in[2].shape()[r - 1];
  at.rep = at.G / std::max<int64_t>(1, dims_product(a.in[1].shape(), 0, r - 2));
  at.cap[0] = a.in[1].shape()[keys_transposed ? r - 1 : r - 2];
}

}  // namespace

Result<AttentionArgs> attention_args(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto attrs, ir::typed_attrs<ir::Op::Attention>(a.node));
  AttentionArgs at = scaled_mask(*attrs);
  at.store = attrs->store_probs != 0;
  const Shape& qs = a.in[0].shape();
  const size_t r = qs.size();
  if (attrs->packed_heads) return packed(at, qs, *attrs->packed_heads);
  const bool transposed = attrs->keys_transposed != 0;
  grouped(at, a, transposed);
  at.used[0] = attrs->prefix.value_or(at.cap[0]);
  at.cap[1] = at.used[1] = a.in.size() >= 5 ? a.in[3].shape()[r - 2] : 0;
  at.zero_nan = attrs->zero_nan_probs != 0;
  if (a.in.size() == 4 && a.in[3].type.dtype == DType::f32) {  // an additive mask, broadcast to [groups..., T, S]
    const Shape& m = a.in[3].shape();
    std::vector<int64_t> stride(r, 0);  // along the scores' dims, right-aligned; 0 where broadcast
    for (size_t i = 0, s = 1; i < m.size(); s *= static_cast<size_t>(m[m.size() - 1 - i]), ++i)
      if (m[m.size() - 1 - i] != 1) stride[r - 1 - i] = static_cast<int64_t>(s);
    at.mask = in_f32(a, 3);
    at.groups.assign(qs.begin(), qs.end() - 2);
    at.mask_group_stride.assign(stride.begin(), stride.end() - 2);
    at.mask_row_stride = stride[r - 2];
  } else if (a.in.size() == 4) {  // the run-time position: rows 0..position+T-1 of k and v are the keys so far
    VOLTA_ASSIGN_OR_RETURN(const int64_t position, position_input(a, 3, at.cap[0] - at.T));
    at.used[0] = position + at.T;
    at.offset = offset_at(at.offset, at.cap[0], position);
  }
  at.set_layout(0, transposed);
  return at;
}

Result<AttentionArgs> cache_attention_args(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto attrs, ir::typed_attrs<ir::Op::CacheAttention>(a.node));
  AttentionArgs at = scaled_mask(*attrs);
  grouped(at, a, attrs->keys_transposed != 0);
  VOLTA_ASSIGN_OR_RETURN(const int64_t position, position_input(a, 5, at.cap[0] - at.T));
  at.used[0] = position;  // the cached keys; the new ones follow as the second block
  at.cap[1] = at.used[1] = at.T;
  at.offset = offset_at(at.offset, at.cap[0], position);
  at.set_layout(0, attrs->keys_transposed != 0);
  return at;
}

namespace {

Status attend(const KernelArgs& a, const AttentionArgs& at) {
  const double scale = at.scale;
  const bool causal = at.causal;
  const int64_t offset = at.offset, G = at.G, T = at.T, D = at.D, E = at.E, S1 = at.used[0],
                S2 = at.used[1], S = at.keys();
  // Value d of key j of query group g: in k (or k2) and in v (or v2), of key group g / rep.
  auto key = [&](int64_t g, int64_t j, int64_t d) {
    return j < S1 ? in_f32(a, 1)[at.k_off(g) + j * at.k_rs + d * at.k_ds] : in_f32(a, 3)[(at.kv(g) * S2 + j - S1) * D + d];
  };
  auto val = [&](int64_t g, int64_t j) {
    return j < S1 ? in_f32(a, 2) + at.v_off(g) + j * at.v_rs : in_f32(a, 4) + (at.kv(g) * S2 + j - S1) * E;
  };
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> z(static_cast<size_t>(S));
  float* out = out_f32(a);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t i = 0; i < T; ++i) {
      const float* q = in_f32(a, 0) + at.q_off(g) + i * at.q_rs;
      double mx = ninf;
      for (int64_t j = 0; j < S; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[d]) * key(g, j, d);
        z[static_cast<size_t>(j)] = causal && j > i + offset ? ninf : scale * static_cast<double>(static_cast<float>(s));
        if (at.mask) z[static_cast<size_t>(j)] += at.mask_row(g, i)[j];
        mx = std::fmax(mx, z[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (int64_t j = 0; j < S; ++j) sum += std::exp(z[static_cast<size_t>(j)] - mx);
      // Stored as the fused softmax writes them: a masked entry exactly 0 (nan in a row that
      // keeps no key, as the whole row).
      for (int64_t j = 0; at.store && j < S; ++j) {
        const auto p = static_cast<float>(std::exp(z[static_cast<size_t>(j)] - mx) / sum);
        const bool masked = causal && j > i + offset, none = causal && i + offset < 0;
        out[at.probs_off(g, i) + j] = masked && !none ? 0.0f : at.zero_nan && std::isnan(p) ? 0.0f : p;
      }
      for (int64_t e = 0; e < E; ++e) {
        double o = 0;
        for (int64_t j = 0; j < S; ++j) {
          const auto p = static_cast<float>(std::exp(z[static_cast<size_t>(j)] - mx) / sum);
          o += static_cast<double>(at.zero_nan && std::isnan(p) ? 0.0f : p) * val(g, j)[e];
        }
        out[at.o_off(g) + i * at.o_rs + e] = static_cast<float>(o);
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status Attention(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const AttentionArgs at, attention_args(a));
  return attend(a, at);
}

void write_new_rows(const KernelArgs& a, const AttentionArgs& at, int64_t kv) {
  const int64_t row = kv * at.cap[0] + at.used[0];
  const float* k = in_f32(a, 3) + kv * at.T * at.D;
  float* kc = a.in[1].as<float>() + kv * at.cap[0] * at.D + at.used[0] * at.k_rs;
  for (int64_t t = 0; t < at.T; ++t)  // a transposed cache's keys are columns
    for (int64_t d = 0; d < at.D; ++d) kc[t * at.k_rs + d * at.k_ds] = k[t * at.D + d];
  std::copy_n(in_f32(a, 4) + kv * at.T * at.E, at.T * at.E, a.in[2].as<float>() + row * at.E);
}

// The new rows into the caches at the position, then attention over the cached rows before it
// and the new rows (read where they are, as the second block of keys).
Status CacheAttention(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const AttentionArgs at, cache_attention_args(a));
  const Shape& cache = a.in[1].shape();  // its key heads (not G / rep: rep is 0 when q has no rows)
  for (int64_t kv = 0; kv < dims_product(cache, 0, cache.size() - 2); ++kv) write_new_rows(a, at, kv);
  return attend(a, at);
}

}  // namespace volta::cpu::ref

namespace volta::cpu::ref {

// The gradients of attention(q, k, v) as the unfused backward computes them, in double with the
// same f32 roundings of the stored intermediates: probabilities p (the forward softmax),
// dp = dy vᵀ, ds = scale * p * (dp - sum(dp p)); then dq = ds k, dk = dsᵀ q, dv = pᵀ dy.
Result<AttentionArgs> attention_grad_args(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto attrs, ir::typed_attrs<ir::Op::AttentionGrad>(a.node));
  AttentionArgs at = scaled_mask(*attrs);
  const Shape& qs = a.in[0].shape();
  const size_t r = qs.size();
  at.G = dims_product(qs, 0, r - 2), at.T = at.cap[0] = at.used[0] = qs[r - 2], at.D = at.E = qs[r - 1];
  at.rep = at.G / std::max<int64_t>(1, dims_product(a.in[1].shape(), 0, r - 2));
  if (a.in.size() == 5) at.probs = in_f32(a, 4);
  if (attrs->packed_heads) return packed(at, qs, *attrs->packed_heads);
  at.set_layout(0);
  return at;
}

// Grouped queries: k and v are those of key group g / rep, and their gradients are written per
// query group (the gradient rule sums each key group's).
Status AttentionGrad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const AttentionArgs args, attention_grad_args(a));
  const double scale = args.scale;
  const bool causal = args.causal;
  const int64_t offset = args.offset, G = args.G, T = args.T, D = args.D;
  const float *q0 = in_f32(a, 0), *k0 = in_f32(a, 1), *v0 = in_f32(a, 2), *dy0 = in_f32(a, 3);
  float* out = out_f32(a);
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<float> p(static_cast<size_t>(T * T)), ds(static_cast<size_t>(T * T));
  auto at = [T](std::vector<float>& m, int64_t i, int64_t j) -> float& { return m[static_cast<size_t>(i * T + j)]; };
  for (int64_t g = 0; g < G; ++g) {
    const float *q = q0 + args.q_off(g), *dy = dy0 + args.o_off(g), *k = k0 + args.k_off(g), *v = v0 + args.v_off(g);
    const int64_t rs = args.q_rs, dy_rs = args.o_rs;  // q, k and v alike
    auto dot = [&](const float* x, int64_t x_rs, int64_t i, const float* y, int64_t j) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += static_cast<double>(x[i * x_rs + d]) * y[j * rs + d];
      return static_cast<float>(s);
    };
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> z(static_cast<size_t>(T));
      double mx = ninf, sum = 0, pdp = 0;
      for (int64_t j = 0; j < T; ++j) {
        z[static_cast<size_t>(j)] = causal && j > i + offset ? ninf : scale * static_cast<double>(dot(q, rs, i, k, j));
        mx = std::fmax(mx, z[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < T; ++j) sum += std::exp(z[static_cast<size_t>(j)] - mx);
      // A masked probability is exactly 0, as the forward's softmax writes it, also in a row whose
      // sum is nan (a +inf score); a row that keeps no key is nan throughout.
      const bool none = causal && i + offset < 0;
      for (int64_t j = 0; j < T; ++j) {
        const bool masked = causal && j > i + offset && !none;
        at(p, i, j) = args.probs ? args.probs[(g * T + i) * T + j]  // the forward's, stored
                      : masked   ? 0.0f
                                 : static_cast<float>(std::exp(z[static_cast<size_t>(j)] - mx) / sum);
        at(ds, i, j) = dot(dy, dy_rs, i, v, j);  // dp for now
        pdp += static_cast<double>(at(ds, i, j)) * at(p, i, j);
      }
      for (int64_t j = 0; j < T; ++j) at(ds, i, j) = static_cast<float>(scale * at(p, i, j) * (at(ds, i, j) - pdp));
    }
    for (int64_t i = 0; i < T; ++i)
      for (int64_t d = 0; d < D; ++d) {
        double dq = 0, dk = 0, dv = 0;
        for (int64_t j = 0; j < T; ++j) {
          dq += static_cast<double>(at(ds, i, j)) * k[j * rs + d];
          dk += static_cast<double>(at(ds, j, i)) * q[j * rs + d];
          dv += static_cast<double>(at(p, j, i)) * dy[j * dy_rs + d];
        }
        const int64_t row = i * args.grad_rs() + d;
        out[args.grad_off(0, g) + row] = static_cast<float>(dq);
        out[args.grad_off(1, g) + row] = static_cast<float>(dk);
        out[args.grad_off(2, g) + row] = static_cast<float>(dv);
      }
  }
  return Status::ok();
}

}  // namespace volta::cpu::ref

namespace volta::cpu::ref {

Result<int64_t> rope_position(const KernelArgs& a) {
  const Shape& x = a.in[0].shape();
  if (a.in.size() < 4) return int64_t{0};
  return position_input(a, 3, a.in[1].shape()[0] - x[x.size() - 2]);
}

// Each product is rounded to f32 before the add: the bits of x * cos + rotate_half(x) * sin.
void rope_rows(const KernelArgs& a, int64_t position, int64_t r0, int64_t r1) {
  const Shape& xs = a.in[0].shape();
  const int64_t T = xs[xs.size() - 2], D = xs.back(), h = D / 2;
  const float *x = in_f32(a, 0), *cos = in_f32(a, 1), *sin = in_f32(a, 2);
  float* out = out_f32(a);
  for (int64_t r = r0; r < r1; ++r) {
    const float *x1 = x + r * D, *x2 = x1 + h;
    const float *c = cos + (position + r % T) * h, *s = sin + (position + r % T) * h;
    float *y1 = out + r * D, *y2 = y1 + h;
    for (int64_t i = 0; i < h; ++i) {
      const float a1 = x1[i] * c[i], b1 = x2[i] * s[i], a2 = x2[i] * c[i], b2 = x1[i] * s[i];
      y1[i] = a1 - b1;
      y2[i] = a2 + b2;
    }
  }
}

Status Rope(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t position, rope_position(a));
  rope_rows(a, position, 0, a.in[0].numel() / std::max<int64_t>(1, a.in[0].shape().back()));
  return Status::ok();
}

}  // namespace volta::cpu::ref
