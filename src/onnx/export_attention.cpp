// The ONNX exporter's attention family: attention (a prefix, a second key block, grouped
// queries, a causal mask), rope and swiglu as short standard subgraphs, and causal_mask.
#include <limits>

#include "onnx/exporter.h"

namespace volta::onnx {

// A BOOL [R, C] initializer, true where column j <= row i + offset (what a causal mask keeps).
// Built once for every node of its shape and offset; past 2^28 entries (a context of 16384) it is
// refused before it is built: at 65536 the mask alone (4 GiB) passes protobuf's 2 GiB limit,
// which was found only after 20 GB of masks were made.
Result<std::string> Exporter::causal_keep(const Shape& s, int64_t offset) {
  const int64_t R = s[s.size() - 2], C = s[s.size() - 1];
  constexpr int64_t kMaxEntries = int64_t{1} << 28;
  if (R > 0 && C > kMaxEntries / R)
    return fail("its causal mask [" + std::to_string(R) + ", " + std::to_string(C) + "] has more than 2^28 entries, "
                "too large for an ONNX file (export with a smaller --seq)");
  const std::array<int64_t, 3> key{R, C, offset};
  if (auto it = keeps_.find(key); it != keeps_.end()) return it->second;
  Tensor keep = Tensor::zeros(DType::f32, {R, C});
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C && j <= i + offset; ++j) keep.data<float>()[i * C + j] = 1.0f;
  VOLTA_ASSIGN_OR_RETURN(std::string name, initializer(keep, ElemType::kBool, temp("keep")));
  return keeps_[key] = name;
}

// attention(q, k, v[, k2, v2 | mask]) as the graph it stands for: Concat, Transpose, MatMul, Mul,
// Where, Add, Softmax, (IsNaN, Where,) MatMul.
Status Exporter::attention() {
  const bool mask = n_->inputs.size() == 4 && in_type(3).dtype == DType::f32;
  if (n_->inputs.size() == 4 && !mask) return fail("a run-time position (a decode step) has no ONNX form here");
  const auto rank = static_cast<int64_t>(in_type(0).shape.size());
  std::string k = in(1), v = in(2);
  const int64_t cap = in_type(1).shape[static_cast<size_t>(rank - 2)];
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Attention>(*n_));
  if (at->packed_heads) return fail("packed_heads (a layout the passes write) has no ONNX form here");
  if (at->store_probs != 0) return fail("store_probs (a result the passes write) has no ONNX form here");
  const int64_t s1 = at->prefix.value_or(cap);
  if (s1 < cap) {
    VOLTA_ASSIGN_OR_RETURN(std::string st, ints({0}, "starts"));
    VOLTA_ASSIGN_OR_RETURN(std::string en, ints({s1}, "ends"));
    VOLTA_ASSIGN_OR_RETURN(std::string ax, ints({rank - 2}, "axes"));
    const std::string kp = temp("k_prefix"), vp = temp("v_prefix");
    node("Slice", {k, st, en, ax}, kp);
    node("Slice", {v, st, en, ax}, vp);
    k = kp, v = vp;
  }
  if (n_->inputs.size() == 5) {
    const std::string kc = temp("k"), vc = temp("v");
    attr(node("Concat", {k, in(3)}, kc), "axis", rank - 2);
    attr(node("Concat", {v, in(4)}, vc), "axis", rank - 2);
    k = kc, v = vc;
  }
  if (rank > 2 && in_type(1).shape[static_cast<size_t>(rank - 3)] != in_type(0).shape[static_cast<size_t>(rank - 3)]) {
    // grouped queries: each key head once per query head
    VOLTA_ASSIGN_OR_RETURN(k, repeat_heads(k, in_type(1).shape.back(), "k"));
    VOLTA_ASSIGN_OR_RETURN(v, repeat_heads(v, in_type(2).shape.back(), "v"));
  }
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) perm[static_cast<size_t>(d)] = d;
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  const std::string kt = temp("k_t"), s = temp("scores");
  attr(node("Transpose", {k}, kt), "perm", perm);
  node("MatMul", {in(0), kt}, s);
  std::string x = s;
  const double scale = at->scale;
  if (scale != 1.0) {
    VOLTA_ASSIGN_OR_RETURN(std::string c, scalar(scale, "scale"));
    x = temp("scaled");
    node("Mul", {s, c}, x);
  }
  if (at->causal_offset) {
    const int64_t offset = *at->causal_offset;
    Shape ss = in_type(0).shape;
    ss.back() = s1 + (n_->inputs.size() == 5 ? in_type(3).shape[ss.size() - 2] : 0);
    VOLTA_ASSIGN_OR_RETURN(std::string keep, causal_keep(ss, offset));
    VOLTA_ASSIGN_OR_RETURN(std::string ninf, scalar(-std::numeric_limits<double>::infinity(), "ninf"));
    const std::string m = temp("masked");
    node("Where", {keep, x, ninf}, m);
    x = m;
  }
  if (mask) {
    const std::string m = temp("masked");
    node("Add", {x, in(3)}, m);
    x = m;
  }
  std::string p = temp("probs");
  attr(node("Softmax", {x}, p), "axis", int64_t{-1});
  if (at->zero_nan_probs != 0) {  // nan probabilities (rows with every key masked) -> 0
    VOLTA_ASSIGN_OR_RETURN(std::string zero, scalar(0.0, "zero"));
    const std::string nan = temp("nan"), kept = temp("probs_kept");
    node("IsNaN", {p}, nan);
    node("Where", {nan, zero, p}, kept);
    p = kept;
  }
  node("MatMul", {p, v}, self());
  return Status::ok();
}

