// The vocabulary of the op-test harness's case table (op_cases.cpp and its per-family parts):
// inputs by fill, attribute values, and a case's marks.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ops/op_cases.h"

namespace volta::test::cases {

using ir::Op;
using A = ir::Attrs;
using Ints = std::vector<int64_t>;

inline CaseInput f(Shape s) { return {{DType::f32, std::move(s)}, Fill::Normal}; }
inline CaseInput pos(Shape s) { return {{DType::f32, std::move(s)}, Fill::Positive}; }
inline CaseInput distinct(Shape s) { return {{DType::f32, std::move(s)}, Fill::Distinct}; }
inline CaseInput ids(DType t, Shape s, int64_t bound) { return {{t, std::move(s)}, Fill::Ids, static_cast<double>(bound)}; }
inline CaseInput i32(Shape s, int64_t bound) { return ids(DType::i32, std::move(s), bound); }
inline CaseInput i64(Shape s, int64_t bound) { return ids(DType::i64, std::move(s), bound); }
inline CaseInput value(DType t, Shape s, double v) { return {{t, std::move(s)}, Fill::Value, v}; }
inline CaseInput mask(Shape s) { return {{DType::f32, std::move(s)}, Fill::Mask}; }
inline CaseInput cos_table(int64_t P, int64_t half) { return {{DType::f32, {P, half}}, Fill::Rotary, 0}; }
inline CaseInput sin_table(int64_t P, int64_t half) { return {{DType::f32, {P, half}}, Fill::Rotary, 1}; }

inline ir::AttrValue I(int64_t v) { return v; }
inline ir::AttrValue F(double v) { return v; }
inline ir::AttrValue S(const char* v) { return std::string(v); }
inline ir::AttrValue V(Ints v) { return v; }

inline OpCase C(std::vector<CaseInput> in, A attrs = {}, double tol = 0) {
  OpCase c;
  c.inputs = std::move(in);
  c.attrs = std::move(attrs);
  c.tol = tol;
  return c;
}
inline OpCase needs(std::string feature, OpCase c) {
  c.feature = std::move(feature);
  return c;
}
inline OpCase no_grad(OpCase c, std::string why) {
  c.no_grad = std::move(why);
  return c;
}
inline OpCase stored(OpCase c) {  // attention with store_probs
  c.attrs.set("store_probs", int64_t{1});
  return needs("attention.stored_probs", no_grad(std::move(c), "a result the passes write after autograd"));
}

// The attention op's and cache_attention's cases (op_cases_attention.cpp).
std::vector<OpCase> attention_cases();
std::vector<OpCase> cache_attention_cases();

}  // namespace volta::test::cases
