// The attention op's cases for the op-test harness: the plain and grouped forms, prefixes and a
// second block of keys, a run-time position, masks, packed heads and stored probabilities; and
// cache_attention's.
#include "ops/op_case_build.h"

namespace volta::test::cases {

std::vector<OpCase> attention_cases() {
  return {
      C({f({2, 4, 5, 32}), f({2, 4, 7, 32}), f({2, 4, 7, 32})}, A{{"scale", F(0.2)}}, 2e-6),
      C({f({3, 9, 8}), f({3, 9, 8}), f({3, 9, 5})}, A{{"scale", F(0.3)}, {"causal_offset", I(0)}}, 2e-6),
      C({f({2, 3, 40, 16}), f({2, 3, 40, 16}), f({2, 3, 40, 21})}, A{{"scale", F(0.25)}, {"causal_offset", I(0)}}, 5e-6),
      C({f({2, 37, 8}), f({2, 50, 8}), f({2, 50, 8})}, A{{"causal_offset", I(13)}}, 2e-6),
      no_grad(C({f({2, 20, 8}), f({2, 20, 8}), f({2, 20, 8})}, A{{"causal_offset", I(-3)}}, 5e-6),
              "rows that keep no key are nan"),
      C({f({2, 12, 8}), f({2, 30, 8}), f({2, 30, 8})}, A{{"scale", F(0.5)}, {"prefix", I(17)}}, 2e-6),
      C({f({2, 4, 3}), f({2, 3, 3}), f({2, 3, 5}), f({2, 2, 3}), f({2, 2, 5})},
        A{{"scale", F(0.6)}, {"causal_offset", I(1)}, {"prefix", I(2)}}, 2e-6),  // a prefix of k, v, then k2, v2
      // rows enough for CUDA's tiled kernels: k, v then k2, v2; a head width off the float4
      C({f({2, 10, 8}), f({2, 6, 8}), f({2, 6, 5}), f({2, 10, 8}), f({2, 10, 5})},
        A{{"scale", F(0.45)}, {"causal_offset", I(6)}}, 2e-6),
      C({f({2, 20, 5}), f({2, 20, 5}), f({2, 20, 7})}, A{{"scale", F(0.4)}, {"causal_offset", I(0)}}, 2e-6),
      // a head width of 64 (CUDA's tiled kernels take it 4 rows by 4 columns a thread): two
      // row blocks, the second partial; 70 keys, three tiles, the last partial
      no_grad(C({f({2, 2, 45, 64}), f({2, 2, 45, 64}), f({2, 2, 45, 64})}, A{{"scale", F(0.125)}, {"causal_offset", I(0)}}, 3e-5),
              "the rule is the narrower cases'; attention_grad's cases check this width"),
      no_grad(C({f({1, 2, 40, 64}), f({1, 2, 70, 64}), f({1, 2, 70, 64})}, A{{"scale", F(0.125)}}, 3e-5),
              "the rule is the narrower cases'; attention_grad's cases check this width"),
      // shapes the run-to-run level runs on CUDA's tensor cores (cuda.attention_tf32x3): rows a
      // multiple of 64, as many keys, heads 64 wide; causal, two row blocks; unmasked; packed heads
      no_grad(C({f({2, 3, 128, 64}), f({2, 3, 128, 64}), f({2, 3, 128, 64})}, A{{"scale", F(0.125)}, {"causal_offset", I(0)}}, 3e-5),
              "the rule is the narrower cases'; attention_grad's cases check this width"),
      no_grad(C({f({1, 2, 64, 64}), f({1, 2, 64, 64}), f({1, 2, 64, 64})}, A{{"scale", F(0.125)}}, 3e-5),
              "the rule is the narrower cases'; attention_grad's cases check this width"),
      // key rows wider than value rows: the tiles hold the wider
      C({f({2, 2, 20, 64}), f({2, 2, 20, 64}), f({2, 2, 20, 32})}, A{{"scale", F(0.125)}, {"causal_offset", I(0)}}, 3e-5),
      // a decode step over a cache and the new position (k2, v2), then the cache read in place
      C({f({1, 4, 1, 32}), f({1, 4, 20, 32}), f({1, 4, 20, 32}), f({1, 4, 1, 32}), f({1, 4, 1, 32})},
        A{{"scale", F(0.17)}, {"causal_offset", I(20)}}, 2e-6),
      no_grad(C({f({2, 6, 3}), f({2, 2, 3}), f({2, 2, 19}), f({2, 33, 3}), f({2, 33, 19})}, A{{"causal_offset", I(-1)}}, 2e-6),
              "row 0 keeps no key: nan"),
      no_grad(C({f({1, 2, 1, 8}), f({1, 2, 10, 8}), f({1, 2, 10, 8}), value(DType::i32, {}, 4)},
                A{{"scale", F(0.35)}, {"causal_offset", I(0)}}, 2e-6),
              "the position form has no gradient"),
      // grouped queries: k and v with fewer heads than q (self-attention, a prefix, k2 and v2, a decode step)
      C({f({2, 4, 9, 8}), f({2, 2, 9, 8}), f({2, 2, 9, 8})}, A{{"scale", F(0.3)}, {"causal_offset", I(0)}}, 2e-6),
      C({f({1, 6, 20, 16}), f({1, 2, 20, 16}), f({1, 2, 20, 16})}, A{{"scale", F(0.25)}, {"causal_offset", I(0)}}, 5e-6),
      C({f({2, 4, 5, 8}), f({2, 1, 12, 8}), f({2, 1, 12, 6})}, A{{"prefix", I(7)}, {"causal_offset", I(2)}}, 2e-6),
      C({f({1, 4, 3, 8}), f({1, 2, 4, 8}), f({1, 2, 4, 6}), f({1, 2, 3, 8}), f({1, 2, 3, 6})},
        A{{"scale", F(0.4)}, {"causal_offset", I(4)}}, 2e-6),
      no_grad(C({f({1, 4, 1, 8}), f({1, 2, 10, 8}), f({1, 2, 10, 8}), value(DType::i32, {}, 6)},
                A{{"scale", F(0.35)}, {"causal_offset", I(0)}}, 2e-6),
              "the position form has no gradient"),
      // keys_transposed: k [.., D, S] (a key cache stored transposed), the position form: a
      // decode step's row, grouped queries, a few rows (per-row path), many rows (the GEMM path)
      needs("attention.keys_transposed",
            no_grad(C({f({1, 2, 1, 8}), f({1, 2, 8, 10}), f({1, 2, 10, 8}), value(DType::i32, {}, 4)},
                      A{{"scale", F(0.35)}, {"causal_offset", I(0)}, {"keys_transposed", I(1)}}, 2e-6),
                    "the position form has no gradient")),
      needs("attention.keys_transposed",
            no_grad(C({f({2, 4, 1, 32}), f({2, 2, 32, 40}), f({2, 2, 40, 32}), value(DType::i32, {}, 37)},
                      A{{"scale", F(0.17)}, {"causal_offset", I(0)}, {"keys_transposed", I(1)}}, 2e-6),
                    "the position form has no gradient")),
      needs("attention.keys_transposed",
            no_grad(C({f({1, 3, 3, 5}), f({1, 3, 5, 12}), f({1, 3, 12, 7}), value(DType::i32, {}, 6)},
                      A{{"scale", F(0.4)}, {"causal_offset", I(0)}, {"keys_transposed", I(1)}}, 2e-6),
                    "the position form has no gradient")),
      needs("attention.keys_transposed",
            no_grad(C({f({1, 2, 20, 16}), f({1, 2, 16, 30}), f({1, 2, 30, 16}), value(DType::i32, {}, 7)},
                      A{{"scale", F(0.25)}, {"causal_offset", I(0)}, {"keys_transposed", I(1)}}, 5e-6),
                    "the position form has no gradient")),
      // an additive mask (an imported attention): broadcast over heads, over heads and rows, or
      // whole; few query rows (per-row path) and many (the GEMM path); fully masked rows are nan,
      // or zeros with zero_nan_probs
      no_grad(C({f({2, 3, 12, 16}), f({2, 3, 20, 16}), f({2, 3, 20, 8}), mask({2, 1, 12, 20})},
                A{{"scale", F(0.25)}}, 2e-6),
              "the mask form has no gradient"),
      no_grad(C({f({2, 3, 12, 16}), f({2, 3, 20, 16}), f({2, 3, 20, 8}), mask({2, 1, 1, 20})},
                A{{"scale", F(0.3)}, {"zero_nan_probs", I(1)}}, 2e-6),
              "the mask form has no gradient"),
      no_grad(C({f({2, 2, 3, 8}), f({2, 2, 9, 8}), f({2, 2, 9, 5}), mask({2, 2, 3, 9})}, A{{"zero_nan_probs", I(1)}}, 2e-6),
              "the mask form has no gradient"),
      no_grad(C({f({4, 10, 8}), f({4, 10, 8}), f({4, 10, 8}), mask({10, 10})},
                A{{"scale", F(0.5)}, {"causal_offset", I(0)}, {"zero_nan_probs", I(1)}}, 2e-6),
              "the mask form has no gradient"),
      // packed_heads: q, k, v the thirds of packed rows, the output's heads side by side; many
      // query rows (GEMM path), few (per-row path), and a head width off the vector width
      no_grad(C({f({2, 40, 96}), f({2, 40, 96}), f({2, 40, 96})},
                A{{"scale", F(0.25)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 5e-6),
              "a layout the passes write after autograd"),
      no_grad(C({f({1, 5, 96}), f({1, 5, 96}), f({1, 5, 96})}, A{{"causal_offset", I(0)}, {"packed_heads", I(4)}}, 2e-6),
              "a layout the passes write after autograd"),
      no_grad(C({f({2, 40, 384}), f({2, 40, 384}), f({2, 40, 384})},
                A{{"scale", F(0.125)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 3e-5),
              "a layout the passes write after autograd"),
      no_grad(C({f({2, 128, 384}), f({2, 128, 384}), f({2, 128, 384})},
                A{{"scale", F(0.125)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 3e-5),
              "a layout the passes write after autograd"),
      no_grad(C({f({3, 20, 45}), f({3, 20, 45}), f({3, 20, 45})}, A{{"scale", F(0.4)}, {"packed_heads", I(3)}}, 2e-6),
              "a layout the passes write after autograd"),
      no_grad(C({f({2, 3, 10, 45}), f({2, 3, 10, 45}), f({2, 3, 10, 45})},
                A{{"causal_offset", I(2)}, {"packed_heads", I(3)}}, 2e-6),
              "a layout the passes write after autograd"),
      // store_probs: the output, then the probabilities; the GEMM path and the per-row path,
      // packed heads, grouped queries, no mask
      stored(C({f({2, 3, 40, 16}), f({2, 3, 40, 16}), f({2, 3, 40, 16})}, A{{"scale", F(0.25)}, {"causal_offset", I(0)}},
               5e-6)),
      stored(C({f({2, 5, 8}), f({2, 5, 8}), f({2, 5, 8})}, A{{"causal_offset", I(0)}}, 2e-6)),
      stored(C({f({2, 40, 96}), f({2, 40, 96}), f({2, 40, 96})},
               A{{"scale", F(0.25)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 5e-6)),
      stored(C({f({2, 4, 9, 8}), f({2, 2, 9, 8}), f({2, 2, 9, 8})}, A{{"scale", F(0.3)}, {"causal_offset", I(1)}}, 2e-6)),
      stored(C({f({3, 20, 8}), f({3, 20, 8}), f({3, 20, 8})}, A{{"scale", F(0.4)}}, 5e-6)),
      stored(C({f({2, 20, 8}), f({2, 20, 8}), f({2, 20, 8})}, A{{"causal_offset", I(-3)}}, 5e-6)),
  };
}

// q, the caches (written in place: the harness compares them too), the new rows, the position: a
// decode step's one row, grouped queries, several rows at a position, the first and the last
// rows of the cache, a head width off the vector width.
std::vector<OpCase> cache_attention_cases() {
  auto step = [](Shape q, Shape cache, Shape rows, int64_t position, A attrs) {
    Shape vc = cache, vr = rows;
    return no_grad(C({f(std::move(q)), f(std::move(cache)), f(std::move(vc)), f(std::move(rows)), f(std::move(vr)),
                      value(DType::i32, {}, static_cast<double>(position))},
                     std::move(attrs), 2e-6),
                   "a KV-cache write has no gradient");
  };
  // The same with the k cache stored transposed: `cache` is the rows' [.., S, D].
  auto keys_as_columns = [](Shape q, Shape cache, Shape rows, int64_t position, A attrs) {
    Shape kc = cache, vr = rows;
    std::swap(kc[kc.size() - 1], kc[kc.size() - 2]);
    attrs.set("keys_transposed", I(1));
    return needs("attention.keys_transposed",
                 no_grad(C({f(std::move(q)), f(std::move(kc)), f(std::move(cache)), f(std::move(rows)), f(std::move(vr)),
                            value(DType::i32, {}, static_cast<double>(position))},
                           std::move(attrs), 2e-6),
                         "a KV-cache write has no gradient"));
  };
  return {
      step({1, 4, 1, 32}, {1, 4, 20, 32}, {1, 4, 1, 32}, 13, A{{"scale", F(0.17)}, {"causal_offset", I(0)}}),
      step({2, 4, 1, 8}, {2, 2, 10, 8}, {2, 2, 1, 8}, 9, A{{"scale", F(0.35)}, {"causal_offset", I(0)}}),
      step({1, 6, 1, 16}, {1, 2, 12, 16}, {1, 2, 1, 16}, 0, A{{"scale", F(0.25)}, {"causal_offset", I(0)}}),
      step({2, 3, 4, 5}, {2, 3, 9, 5}, {2, 3, 4, 5}, 3, A{{"scale", F(0.4)}, {"causal_offset", I(0)}}),
      step({3, 5, 7}, {3, 11, 7}, {3, 5, 7}, 6, A{{"scale", F(0.3)}}),
      // keys_transposed: the k cache [.., D, S], its new keys written as columns (a decode step,
      // grouped queries, several rows, a head width off the vector width)
      keys_as_columns({1, 4, 1, 32}, {1, 4, 20, 32}, {1, 4, 1, 32}, 13, A{{"scale", F(0.17)}, {"causal_offset", I(0)}}),
      keys_as_columns({2, 4, 1, 8}, {2, 2, 10, 8}, {2, 2, 1, 8}, 9, A{{"scale", F(0.35)}, {"causal_offset", I(0)}}),
      keys_as_columns({2, 3, 4, 5}, {2, 3, 9, 5}, {2, 3, 4, 5}, 3, A{{"scale", F(0.4)}, {"causal_offset", I(0)}}),
      keys_as_columns({2, 6, 1, 16}, {2, 2, 36, 16}, {2, 2, 1, 16}, 35, A{{"scale", F(0.25)}, {"causal_offset", I(0)}}),
  };
}

}  // namespace volta::test::cases
