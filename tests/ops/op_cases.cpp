#include "ops/op_cases.h"
#include "ops/op_case_build.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <variant>

#include "volta/builder.h"
#include "volta/rng.h"

namespace volta::test {

namespace {

using namespace cases;  // NOLINT(google-build-using-namespace): the case table's vocabulary

// Ops of category Unary, exact or within `tol`; kinked ones (relu, abs, sign) get distinct
// values, none within a finite-difference step of the kink.
std::vector<OpCase> unary(double tol, bool positive = false, bool kinked = false) {
  auto x = [&](Shape s) { return positive ? pos(std::move(s)) : kinked ? distinct(std::move(s)) : f(std::move(s)); };
  return {C({x({1000})}, {}, tol), C({x({7, 33})}, {}, tol)};
}
std::vector<OpCase> binary(double tol, bool positive_rhs = false) {
  auto rhs = [&](Shape s) { return positive_rhs ? pos(std::move(s)) : f(std::move(s)); };
  return {
      C({f({6, 40000}), rhs({6, 40000})}, {}, tol),  // the CPU's vector path
      C({f({3, 5, 7}), rhs({7})}, {}, tol),
      C({f({3, 5, 7}), rhs({5, 7})}, {}, tol),
      C({f({3, 5, 7}), rhs({})}, {}, tol),
      C({f({5, 7}), rhs({4, 5, 7})}, {}, tol),     // the left operand repeats
      C({f({2, 3, 4}), rhs({1, 1, 4})}, {}, tol),  // leading 1s
      C({f({3, 1, 7}), rhs({3, 5, 7})}, {}, tol),  // both broadcast: the general walk
      C({f({1, 4, 5}), rhs({3, 1, 5})}, {}, tol),
  };
}

// Integer operands (ir::has_integer_math): i32 and i64, broadcast; `bound` keeps a divisor's 0.
std::vector<OpCase> integer(int arity, int64_t bound) {
  if (arity == 1) return {C({i32({7, 9}, bound)}), C({i64({40}, bound)})};
  return {C({i32({3, 5, 7}, 1000), i32({5, 7}, bound)}), C({i64({4, 6}, 1 << 20), i64({}, bound)}),
          C({i64({3, 1}, 9), i64({1, 4}, bound)})};
}
template <typename... Lists>
std::vector<OpCase> join(std::vector<OpCase> a, Lists... more) {
  (a.insert(a.end(), more.begin(), more.end()), ...);
  return a;
}

std::vector<OpCase> cases_of(Op op) {
  switch (op) {
    case Op::Input:
    case Op::Param:
    case Op::Constant: return {};

    case Op::Matmul:
      return {
          C({f({7, 13}), f({13, 5})}, {}, 1e-5),
          C({f({130, 70}), f({70, 90})}, {}, 1e-5),
          C({f({70, 130}), f({70, 90})}, A{{"transpose_a", I(1)}}, 1e-5),
          C({f({130, 70}), f({90, 70})}, A{{"transpose_b", I(1)}}, 1e-5),
          C({f({37, 150}), f({133, 37})}, A{{"transpose_a", I(1)}, {"transpose_b", I(1)}}, 1e-5),
          C({f({2, 3, 17, 33}), f({33, 9})}, {}, 1e-5),  // b broadcast over the batch
          C({f({3, 1, 17, 33}), f({4, 9, 33})}, A{{"transpose_b", I(1)}}, 1e-5),
          C({f({4, 0}), f({0, 3})}, {}, 0.0),  // K = 0: zeros
          C({f({3, 50, 20}), f({20, 30})}, {}, 1e-5),
          needs("matmul.epilogue", C({f({3, 50, 20}), f({20, 30}), f({30})}, A{{"activation", S("gelu")}}, 1e-5)),
          needs("matmul.epilogue",
                C({f({2, 20, 7}), f({30, 7}), f({30})}, A{{"transpose_b", I(1)}, {"activation", S("relu")}}, 1e-5)),
          // x of gelu_grad, times the product: the MLP's backward (many tasks), a small-M product
          needs("matmul.epilogue", no_grad(C({f({3, 50, 20}), f({90, 20}), f({3, 50, 90})},
                                             A{{"transpose_b", I(1)}, {"activation", S("gelu_grad")}}, 2e-5),
                                           "a backward op")),
          needs("matmul.epilogue",
                no_grad(C({f({3, 20}), f({20, 30}), f({3, 30})}, A{{"activation", S("gelu_grad")}}, 2e-5), "a backward op")),
          // x (a stored gelu') times the product: the same two paths
          needs("matmul.epilogue", no_grad(C({f({3, 50, 20}), f({90, 20}), f({3, 50, 90})},
                                             A{{"transpose_b", I(1)}, {"activation", S("mul")}}, 2e-5),
                                           "a backward op")),
          needs("matmul.epilogue",
                no_grad(C({f({3, 20}), f({20, 30}), f({3, 30})}, A{{"activation", S("mul")}}, 2e-5), "a backward op")),
          // a residual added last: alone, after a bias and gelu (many tasks), a small-M product
          needs("matmul.residual", no_grad(C({f({3, 50, 20}), f({20, 30}), f({3, 50, 30})}, A{{"residual", I(1)}}, 1e-5),
                                           "written by a pass after autograd")),
          needs("matmul.residual", no_grad(C({f({3, 50, 20}), f({20, 30}), f({30}), f({3, 50, 30})},
                                             A{{"activation", S("gelu")}, {"residual", I(1)}}, 1e-5),
                                           "written by a pass after autograd")),
          needs("matmul.residual", no_grad(C({f({2, 20}), f({40, 20}), f({2, 40})}, A{{"transpose_b", I(1)}, {"residual", I(1)}}, 1e-5),
                                           "written by a pass after autograd")),
          // operands and result through perms (a head split and merge), a broadcast batch
          needs("matmul.layout", no_grad(C({f({2, 20, 3, 8}), f({2, 20, 3, 8})},
                                           A{{"a_perm", V({0, 2, 1, 3})}, {"b_perm", V({0, 2, 1, 3})}, {"transpose_b", I(1)}}, 1e-5),
                                         "written after autograd")),
          needs("matmul.layout", no_grad(C({f({2, 3, 20, 20}), f({2, 20, 3, 8})},
                                           A{{"b_perm", V({0, 2, 1, 3})}, {"out_perm", V({0, 2, 1, 3})}}, 1e-5),
                                         "written after autograd")),
          needs("matmul.layout", no_grad(C({f({8, 30, 2}), f({1, 30, 5})}, A{{"a_perm", V({2, 1, 0})}, {"transpose_a", I(1)}}, 1e-5),
                                         "written after autograd")),
          C({f({300, 37}), f({37, 333})}, {}, 1e-5),  // many tiles, ragged edges, a k tail
          C({f({16, 64, 40}), f({16, 40, 50})}, {}, 1e-5),
          // a weight packed when the plan was made: in the AVX-512 tile's layout (read in place
          // there), AVX2's, a decode-sized product and perms (unpacked first), a bias and GELU
          needs("matmul.packed_b", no_grad(C({f({2, 50, 70}), f({70, 64}), f({64})}, A{{"b_packed", V({32, 32})}, {"activation", S("gelu")}}, 1e-5),
                                           "written by a pass for inference")),
          needs("matmul.packed_b", no_grad(C({f({40, 37}), f({37, 48})}, A{{"b_packed", V({16, 16})}}, 1e-5), "written by a pass for inference")),
          needs("matmul.packed_b", no_grad(C({f({3, 37}), f({37, 64})}, A{{"b_packed", V({192, 32})}}, 1e-5), "written by a pass for inference")),
          needs("matmul.packed_b", no_grad(C({f({20, 3, 8}), f({8, 32})}, A{{"b_packed", V({5, 32})}, {"a_perm", V({1, 0, 2})}}, 1e-5),
                                           "written by a pass for inference")),
      };

    case Op::Add:
    case Op::Sub:
    case Op::Mul: return join(binary(1e-7), integer(2, 1 << 20));
    case Op::Div: return join(binary(1e-7, true), integer(2, 5));  // 0 divisors: x / 0 = 0
    case Op::Pow: return join({C({pos({3, 4, 5}), f({4, 1})}, {}, 1e-6), C({pos({1000}), f({1000})}, {}, 1e-6)}, integer(2, 40));
    case Op::BitwiseAnd: return integer(2, 1 << 20);

    case Op::Neg: return join(unary(0.0), integer(1, 1 << 20));
    case Op::Abs:
    case Op::Sign:
    case Op::Relu: return join(unary(0.0, false, true), integer(1, 1 << 20));
    case Op::Exp:
    case Op::Tanh:
    case Op::Silu:
    case Op::Sigmoid:
    case Op::Erf: return unary(1e-6);
    case Op::Log:
    case Op::Sqrt: return unary(1e-6, true);

    case Op::Gelu:
      return {C({f({3, 40000})}, {}, 1e-6), C({f({3, 1000})}, A{{"approximate", S("tanh")}}, 1e-6)};
    case Op::Clip:
      return {C({distinct({4, 25})}, A{{"min", F(-0.5)}, {"max", F(0.5)}}, 0.0),
              C({distinct({4, 25})}, A{{"min", F(1.0)}, {"max", F(-1.0)}}, 0.0),  // numpy order: max wins
              C({distinct({4, 25})}, A{{"max", F(0.25)}}, 0.0)};
    case Op::LeakyRelu: return {C({distinct({4, 25})}, A{{"alpha", F(0.1)}}, 0.0), C({distinct({100})}, {}, 0.0)};
    case Op::Cast:
      return {C({f({4, 25})}, A{{"to", S("f32")}}, 0.0), C({f({4, 25})}, A{{"to", S("i32")}}, 0.0),
              C({f({4, 25})}, A{{"to", S("i64")}}, 0.0), C({i64({30}, 1000)}, A{{"to", S("i32")}}, 0.0),
              C({i32({30}, 1000)}, A{{"to", S("f32")}}, 0.0)};

    case Op::Softmax:
      return {
          C({f({7, 33})}, A{{"axis", I(-1)}}, 1e-6),
          C({f({7, 33})}, A{{"axis", I(0)}}, 1e-6),
          C({f({3, 700})}, {}, 1e-6),  // rows longer than a CUDA block
          C({f({2, 40, 40})}, A{{"scale", F(0.3)}, {"causal_offset", I(0)}}, 1e-6),
          C({f({3, 17, 20})}, A{{"scale", F(0.7)}, {"causal_offset", I(3)}}, 1e-6),
          no_grad(C({f({3, 17, 20})}, A{{"causal_offset", I(-2)}}, 1e-6), "rows that keep nothing are nan"),
          no_grad(C({f({2, 3, 10}), value(DType::i32, {}, 4)}, A{{"causal_offset", I(0)}, {"scale", F(0.5)}}, 1e-6),
                  "the position form has no gradient"),
      };
    case Op::LogSoftmax: return {C({f({3, 4, 65})}, A{{"axis", I(2)}}, 1e-6), C({f({5, 7})}, A{{"axis", I(0)}}, 1e-6)};

    case Op::Attention: return attention_cases();
    case Op::CacheAttention: return cache_attention_cases();
    case Op::Rope:
      return {
          C({f({2, 3, 7, 16}), cos_table(10, 8), sin_table(10, 8)}, {}, 1e-6),
          C({f({5, 6}), cos_table(5, 3), sin_table(5, 3)}, {}, 1e-6),
          C({f({1, 2, 1, 32}), cos_table(64, 16), sin_table(64, 16), value(DType::i32, {}, 63)}, {}, 1e-6),
          C({f({2, 2, 4, 8}), cos_table(9, 4), sin_table(9, 4), value(DType::i32, {}, 3)}, {}, 1e-6),
      };

    // The CPU's steps are its unary kernels' (within 3 ulp of the reference's each; the fusion
    // tests hold them to the unfused chain's bits).
    case Op::FusedElementwise:
      return {
          C({f({3, 5, 700}), f({700}), f({})}, A{{"program", S("add x0 x1; mul t0 x2; erf t1; sub t2 x0")}}, 1e-6),
          C({f({3, 1, 7}), f({5, 1}), f({3, 5, 7})},
            A{{"program", S("sub x0 x1; mul t0 t0; add t1 x2; tanh t2; sigmoid t3; silu x2; div t4 t5")}}, 1e-6),
          C({f({40000}), f({40000})},
            A{{"program", S("abs x0; sqrt t0; log t1; exp t2; neg t3; relu x1; sign t5; pow t0 x1; add t6 t7; add t8 t4")}},
            1e-6),
          // Broadcast inputs read as runs: a column repeated over rows of 40, and rows of 40
          // under a broadcast middle axis.
          C({f({4, 6, 40}), f({6, 1}), f({4, 1, 40})}, A{{"program", S("sub x0 x1; exp t0; mul t1 x2; tanh t2")}}, 1e-6),
      };

    case Op::LayerNorm:
      return {C({f({5, 33, 24}), f({24}), f({24})}, A{{"eps", F(1e-5)}}, 2e-6), C({f({70, 16}), f({16})}, {}, 2e-6),
              C({f({9, 130}), f({130}), f({130})}, {}, 2e-6), C({f({2, 3, 300}), f({300})}, A{{"eps", F(1e-3)}}, 2e-6)};
    case Op::RmsNorm: return {C({f({70, 16}), f({16})}, {}, 2e-6), C({f({9, 131}), f({131})}, {}, 2e-6)};

    case Op::Embedding: return {C({f({11, 16}), i32({2, 5}, 11)}), C({f({11, 16}), i64({7}, 11)})};
    case Op::Reshape:
      return {C({f({2, 3, 4})}, A{{"shape", V({6, 4})}}), C({i64({2, 3, 4}, 99)}, A{{"shape", V({-1, 2})}})};
    case Op::Transpose:
      return {C({f({2, 3, 4, 5})}, A{{"perm", V({0, 2, 1, 3})}}), C({f({2, 3, 4})}, A{{"perm", V({2, 0, 1})}}),
              C({i64({3, 4}, 99)}, A{{"perm", V({1, 0})}}),
              // a head split: rows of the last axis over several tasks (the CPU walks them by odometer)
              C({f({3, 50, 4, 8})}, A{{"perm", V({0, 2, 1, 3})}}), C({f({7, 3, 20, 5})}, A{{"perm", V({2, 1, 0, 3})}})};
    case Op::Slice:
      return {C({f({4, 10, 3})}, A{{"axis", I(1)}, {"start", I(2)}, {"end", I(7)}}),
              C({f({4, 10})}, A{{"axis", I(-1)}, {"start", I(-3)}, {"end", I(10)}}),
              C({i32({6, 2}, 99)}, A{{"axis", I(0)}, {"start", I(1)}, {"end", I(100)}}),
              // many tasks, cut inside rows (the CPU's are fixed byte ranges of the output)
              C({f({6, 50, 384})}, A{{"axis", I(2)}, {"start", I(128)}, {"end", I(256)}}),
              C({f({3, 40000})}, A{{"axis", I(0)}, {"start", I(1)}, {"end", I(3)}})};
    case Op::Concat:
      return {C({f({2, 3, 4}), f({2, 1, 4}), f({2, 5, 4})}, A{{"axis", I(1)}}), C({f({2, 3}), f({4, 3})}),
              C({i64({2, 2}, 9), i64({2, 3}, 9)}, A{{"axis", I(-1)}}),
              C({f({6, 50, 128}), f({6, 50, 100}), f({6, 50, 128})}, A{{"axis", I(-1)}}), C({f({1, 30000}), f({2, 30000})})};
    case Op::Gather:
      return {C({f({5, 4}), i64({3}, 5)}), C({f({2, 5, 3}), i32({2, 2}, 5)}, A{{"axis", I(1)}}),
              C({i32({6}, 50), i32({4}, 6)})};
    case Op::Trilu:
      return {C({f({2, 4, 5})}, A{{"k", I(1)}}), C({f({5, 3})}, A{{"upper", I(0)}, {"k", I(-1)}}),
              C({i32({3, 3}, 99)}, A{{"upper", I(0)}})};

    case Op::Conv2d:
      return {C({f({1, 2, 5, 5}), f({3, 2, 3, 3}), f({3})}, A{{"pads", V({1, 1, 1, 1})}}, 1e-6),
              C({f({2, 4, 7, 6}), f({4, 2, 3, 2})}, A{{"strides", V({2, 1})}, {"dilations", V({1, 2})}, {"groups", I(2)}}, 1e-6)};
    case Op::MaxPool:
      return {C({distinct({1, 2, 6, 6})}, A{{"kernel", V({2, 2})}, {"strides", V({2, 2})}}),
              C({distinct({1, 2, 7, 7})}, A{{"kernel", V({3, 3})}, {"strides", V({2, 2})}, {"pads", V({1, 1, 1, 1})}, {"ceil_mode", I(1)}}),
              C({distinct({2, 2, 7, 7})}, A{{"kernel", V({3, 3})}, {"strides", V({2, 2})}, {"pads", V({1, 1, 1, 1})}, {"indices", I(1)}}),
              C({distinct({1, 3, 9})}, A{{"kernel", V({4})}, {"dilations", V({2})}, {"indices", I(1)}})};
    case Op::AvgPool:
      return {C({f({1, 2, 6, 6})}, A{{"kernel", V({3, 3})}, {"pads", V({1, 1, 1, 1})}}, 1e-6),
              C({f({1, 2, 6, 6})}, A{{"kernel", V({3, 3})}, {"pads", V({1, 1, 1, 1})}, {"count_include_pad", I(1)}}, 1e-6),
              C({f({1, 1, 7, 5})}, A{{"kernel", V({2, 2})}, {"strides", V({2, 2})}, {"ceil_mode", I(1)}}, 1e-6)};

    case Op::ReduceSum:
      return {C({f({4, 5, 6})}, A{{"axes", V({0, 1})}, {"keepdims", I(1)}}, 2e-6),
              C({f({4, 5, 300})}, A{{"axes", V({0, 1})}}, 2e-6), C({f({4, 5, 6})}, A{{"axes", V({-1})}, {"keepdims", I(1)}}, 2e-6),
              C({f({3, 1000})}, A{{"axes", V({1})}}, 5e-5),  // the CPU's float sum of 1000 terms
              C({f({4, 5, 6})}, A{{"axes", V({0, 2})}}, 2e-6),
              // training's shapes: a layer norm gain's gradient (columns over every row), a middle
              // band, long rows; past one block's lanes and strips, ragged ends
              // (the CPU sums columns in f32: 6000 terms of N(0, 4) cost it up to ~1e-3)
              C({f({2, 3000, 70})}, A{{"axes", V({0, 1})}}, 2e-3), C({f({3, 500, 40})}, A{{"axes", V({1})}}, 2e-4),
              C({f({2, 7001})}, A{{"axes", V({-1})}}, 2e-4)};
    case Op::ReduceMean:
      return {C({f({5, 300})}, A{{"axes", V({1})}}, 2e-6), C({f({4, 5, 6})}, A{{"axes", V({0, 2})}, {"keepdims", I(1)}}, 2e-6),
              C({f({2, 3, 4})}, A{{"axes", V({0})}}, 2e-6)};
    case Op::ReduceMax:
      return {C({distinct({5, 4, 3})}, A{{"axes", V({0, 2})}}), C({distinct({6, 7})}, A{{"axes", V({-1})}, {"keepdims", I(1)}}),
              C({distinct({2, 3, 4})}, A{{"axes", V({1})}}), C({distinct({3, 300, 40})}, A{{"axes", V({0, 1})}})};

    case Op::Where:
      return {C({i32({2, 3}, 2), f({2, 3}), f({3})}), C({f({4, 1}), f({1, 5}), f({4, 5})}),
              C({i64({3}, 2), i32({2, 3}, 9), i32({3}, 9)})};
    case Op::CausalMask:
      return {C({f({2, 6, 9})}, A{{"offset", I(1)}, {"value", F(-5.0)}}),
              no_grad(C({f({3, 5, 5})}), "masked entries are -inf, so is the loss")};
    case Op::CrossEntropy:
      return {C({f({6, 65}), i32({6}, 65)}, {}, 1e-6), C({f({2, 30, 65}), i64({2, 30}, 65)}, A{{"ignore_index", I(3)}}, 1e-6),
              C({f({6, 50, 65}), i32({6, 50}, 65)}, {}, 2e-6)};
    case Op::Mse: return {C({f({4, 5}), f({4, 5})}, {}, 1e-6), C({f({1000}), f({1000})}, {}, 1e-6)};
    case Op::Broadcast:
      return {C({f({3, 1, 4})}, A{{"shape", V({2, 3, 5, 4})}}), C({i64({1}, 9)}, A{{"shape", V({4, 3})}})};
    case Op::Pad:
      return {C({f({2, 3, 4})}, A{{"axis", I(1)}, {"before", I(2)}, {"after", I(1)}}),
              C({f({5})}, A{{"axis", I(-1)}, {"before", I(0)}, {"after", I(3)}}),
              C({f({6, 50, 128})}, A{{"axis", I(2)}, {"before", I(128)}, {"after", I(128)}}),
              C({f({2, 30000})}, A{{"axis", I(0)}, {"before", I(1)}, {"after", I(0)}})};
    case Op::Equal: return {C({i32({4, 5}, 3), i32({5}, 3)}), C({distinct({4, 5}), distinct({4, 5})})};

    case Op::ReluGrad: return {C({distinct({1000}), f({1000})})};
    case Op::Swiglu: return {C({f({3, 5, 48})}, {}, 2e-6), C({f({7, 2})}, {}, 2e-6), C({f({2, 70})}, {}, 2e-6)};
    case Op::SwigluGrad: return {C({f({4, 40}), f({4, 20})}, {}, 5e-6), C({f({3, 2, 66}), f({3, 2, 33})}, {}, 5e-6)};
    case Op::SiluGrad: return {C({f({50000}), f({50000})}, {}, 5e-6), C({f({3, 33}), f({3, 33})}, {}, 5e-6)};
    case Op::GeluGrad:
      return {C({f({50000}), f({50000})}, {}, 5e-6), C({f({999}), f({999})}, A{{"approximate", S("tanh")}}, 5e-6)};
    case Op::SoftmaxGrad:
      // The CPU's last-axis kernel sums dy * y in f32: over N(0, 2) entries the dot cancels.
      return {C({f({7, 33}), f({7, 33})}, A{{"axis", I(-1)}, {"scale", F(0.5)}}, 1e-4),
              C({f({3, 700}), f({3, 700})}, {}, 1e-4), C({f({7, 33}), f({7, 33})}, A{{"axis", I(0)}}, 2e-6),
              C({f({4, 5, 6}), f({4, 5, 6})}, A{{"axis", I(1)}}, 2e-6)};
    case Op::AttentionGrad:  // the CPU's f32 GEMMs against the reference's double sums
      return {C({f({2, 3, 40, 16}), f({2, 3, 40, 16}), f({2, 3, 40, 16}), f({2, 3, 40, 16})},
                {{"scale", F(0.25)}, {"causal_offset", I(0)}}, 5e-5),
              C({f({3, 33, 8}), f({3, 33, 8}), f({3, 33, 8}), f({3, 33, 8})}, A{{"causal_offset", I(5)}}, 5e-5),
              C({f({2, 20, 5}), f({2, 20, 5}), f({2, 20, 5}), f({2, 20, 5})}, A{{"scale", F(0.7)}}, 5e-5),
              C({f({1, 1, 4}), f({1, 1, 4}), f({1, 1, 4}), f({1, 1, 4})}, A{{"causal_offset", I(0)}}, 5e-5),
              // grouped queries: dk and dv per query head
              C({f({2, 4, 24, 8}), f({2, 2, 24, 8}), f({2, 2, 24, 8}), f({2, 4, 24, 8})}, A{{"causal_offset", I(0)}}, 5e-5),
              C({f({3, 9, 8}), f({1, 9, 8}), f({1, 9, 8}), f({3, 9, 8})}, A{{"scale", F(0.5)}}, 5e-5),
              // packed_heads: dq, dk, dv written into the thirds their heads were read from
              C({f({2, 40, 96}), f({2, 40, 96}), f({2, 40, 96}), f({2, 40, 32})},
                A{{"scale", F(0.25)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 5e-5),
              C({f({3, 20, 45}), f({3, 20, 45}), f({3, 20, 45}), f({3, 20, 15})}, A{{"packed_heads", I(3)}}, 5e-5),
              // a head width of 64, plain and packed (the GPU-sized GPT's form), two row blocks
              C({f({2, 2, 45, 64}), f({2, 2, 45, 64}), f({2, 2, 45, 64}), f({2, 2, 45, 64})},
                A{{"scale", F(0.125)}, {"causal_offset", I(0)}}, 5e-5),
              C({f({2, 40, 384}), f({2, 40, 384}), f({2, 40, 384}), f({2, 40, 128})},
                A{{"scale", F(0.125)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 5e-5),
              // shapes the run-to-run level runs on CUDA's tensor cores (cuda.attention_tf32x3): causal
              // over two row blocks, unmasked, packed
              C({f({1, 2, 128, 64}), f({1, 2, 128, 64}), f({1, 2, 128, 64}), f({1, 2, 128, 64})},
                A{{"scale", F(0.125)}, {"causal_offset", I(0)}}, 5e-5),
              C({f({1, 2, 64, 64}), f({1, 2, 64, 64}), f({1, 2, 64, 64}), f({1, 2, 64, 64})}, A{{"scale", F(0.125)}}, 5e-5),
              C({f({2, 128, 384}), f({2, 128, 384}), f({2, 128, 384}), f({2, 128, 128})},
                A{{"scale", F(0.125)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 5e-5),
              // few rows (CUDA's per-row kernels)
              C({f({2, 5, 24}), f({2, 5, 24}), f({2, 5, 24}), f({2, 5, 8})}, A{{"causal_offset", I(0)}, {"packed_heads", I(2)}},
                5e-5),
              // stored probabilities (any values: the masked ones are not zeros here, and the rows
              // sum to about 50, not 1, so the softmax gradient's sums round more), plain, packed
              // and grouped
              needs("attention.stored_probs", C({f({2, 3, 40, 16}), f({2, 3, 40, 16}), f({2, 3, 40, 16}), f({2, 3, 40, 16}),
                                                 pos({2, 3, 40, 40})},
                                                {{"scale", F(0.25)}, {"causal_offset", I(0)}}, 3e-4)),
              needs("attention.stored_probs", C({f({2, 40, 96}), f({2, 40, 96}), f({2, 40, 96}), f({2, 40, 32}),
                                                 pos({2, 2, 40, 40})},
                                                A{{"scale", F(0.25)}, {"causal_offset", I(0)}, {"packed_heads", I(2)}}, 3e-4)),
              needs("attention.stored_probs", C({f({2, 4, 24, 8}), f({2, 2, 24, 8}), f({2, 2, 24, 8}), f({2, 4, 24, 8}),
                                                 pos({2, 4, 24, 24})},
                                                A{{"scale", F(0.5)}}, 3e-4))};
    case Op::LayerNormGrad:
      return {C({f({70, 16}), f({16}), f({70, 16})}, {}, 2e-6), C({f({9, 130}), f({130}), f({9, 130})}, {}, 2e-6),
              C({f({2, 3, 300}), f({300}), f({2, 3, 300})}, A{{"eps", F(1e-3)}}, 2e-6)};
    case Op::RmsNormGrad:
      return {C({f({3, 40, 8}), f({8}), f({3, 40, 8})}, {}, 2e-6), C({f({5, 129}), f({129}), f({5, 129})}, {}, 2e-6)};
    case Op::GeluAndGrad:  // whole vectors and a ragged end
      return {no_grad(C({f({3, 40000})}, {}, 5e-6), "written by a pass after autograd"),
              no_grad(C({f({2, 999})}, {}, 5e-6), "written by a pass after autograd")};
    case Op::NormParamGrad:  // sums over the rows: the CPU's in f32, in order
      return {no_grad(C({f({6, 50, 40}), f({6, 50, 40})}, {}, 1e-4), "a backward op"),
              no_grad(C({f({300, 130}), f({300, 130})}, A{{"eps", F(1e-3)}}, 2e-4), "a backward op"),
              no_grad(C({f({4, 8, 70}), f({4, 8, 70})}, A{{"center", I(0)}}, 1e-4), "a backward op")};
    case Op::EmbeddingGrad:
      return {C({i32({2, 50}, 11), f({2, 50, 16})}, A{{"rows", I(11)}}, 1e-6),
              C({i64({600}, 9), f({600, 300})}, A{{"rows", I(9)}}, 1e-6),  // runs of ids, D > a CUDA block
              C({i32({3, 1100}, 7), f({3, 1100, 20})}, A{{"rows", I(7)}}, 1e-6)};  // several of CUDA's id windows
    case Op::CrossEntropyGrad:
      return {C({f({6, 65}), i32({6}, 65), value(DType::f32, {}, 0.75)}, {}, 2e-6),
              C({f({2, 30, 700}), i64({2, 30}, 700), value(DType::f32, {}, 0.75)}, A{{"ignore_index", I(3)}}, 2e-6)};
    case Op::GatherGrad:
      return {C({i64({7}, 5), f({7, 4})}, A{{"shape", V({5, 4})}}, 1e-6),
              C({i32({2, 2}, 5), f({2, 2, 2, 3})}, A{{"axis", I(1)}, {"shape", V({2, 5, 3})}}, 1e-6)};
    case Op::Conv2dGradInput:
      return {C({f({3, 2, 3, 3}), f({1, 3, 5, 5})}, A{{"pads", V({1, 1, 1, 1})}, {"shape", V({1, 2, 5, 5})}}, 1e-6),
              C({f({4, 2, 3, 2}), f({2, 4, 3, 4})},
                A{{"strides", V({2, 1})}, {"dilations", V({1, 2})}, {"groups", I(2)}, {"shape", V({2, 4, 7, 6})}}, 1e-6)};
    case Op::Conv2dGradWeight:
      return {C({f({1, 2, 5, 5}), f({1, 3, 5, 5})}, A{{"pads", V({1, 1, 1, 1})}, {"shape", V({3, 2, 3, 3})}}, 1e-6),
              C({f({2, 4, 7, 6}), f({2, 4, 3, 4})},
                A{{"strides", V({2, 1})}, {"dilations", V({1, 2})}, {"groups", I(2)}, {"shape", V({4, 2, 3, 2})}}, 1e-6)};
    case Op::MaxPoolGrad:
      return {C({distinct({1, 2, 6, 6}), f({1, 2, 3, 3})}, A{{"kernel", V({2, 2})}, {"strides", V({2, 2})}}, 1e-6)};
    case Op::AvgPoolGrad:
      return {C({f({1, 2, 6, 6})}, A{{"kernel", V({3, 3})}, {"pads", V({1, 1, 1, 1})}, {"shape", V({1, 2, 6, 6})}}, 1e-6)};

    case Op::GradNorm: {  // past several chunks of the CUDA squares tree, ragged ends; more gradients than a CUDA batch
      std::vector<CaseInput> many;
      for (int i = 0; i < 70; ++i) many.push_back(f({i % 5 == 0 ? 9000 : 3 + i}));
      return {C({f({100003}), f({17}), f({16384})}, {}, 1e-6), C({f({3, 7})}, {}, 1e-6), C({f({})}, {}, 1e-6), C(many, {}, 1e-6)};
    }
    case Op::OptimizerUpdate: {
      auto scalars = [](double norm) {
        return std::vector<CaseInput>{value(DType::f64, {}, norm), value(DType::f64, {}, 1e-2), value(DType::i64, {}, 3)};
      };
      auto in = [&](double norm, int slots, bool v_slot, int64_t n = 1000) {
        std::vector<CaseInput> v = {f({n}), f({n})};
        for (const CaseInput& s : scalars(norm)) v.push_back(s);
        for (int i = 0; i < slots; ++i) v.push_back(i == 1 && v_slot ? pos({n}) : f({n}));
        return v;
      };
      return {
          C(in(2.0, 2, true, 100003), A{{"kind", S("adam")}, {"beta1", F(0.9)}, {"beta2", F(0.99)}, {"eps", F(1e-8)}, {"clip", F(1.0)}}, 1e-6),
          C(in(0.5, 2, true),
            A{{"kind", S("adamw")}, {"beta1", F(0.9)}, {"beta2", F(0.999)}, {"eps", F(1e-8)}, {"weight_decay", F(0.1)}}, 1e-6),
          C(in(0.5, 1, false), A{{"kind", S("sgd")}, {"momentum", F(0.9)}, {"weight_decay", F(0.01)}}, 1e-6),
          C(in(3.0, 0, false), A{{"kind", S("sgd")}, {"clip", F(1.0)}}, 1e-6),
      };
    }
    case Op::Increment: return {C({value(DType::i64, {}, 41)}), C({value(DType::i64, {}, 7), value(DType::f32, {}, 0)})};
    case Op::CacheWrite:
      return {C({f({2, 8, 4}), f({2, 3, 4}), value(DType::i32, {}, 2)}),
              C({f({1, 2, 6, 8}), f({1, 2, 1, 8}), value(DType::i32, {}, 5)}),
              // columns: a key cache stored transposed ([.., D, S]), a prompt's keys then a decode step's
              needs("attention.keys_transposed", C({f({2, 4, 8}), f({2, 3, 4}), value(DType::i32, {}, 5)}, A{{"transposed", I(1)}})),
              needs("attention.keys_transposed", C({f({1, 2, 8, 6}), f({1, 2, 1, 8}), value(DType::i32, {}, 4)}, A{{"transposed", I(1)}}))};

    case Op::Less:
    case Op::LessEqual: return {C({i32({4, 5}, 3), i32({5}, 3)}), C({distinct({4, 5}), distinct({5})}), C({i64({3, 1}, 4), i64({4}, 4)})};
    case Op::GatherElements:
      return {C({f({3, 4}), i64({3, 4}, 3)}), C({f({2, 5, 3}), i32({2, 2, 3}, 5)}, A{{"axis", I(1)}}),
              C({i64({4, 6}, 50), i64({4, 2}, 6)}, A{{"axis", I(-1)}})};
    case Op::GatherNd:
      return {C({f({4, 5, 3}), i64({2, 2}, 4)}), C({f({2, 4, 3}), i64({2, 3, 1}, 4)}, A{{"batch_dims", I(1)}}),
              C({i32({3, 3}, 9), i32({5, 2}, 3)})};
    case Op::ScatterNd:
      return {C({f({5, 3}), i64({2, 1}, 5), f({2, 3})}), C({f({4, 4}), i32({3, 2}, 4), f({3})}),
              C({f({4, 4}), i32({3, 1}, 4), f({3, 4})}, A{{"reduction", S("add")}}, 1e-6),
              C({i64({6}, 9), i64({4, 1}, 6), i64({4}, 9)})};
    case Op::Cumsum:
      return {C({f({4, 7})}, A{{"axis", I(1)}}, 1e-6), C({f({3, 5, 2})}, A{{"exclusive", I(1)}, {"reverse", I(1)}}, 1e-6),
              C({f({2, 300})}, A{{"axis", I(-1)}, {"reverse", I(1)}}, 1e-6), C({i64({6}, 9)}), C({i32({2, 5}, 9)}, A{{"axis", I(1)}, {"exclusive", I(1)}})};
    case Op::TopK:
      return {C({distinct({4, 9})}, A{{"k", I(3)}}), C({distinct({5, 3, 2})}, A{{"k", I(2)}, {"axis", I(0)}, {"largest", I(0)}}),
              C({i32({2, 7}, 3)}, A{{"k", I(4)}}), C({distinct({6})}, A{{"k", I(4)}, {"sorted", I(0)}})};
    case Op::ArgMax:
      return {C({distinct({4, 9})}, A{{"axis", I(1)}}), C({i32({6, 5}, 3)}, A{{"keepdims", I(0)}, {"select_last_index", I(1)}}),
              C({distinct({3, 4})}, A{{"largest", I(0)}}), C({i64({3, 8}, 2)}, A{{"axis", I(-1)}, {"largest", I(0)}})};
  }
  return {};
}

std::string attr_to_string(const ir::AttrValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *d);
    return buf;
  }
  if (const auto* s = std::get_if<std::string>(&v)) return "\"" + *s + "\"";
  return shape_to_string(std::get<Ints>(v));
}

}  // namespace

std::string OpCase::label() const {
  std::string s = ir::op_name(op);
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? ", " : " ") + inputs[i].type.to_string();
  if (!attrs.items().empty()) {
    s += " {";
    bool first = true;
    for (const auto& [k, v] : attrs.items()) {
      s += (first ? "" : ", ") + k + "=" + attr_to_string(v);
      first = false;
    }
    s += "}";
  }
  return s;
}

std::vector<OpCase> op_cases(ir::Op op) {
  std::vector<OpCase> cases = cases_of(op);
  for (OpCase& c : cases) c.op = op;
  return cases;
}

std::vector<Tensor> make_inputs(const OpCase& c, uint64_t seed, bool specials, float std) {
  static const float kSpecials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 2.0f, -3.0f, 0.5f, 1.0f,
                                    -1.0f, 88.0f, -104.0f};
  std::vector<Tensor> in;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const CaseInput& ci = c.inputs[i];
    Tensor t = Tensor::zeros(ci.type.dtype, ci.type.shape);
    const int64_t n = t.numel();
    auto set = [&](int64_t k, double v) {
      switch (t.dtype()) {
        case DType::f32: t.data<float>()[k] = static_cast<float>(v); break;
        case DType::f64: t.data<double>()[k] = v; break;
        case DType::i32: t.data<int32_t>()[k] = static_cast<int32_t>(v); break;
        case DType::i64: t.data<int64_t>()[k] = static_cast<int64_t>(v); break;
        default: break;
      }
    };
    if (is_random_float(ci.fill) && specials) {
      for (int64_t k = 0; k < n; ++k) set(k, kSpecials[static_cast<size_t>(k + 5 * static_cast<int64_t>(i)) % std::size(kSpecials)]);
    } else if (ci.fill == Fill::Normal || ci.fill == Fill::Positive) {
      fill_normal(t, seed, i, 0.0f, ci.fill == Fill::Normal ? std : 1.0f);
      if (ci.fill == Fill::Positive)
        for (int64_t k = 0; k < n; ++k) t.data<float>()[k] = std::fabs(t.data<float>()[k]) + 0.5f;
    } else if (ci.fill == Fill::Distinct) {
      // (j + 1/2) * spacing: every pair of values and every kink (0, +-0.5) stay farther apart
      // than the finite-difference step (0.01); the permutation comes from the seed.
      const double spacing = n <= 40 ? 0.1 : 0.025;
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      Tensor keys = Tensor::zeros(DType::f32, {n});
      fill_uniform(keys, seed, i, 0.0f, 1.0f);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return keys.data<float>()[a] < keys.data<float>()[b]; });
      for (int64_t k = 0; k < n; ++k)
        set(order[static_cast<size_t>(k)], (static_cast<double>(k) - static_cast<double>(n / 2) + 0.5) * spacing);
    } else if (ci.fill == Fill::Ids) {
      fill_uniform_int(t, seed, i, 0, static_cast<int64_t>(ci.value));
    } else if (ci.fill == Fill::Mask) {
      Tensor draw = Tensor::zeros(DType::i32, ci.type.shape);
      fill_uniform_int(draw, seed, i, 0, 4);
      const int64_t row = ci.type.shape.empty() ? 1 : ci.type.shape.back();
      for (int64_t k = 0; k < n; ++k) {
        const int32_t v = draw.data<int32_t>()[k];
        t.data<float>()[k] = k < row || v == 0 ? -std::numeric_limits<float>::infinity() : v == 1 ? -1.5f : 0.0f;
      }
    } else if (ci.fill == Fill::Rotary) {
      t = rope_table(ci.type.shape[0], 2 * ci.type.shape[1], 10000.0, ci.value != 0);
    } else {
      for (int64_t k = 0; k < n; ++k) set(k, ci.value);
    }
    in.push_back(std::move(t));
  }
  return in;
}

}  // namespace volta::test