// A key/value tensor [b..., Hk, S, E] of this attention node as [b..., H, S, E]: key head h / rep
// for query head h (Reshape to [b..., Hk, 1, S, E], Expand the 1 to rep, Reshape).
Result<std::string> Exporter::repeat_heads(const std::string& kv, int64_t E, const char* what) {
  const Shape q = in_type(0).shape;
  const size_t r = q.size();
  const int64_t hk = in_type(1).shape[r - 3], rep = q[r - 3] / hk;
  Shape one(q.begin(), q.end() - 3), wide(r + 1, 1), full(q.begin(), q.end() - 2);
  one.insert(one.end(), {hk, 1, -1, E});
  wide[r - 2] = rep;
  full.insert(full.end(), {-1, E});
  const std::string w(what);
  VOLTA_ASSIGN_OR_RETURN(std::string s1, ints(one, (w + "_grouped_shape").c_str()));
  VOLTA_ASSIGN_OR_RETURN(std::string s2, ints(wide, (w + "_repeat").c_str()));
  VOLTA_ASSIGN_OR_RETURN(std::string s3, ints(full, (w + "_heads_shape").c_str()));
  const std::string a = temp((w + "_grouped").c_str()), b = temp((w + "_repeated").c_str()), c = temp((w + "_heads").c_str());
  node("Reshape", {kv, s1}, a);
  node("Expand", {a, s2}, b);
  node("Reshape", {b, s3}, c);
  return c;
}

// The two halves of input 0's last axis, as Slices named `first` and `second`.
Result<std::pair<std::string, std::string>> Exporter::last_axis_halves(const char* first, const char* second) {
  const int64_t h = in_type(0).shape.back() / 2;
  VOLTA_ASSIGN_OR_RETURN(std::string zero, ints({0}, "zero"));
  VOLTA_ASSIGN_OR_RETURN(std::string half, ints({h}, "half"));
  VOLTA_ASSIGN_OR_RETURN(std::string end, ints({2 * h}, "end"));
  VOLTA_ASSIGN_OR_RETURN(std::string last, ints({-1}, "last_axis"));
  std::pair<std::string, std::string> out{temp(first), temp(second)};
  node("Slice", {in(0), zero, half, last}, out.first);
  node("Slice", {in(0), half, end, last}, out.second);
  return out;
}

// x [..., T, D] rotated by the first T rows of the tables: the halves' products, then Concat.
Status Exporter::rope() {
  if (n_->inputs.size() == 4) return fail("a run-time position (a decode step) has no ONNX form here");
  const Shape& x = in_type(0).shape;
  VOLTA_ASSIGN_OR_RETURN(std::string zero, ints({0}, "zero"));
  VOLTA_ASSIGN_OR_RETURN(std::string rows, ints({x[x.size() - 2]}, "rows"));
  const std::string c = temp("cos"), s = temp("sin");
  node("Slice", {in(1), zero, rows, zero}, c);
  node("Slice", {in(2), zero, rows, zero}, s);
  VOLTA_ASSIGN_OR_RETURN(const auto halves, last_axis_halves("x1", "x2"));
  const auto& [x1, x2] = halves;
  auto product = [&](const std::string& a, const std::string& b, const char* what) {
    const std::string p = temp(what);
    node("Mul", {a, b}, p);
    return p;
  };
  const std::string y1 = temp("y1"), y2 = temp("y2");
  node("Sub", {product(x1, c, "x1c"), product(x2, s, "x2s")}, y1);
  node("Add", {product(x2, c, "x2c"), product(x1, s, "x1s")}, y2);
  attr(node("Concat", {y1, y2}, self()), "axis", int64_t{-1});
  return Status::ok();
}

// silu(gate) * up on the two halves of the last axis.
Status Exporter::swiglu() {
  VOLTA_ASSIGN_OR_RETURN(const auto halves, last_axis_halves("gate", "up"));
  const auto& [g, u] = halves;
  const std::string sg = temp("sigmoid"), silu = temp("silu");
  node("Sigmoid", {g}, sg);
  node("Mul", {g, sg}, silu);
  node("Mul", {silu, u}, self());
  return Status::ok();
}

Status Exporter::causal_mask() {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::CausalMask>(*n_));
  const int64_t offset = at->offset;
  const double value = at->value;
  VOLTA_ASSIGN_OR_RETURN(std::string keep, causal_keep(in_type(0).shape, offset));
  VOLTA_ASSIGN_OR_RETURN(std::string fill, scalar(value, "fill"));
  node("Where", {keep, in(0), fill}, self());
  return Status::ok();
}

}  // namespace volta::onnx
