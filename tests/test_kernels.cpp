// Reference CPU kernels against hand-computed values (closed forms written out in the test,
// never re-derived with the kernel's own algorithm).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "test_util.h"
#include "volta/ir.h"
#include "volta/tensor.h"

namespace volta {
namespace {

using ir::Op;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ir::Node make(Op op, DType dtype, Shape shape, ir::Attrs attrs = {}, std::string name = "t") {
  ir::Node n;
  n.op = op;
  n.name = std::move(name);
  n.attrs = std::move(attrs);
  n.type = TensorType{dtype, std::move(shape)};
  return n;
}
ir::Node make(Op op, Shape shape, ir::Attrs attrs = {}, std::string name = "t") {
  return make(op, DType::f32, std::move(shape), std::move(attrs), std::move(name));
}

int64_t I(int64_t v) { return v; }  // an unambiguous integer attribute value

Tensor run(const ir::Node& n, std::vector<Tensor> in) {
  Result<Tensor> r = cpu::evaluate_reference(n, in);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : Tensor{};
}

Status run_status(const ir::Node& n, std::vector<Tensor> in) {
  Result<Tensor> r = cpu::evaluate_reference(n, in);
  return r.status();
}

// Relative-ish tolerance: ~16 f32 ulps of the expected value plus a tiny absolute floor.
void expect_f32(const Tensor& t, const Shape& shape, const std::vector<double>& want, double rel = 1e-6) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.dtype(), DType::f32);
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size());
  const float* got = t.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": got " << got[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(static_cast<double>(got[i]), want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-7) << "at " << i;
    }
  }
}

Tensor f32(Shape s, std::initializer_list<float> v) { return Tensor::from_f32(std::move(s), v); }
Tensor scalar(float v) { return Tensor::from_f32({}, {v}); }

// ---- Elementwise binary ---------------------------------------------------------------------

TEST(KernelElementwise, AddSameShape) {
  Tensor out = run(make(Op::Add, {2, 2}), {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2}, {10, 20, 30, 40})});
  expect_f32(out, {2, 2}, {11, 22, 33, 44});
}

TEST(KernelElementwise, AddRowVectorToMatrix) {
  Tensor out = run(make(Op::Add, {2, 3}), {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})});
  expect_f32(out, {2, 3}, {11, 22, 33, 14, 25, 36});
  // Operand order swapped: the vector is the left operand.
  out = run(make(Op::Add, {2, 3}), {f32({3}, {10, 20, 30}), f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  expect_f32(out, {2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(KernelElementwise, AddThreeDimsAgainstTwo) {
  // [2,1,3] + [4,1] -> [2,4,3]: out[i,j,k] = a[i,0,k] + b[j,0].
  Tensor out = run(make(Op::Add, {2, 4, 3}), {f32({2, 1, 3}, {1, 2, 3, 4, 5, 6}), f32({4, 1}, {10, 20, 30, 40})});
  expect_f32(out, {2, 4, 3},
             {11, 12, 13, 21, 22, 23, 31, 32, 33, 41, 42, 43,  //
              14, 15, 16, 24, 25, 26, 34, 35, 36, 44, 45, 46});
}

TEST(KernelElementwise, SubColumnMinusRow) {
  Tensor out = run(make(Op::Sub, {2, 3}), {f32({2, 1}, {1, 2}), f32({1, 3}, {10, 20, 30})});
  expect_f32(out, {2, 3}, {-9, -19, -29, -8, -18, -28});
}

TEST(KernelElementwise, ScalarOperands) {
  expect_f32(run(make(Op::Mul, {3}), {f32({3}, {1, 2, 3}), scalar(2.5f)}), {3}, {2.5, 5, 7.5});
  expect_f32(run(make(Op::Sub, {3}), {scalar(1), f32({3}, {1, 2, 3})}), {3}, {0, -1, -2});
  expect_f32(run(make(Op::Div, {}), {scalar(1), scalar(4)}), {}, {0.25});
  expect_f32(run(make(Op::Add, {}), {scalar(1.5f), scalar(-0.25f)}), {}, {1.25});
}

TEST(KernelElementwise, DivIeee) {
  Tensor out = run(make(Op::Div, {4}), {f32({4}, {1, -1, 0, 3}), f32({4}, {0, 0, 0, 4})});
  expect_f32(out, {4}, {kInf, -kInf, kNaN, 0.75});
}

TEST(KernelElementwise, SizeOneAndZeroSizeDims) {
  expect_f32(run(make(Op::Mul, {1, 1}), {f32({1, 1}, {3}), f32({1, 1}, {-2})}), {1, 1}, {-6});
  expect_f32(run(make(Op::Add, {1, 3}), {f32({1, 1}, {1}), f32({3}, {1, 2, 3})}), {1, 3}, {2, 3, 4});
  expect_f32(run(make(Op::Add, {0, 3}), {Tensor::zeros(DType::f32, {0, 3}), f32({3}, {1, 2, 3})}), {0, 3}, {});
  expect_f32(run(make(Op::Mul, {2, 0}), {Tensor::zeros(DType::f32, {2, 0}), f32({2, 1}, {1, 2})}), {2, 0}, {});
}

// ---- Elementwise unary ----------------------------------------------------------------------

TEST(KernelElementwise, NegExpLog) {
  Tensor neg = run(make(Op::Neg, {3}), {f32({3}, {1, -2, 0})});
  expect_f32(neg, {3}, {-1, 2, 0});
  EXPECT_TRUE(std::signbit(neg.data<float>()[2]));  // -(+0) = -0
  expect_f32(run(make(Op::Exp, {4}), {f32({4}, {0, 1, -1, 100})}), {4},
             {1, 2.718281828459045, 0.36787944117144233, kInf});
  expect_f32(run(make(Op::Log, {4}), {f32({4}, {1, 0.5, 0, -1})}), {4}, {0, -0.6931471805599453, -kInf, kNaN});
}

TEST(KernelElementwise, SqrtTanhRelu) {
  expect_f32(run(make(Op::Sqrt, {4}), {f32({4}, {4, 2, 0, -1})}), {4}, {2, 1.4142135623730951, 0, kNaN});
  expect_f32(run(make(Op::Tanh, {4}), {f32({4}, {0, 1, -2, 20})}), {4},
             {0, 0.7615941559557649, -0.9640275800758169, 1});
  Tensor relu = run(make(Op::Relu, {4}), {f32({4}, {-1, 0, 2.5f, std::nanf("")})});
  expect_f32(relu, {4}, {0, 0, 2.5, kNaN});
}

TEST(KernelElementwise, SigmoidSilu) {
  expect_f32(run(make(Op::Sigmoid, {5}), {f32({5}, {0, 2, -2, -1000, 1000})}), {5},
             {0.5, 0.8807970779778823, 0.11920292202211755, 0, 1});
  // silu(x) = x * sigmoid(x); sigmoid(1) = e / (1 + e).
  expect_f32(run(make(Op::Silu, {4}), {f32({4}, {0, 1, -1, -1000})}), {4},
             {0, 0.7310585786300049, -0.2689414213699951, 0});
}

// rope by hand: row t of x rotated by table row t (or position + t): x1 c - x2 s, x2 c + x1 s.
TEST(KernelAttention, RopeRotatesEachRowByItsTableRow) {
  const Tensor cos = f32({3, 2}, {1, 1, 0.5f, 0, 0, 1}), sin = f32({3, 2}, {0, 0, 0.5f, 1, 1, 0});
  const Tensor x = f32({2, 4}, {1, 2, 3, 4, 1, 2, 3, 4});
  expect_f32(run(make(Op::Rope, {2, 4}), {x, cos, sin}), {2, 4}, {1, 2, 3, 4, -1, -4, 2, 2});
  // From position 1: rows 1 and 2 of the tables.
  expect_f32(run(make(Op::Rope, {2, 4}), {x, cos, sin, Tensor::from_i32({1}, {1})}), {2, 4}, {-1, -4, 2, 2, -3, 2, 1, 4});
  EXPECT_ERROR_CONTAINS(run_status(make(Op::Rope, {2, 4}), {x, cos, sin, Tensor::from_i32({1}, {2})}),
                        "[rope] position 2 is outside [0, 1] (node 't')");
  // swiglu: silu(gate) * up; its gradient: silu'(gate) dy up, then dy silu(gate).
  const double s1 = 0.7310585786300049;  // sigmoid(1)
  expect_f32(run(make(Op::Swiglu, {1, 2}), {f32({1, 4}, {0, 1, 5, 3})}), {1, 2}, {0, 3 * s1});
  expect_f32(run(make(Op::SwigluGrad, {1, 4}), {f32({1, 4}, {0, 1, 5, 3}), f32({1, 2}, {2, 1})}), {1, 4},
             {0.5 * 2 * 5, s1 * (1 + 1 * (1 - s1)) * 3, 0, s1});
}

TEST(KernelElementwise, GeluErfAndTanh) {
  // 0.5 x (1 + erf(x / sqrt 2)): Phi(1) = 0.8413447460685429.
  expect_f32(run(make(Op::Gelu, {4}), {f32({4}, {0, 1, -1, 2})}), {4},
             {0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416});
  expect_f32(run(make(Op::Gelu, {4}, {{"approximate", std::string("none")}}), {f32({4}, {0, 1, -1, 2})}), {4},
             {0, 0.8413447460685429, -0.15865525393145707, 1.9544997361036416});
  expect_f32(run(make(Op::Gelu, {4}, {{"approximate", std::string("tanh")}}), {f32({4}, {0, 1, -1, 0.5f})}), {4},
             {0, 0.8411919906082768, -0.15880800939172324, 0.34571400982514394});
}

TEST(KernelElementwise, GeluUnknownModeIsAnError) {
  Status s = run_status(make(Op::Gelu, {1}, {{"approximate", std::string("fast")}}, "g"), {f32({1}, {1})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'g'"), std::string::npos) << s.message();
}

TEST(KernelElementwise, UnaryOnScalarAndEmpty) {
  expect_f32(run(make(Op::Exp, {}), {scalar(0)}), {}, {1});
  expect_f32(run(make(Op::Relu, {0}), {Tensor::zeros(DType::f32, {0})}), {0}, {});
}

// ---- Matmul ---------------------------------------------------------------------------------

// [[1,2,3],[4,5,6]] @ [[7,8],[9,10],[11,12]] = [[58,64],[139,154]].
TEST(KernelMatmul, Plain) {
  Tensor out = run(make(Op::Matmul, {2, 2}), {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})});
  expect_f32(out, {2, 2}, {58, 64, 139, 154});
}

TEST(KernelMatmul, Transposed) {
  const Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  const Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  const Tensor bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  expect_f32(run(make(Op::Matmul, {2, 2}, {{"transpose_a", I(1)}}), {at, b}), {2, 2}, {58, 64, 139, 154});
  expect_f32(run(make(Op::Matmul, {2, 2}, {{"transpose_b", I(1)}}), {a, bt}), {2, 2}, {58, 64, 139, 154});
  expect_f32(run(make(Op::Matmul, {2, 2}, {{"transpose_a", I(1)}, {"transpose_b", I(1)}}), {at, bt}), {2, 2},
             {58, 64, 139, 154});
  expect_f32(run(make(Op::Matmul, {2, 2}, {{"transpose_a", I(0)}, {"transpose_b", I(0)}}), {a, b}), {2, 2},
             {58, 64, 139, 154});
  // Non-square transposed operand: a^T stored [3,1], b [3,2] -> [1,2] = [1*7+2*9+3*11, 1*8+2*10+3*12].
  expect_f32(run(make(Op::Matmul, {1, 2}, {{"transpose_a", I(1)}}), {f32({3, 1}, {1, 2, 3}), b}), {1, 2}, {58, 64});
}

TEST(KernelMatmul, Batched) {
  // batch 0: I @ [[5,6],[7,8]]; batch 1: [[1,2],[3,4]] @ ones = [[3,3],[7,7]].
  Tensor out = run(make(Op::Matmul, {2, 2, 2}),
                   {f32({2, 2, 2}, {1, 0, 0, 1, 1, 2, 3, 4}), f32({2, 2, 2}, {5, 6, 7, 8, 1, 1, 1, 1})});
  expect_f32(out, {2, 2, 2}, {5, 6, 7, 8, 3, 3, 7, 7});
}

TEST(KernelMatmul, BroadcastBatch) {
  // a [2,1,1,2], b [3,2,1] -> [2,3,1,1]: out[i,j] = a_i . b_j with a = {1,2},{3,4}; b = {1,0},{0,1},{1,1}.
  Tensor out = run(make(Op::Matmul, {2, 3, 1, 1}), {f32({2, 1, 1, 2}, {1, 2, 3, 4}), f32({3, 2, 1}, {1, 0, 0, 1, 1, 1})});
  expect_f32(out, {2, 3, 1, 1}, {1, 2, 3, 3, 4, 7});
  // A rank-2 operand is shared by every batch: [[1,2],[3,4]] @ I and @ [[0,1],[1,0]].
  out = run(make(Op::Matmul, {2, 2, 2}), {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2, 2}, {1, 0, 0, 1, 0, 1, 1, 0})});
  expect_f32(out, {2, 2, 2}, {1, 2, 3, 4, 2, 1, 4, 3});
  // Broadcast batch together with transpose_b: b stored [1,2,2] = [[1,2],[3,4]] means B = [[1,3],[2,4]].
  out = run(make(Op::Matmul, {2, 1, 2}, {{"transpose_b", I(1)}}),
            {f32({2, 1, 2}, {1, 0, 0, 1}), f32({1, 2, 2}, {1, 2, 3, 4})});
  expect_f32(out, {2, 1, 2}, {1, 3, 2, 4});
}

TEST(KernelMatmul, ZeroSizes) {
  expect_f32(run(make(Op::Matmul, {2, 3}), {Tensor::zeros(DType::f32, {2, 0}), Tensor::zeros(DType::f32, {0, 3})}),
             {2, 3}, {0, 0, 0, 0, 0, 0});
  expect_f32(run(make(Op::Matmul, {0, 2, 2}), {Tensor::zeros(DType::f32, {0, 2, 2}), f32({2, 2}, {1, 2, 3, 4})}),
             {0, 2, 2}, {});
  expect_f32(run(make(Op::Matmul, {1, 1}), {f32({1, 1}, {3}), f32({1, 1}, {-4})}), {1, 1}, {-12});
}

TEST(KernelMatmul, AccumulatesInDouble) {
  // In f32, 1e8 + 1 rounds back to 1e8 and the dot product would be 0; in double it is 1.
  Tensor out = run(make(Op::Matmul, {1, 1}), {f32({1, 3}, {1e8f, 1, -1e8f}), f32({3, 1}, {1, 1, 1})});
  expect_f32(out, {1, 1}, {1});
}

// ---- Softmax / LogSoftmax -------------------------------------------------------------------

// softmax([1,2,3]) = e^k / (e + e^2 + e^3).
TEST(KernelSoftmax, LastAxis) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 0, 0, 0});
  const std::vector<double> want = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219,
                                    1.0 / 3, 1.0 / 3, 1.0 / 3};
  expect_f32(run(make(Op::Softmax, {2, 3}), {x}), {2, 3}, want);
  expect_f32(run(make(Op::Softmax, {2, 3}, {{"axis", I(-1)}}), {x}), {2, 3}, want);
  expect_f32(run(make(Op::Softmax, {2, 3}, {{"axis", I(1)}}), {x}), {2, 3}, want);
}

TEST(KernelSoftmax, AxisZeroAndMiddle) {
  // Columns {1,2} -> {1/(1+e), e/(1+e)} and {3,3} -> {1/2, 1/2}.
  const std::vector<double> want = {0.2689414213699951, 0.5, 0.7310585786300049, 0.5};
  expect_f32(run(make(Op::Softmax, {2, 2}, {{"axis", I(0)}}), {f32({2, 2}, {1, 3, 2, 3})}), {2, 2}, want);
  expect_f32(run(make(Op::Softmax, {1, 2, 2}, {{"axis", I(1)}}), {f32({1, 2, 2}, {1, 3, 2, 3})}), {1, 2, 2}, want);
  expect_f32(run(make(Op::Softmax, {1, 2, 2}, {{"axis", I(-2)}}), {f32({1, 2, 2}, {1, 3, 2, 3})}), {1, 2, 2}, want);
}

TEST(KernelSoftmax, LargeLogitsStayFinite) {
  const Tensor x = f32({2}, {1000, 1001});
  expect_f32(run(make(Op::Softmax, {2}), {x}), {2}, {0.2689414213699951, 0.7310585786300049});
  // log_softmax = x - 1001 - log(1 + e^-1).
  expect_f32(run(make(Op::LogSoftmax, {2}), {x}), {2}, {-1.3132616875182228, -0.3132616875182228});
  expect_f32(run(make(Op::Softmax, {2}), {f32({2}, {-1000, -1001})}), {2}, {0.7310585786300049, 0.2689414213699951});
}

TEST(KernelSoftmax, LogSoftmax) {
  // log(e^k / (e + e^2 + e^3)) = k - 3 - log(1 + e^-1 + e^-2).
  expect_f32(run(make(Op::LogSoftmax, {3}), {f32({3}, {1, 2, 3})}), {3},
             {-2.40760596444438, -1.4076059644443801, -0.4076059644443803});
  expect_f32(run(make(Op::LogSoftmax, {2, 2}, {{"axis", I(0)}}), {f32({2, 2}, {1, 3, 2, 3})}), {2, 2},
             {-1.3132616875182228, -0.6931471805599453, -0.3132616875182228, -0.6931471805599453});
}

TEST(KernelSoftmax, SizeOneAxisAndInfinities) {
  expect_f32(run(make(Op::Softmax, {3, 1}), {f32({3, 1}, {-5, 0, 7})}), {3, 1}, {1, 1, 1});
  expect_f32(run(make(Op::LogSoftmax, {3, 1}), {f32({3, 1}, {-5, 0, 7})}), {3, 1}, {0, 0, 0});
  expect_f32(run(make(Op::Softmax, {2}), {f32({2}, {0, -kInf})}), {2}, {1, 0});
  expect_f32(run(make(Op::LogSoftmax, {2}), {f32({2}, {0, -kInf})}), {2}, {0, -kInf});
  expect_f32(run(make(Op::Softmax, {0, 3}), {Tensor::zeros(DType::f32, {0, 3})}), {0, 3}, {});
}

// ---- LayerNorm / RmsNorm --------------------------------------------------------------------

TEST(KernelNorm, LayerNormNoBeta) {
  // Row {1,2,3}: mean 2, biased var 2/3 -> (x - 2) / sqrt(2/3 + 1e-5) = {-1,0,1} * 1.2247356859083902.
  // Row {4,4,4}: zero variance -> exactly 0.
  Tensor out = run(make(Op::LayerNorm, {2, 3}), {f32({2, 3}, {1, 2, 3, 4, 4, 4}), f32({3}, {1, 2, 3})});
  expect_f32(out, {2, 3}, {-1.2247356859083902, 0, 3.6742070577251704, 0, 0, 0});
}

TEST(KernelNorm, LayerNormWithBetaAndConstantRow) {
  Tensor out = run(make(Op::LayerNorm, {2, 3}),
                   {f32({2, 3}, {1, 2, 3, 4, 4, 4}), f32({3}, {1, 1, 1}), f32({3}, {0.5f, -1, 2})});
  expect_f32(out, {2, 3}, {0.5 - 1.2247356859083902, -1, 2 + 1.2247356859083902, 0.5, -1, 2});
}

TEST(KernelNorm, LayerNormEpsAttrAndRank3) {
  // eps = 0: row {1,3} has mean 2, var 1 -> {-1, 1} exactly; row {-2,2} mean 0 var 4 -> {-1, 1}.
  Tensor out = run(make(Op::LayerNorm, {2, 1, 2}, {{"eps", 0.0}}), {f32({2, 1, 2}, {1, 3, -2, 2}), f32({2}, {1, 2})});
  expect_f32(out, {2, 1, 2}, {-1, 2, -1, 2});
  // An integer eps widens.
  out = run(make(Op::LayerNorm, {1, 2}, {{"eps", I(0)}}), {f32({1, 2}, {1, 3}), f32({2}, {1, 1})});
  expect_f32(out, {1, 2}, {-1, 1});
}

TEST(KernelNorm, RmsNorm) {
  // {3,4}: mean square 12.5; eps 0 -> {3,4} / sqrt(12.5), times gamma {1,2}.
  expect_f32(run(make(Op::RmsNorm, {2}, {{"eps", 0.0}}), {f32({2}, {3, 4}), f32({2}, {1, 2})}), {2},
             {0.848528137423857, 2 * 1.131370849898476});
  // Default eps 1e-5: 3 / sqrt(12.50001), 8 / sqrt(12.50001).
  expect_f32(run(make(Op::RmsNorm, {2, 1, 2}), {f32({2, 1, 2}, {3, 4, 0, 0}), f32({2}, {1, 2})}), {2, 1, 2},
             {0.8485277980128058, 2.2627407947008153, 0, 0});
}

// ---- Layout: embedding, reshape, transpose, slice, concat -----------------------------------

TEST(KernelLayout, EmbeddingI32AndI64) {
  const Tensor table = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  expect_f32(run(make(Op::Embedding, {2, 2, 2}), {table, Tensor::from_i32({2, 2}, {2, 0, 1, 2})}), {2, 2, 2},
             {20, 21, 0, 1, 10, 11, 20, 21});
  expect_f32(run(make(Op::Embedding, {3, 2}), {table, Tensor::from_i64({3}, {1, 1, 0})}), {3, 2},
             {10, 11, 10, 11, 0, 1});
  expect_f32(run(make(Op::Embedding, {2}), {table, Tensor::from_i64({}, {2})}), {2}, {20, 21});
  expect_f32(run(make(Op::Embedding, {0, 2}), {table, Tensor::zeros(DType::i32, {0})}), {0, 2}, {});
}

TEST(KernelLayout, EmbeddingOutOfRangeNamesNodeIdAndPosition) {
  const Tensor table = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  Status s = run_status(make(Op::Embedding, {2, 2}, {}, "tok_emb"), {table, Tensor::from_i32({2}, {0, 3})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tok_emb"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("id 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("position 1"), std::string::npos) << s.message();
  s = run_status(make(Op::Embedding, {2, 2, 2}, {}, "e2"), {table, Tensor::from_i64({2, 2}, {0, 1, 2, -1})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("id -1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("position 3"), std::string::npos) << s.message();
}

TEST(KernelLayout, Reshape) {
  expect_f32(run(make(Op::Reshape, {3, 2}, {{"shape", std::vector<int64_t>{3, -1}}}), {f32({2, 3}, {1, 2, 3, 4, 5, 6})}),
             {3, 2}, {1, 2, 3, 4, 5, 6});
  test::expect_ints<int64_t>(run(make(Op::Reshape, DType::i64, {4}, {{"shape", std::vector<int64_t>{4}}}),
                           {Tensor::from_i64({2, 2}, {7, -8, 9, 1LL << 40})}),
                       DType::i64, {4}, {7, -8, 9, 1LL << 40});
  expect_f32(run(make(Op::Reshape, {}, {{"shape", std::vector<int64_t>{}}}), {f32({1, 1}, {5})}), {}, {5});
}

TEST(KernelLayout, TransposeF32) {
  expect_f32(run(make(Op::Transpose, {3, 2}, {{"perm", std::vector<int64_t>{1, 0}}}), {f32({2, 3}, {1, 2, 3, 4, 5, 6})}),
             {3, 2}, {1, 4, 2, 5, 3, 6});
  expect_f32(run(make(Op::Transpose, {2, 3}, {{"perm", std::vector<int64_t>{0, 1}}}), {f32({2, 3}, {1, 2, 3, 4, 5, 6})}),
             {2, 3}, {1, 2, 3, 4, 5, 6});
  expect_f32(run(make(Op::Transpose, {}, {{"perm", std::vector<int64_t>{}}}), {scalar(9)}), {}, {9});
}

TEST(KernelLayout, TransposeIntegers) {
  // x[j,k,i] = 12j + 4k + i (its flat index); perm {2,0,1} -> out[i,j,k] = x[j,k,i].
  Tensor x = Tensor::zeros(DType::i32, {2, 3, 4});
  for (int32_t i = 0; i < 24; ++i) x.data<int32_t>()[i] = i;
  test::expect_ints<int32_t>(run(make(Op::Transpose, DType::i32, {4, 2, 3}, {{"perm", std::vector<int64_t>{2, 0, 1}}}), {x}),
                       DType::i32, {4, 2, 3},
                       {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23});
  test::expect_ints<int64_t>(run(make(Op::Transpose, DType::i64, {2, 2}, {{"perm", std::vector<int64_t>{1, 0}}}),
                           {Tensor::from_i64({2, 2}, {1, 2, 3, 4})}),
                       DType::i64, {2, 2}, {1, 3, 2, 4});
}

ir::Attrs slice_attrs(int64_t axis, int64_t start, int64_t end) {
  return {{"axis", axis}, {"start", start}, {"end", end}};
}

TEST(KernelLayout, SlicePythonBounds) {
  const Tensor x = f32({5}, {0, 1, 2, 3, 4});
  expect_f32(run(make(Op::Slice, {2}, slice_attrs(0, 1, 3)), {x}), {2}, {1, 2});
  expect_f32(run(make(Op::Slice, {2}, slice_attrs(0, -2, 100)), {x}), {2}, {3, 4});
  expect_f32(run(make(Op::Slice, {2}, slice_attrs(-1, -100, -3)), {x}), {2}, {0, 1});
  expect_f32(run(make(Op::Slice, {5}, slice_attrs(0, -100, 100)), {x}), {5}, {0, 1, 2, 3, 4});
  expect_f32(run(make(Op::Slice, {0}, slice_attrs(0, 3, 1)), {x}), {0}, {});
  expect_f32(run(make(Op::Slice, {0}, slice_attrs(0, 7, 9)), {x}), {0}, {});
}

TEST(KernelLayout, SliceIntegers2D) {
  Tensor x = Tensor::zeros(DType::i32, {3, 4});
  for (int32_t i = 0; i < 12; ++i) x.data<int32_t>()[i] = i;
  test::expect_ints<int32_t>(run(make(Op::Slice, DType::i32, {3, 2}, slice_attrs(1, 1, -1)), {x}), DType::i32, {3, 2},
                       {1, 2, 5, 6, 9, 10});
  test::expect_ints<int32_t>(run(make(Op::Slice, DType::i32, {1, 4}, slice_attrs(-2, 2, 3)), {x}), DType::i32, {1, 4},
                       {8, 9, 10, 11});
  test::expect_ints<int64_t>(run(make(Op::Slice, DType::i64, {2, 1}, slice_attrs(1, -1, 5)),
                           {Tensor::from_i64({2, 2}, {5, 6, 7, 8})}),
                       DType::i64, {2, 1}, {6, 8});
}

TEST(KernelLayout, ConcatAxis0And1) {
  expect_f32(run(make(Op::Concat, {3, 2}, {{"axis", I(0)}}), {f32({1, 2}, {1, 2}), f32({2, 2}, {3, 4, 5, 6})}),
             {3, 2}, {1, 2, 3, 4, 5, 6});
  expect_f32(run(make(Op::Concat, {2, 3}, {{"axis", I(1)}}), {f32({2, 1}, {1, 2}), f32({2, 2}, {3, 4, 5, 6})}),
             {2, 3}, {1, 3, 4, 2, 5, 6});
  // Three i64 inputs on axis -1, one of them empty along it.
  test::expect_ints<int64_t>(run(make(Op::Concat, DType::i64, {2, 3}, {{"axis", I(-1)}}),
                           {Tensor::from_i64({2, 1}, {1, 2}), Tensor::zeros(DType::i64, {2, 0}),
                            Tensor::from_i64({2, 2}, {3, 4, 5, 6})}),
                       DType::i64, {2, 3}, {1, 3, 4, 2, 5, 6});
  expect_f32(run(make(Op::Concat, {2}, {{"axis", I(0)}}), {f32({2}, {7, 8})}), {2}, {7, 8});
  test::expect_ints<int32_t>(run(make(Op::Concat, DType::i32, {3}, {{"axis", I(0)}}),
                           {Tensor::from_i32({1}, {-1}), Tensor::from_i32({2}, {2, 3})}),
                       DType::i32, {3}, {-1, 2, 3});
}

// ---- Reductions -----------------------------------------------------------------------------

ir::Attrs reduce_attrs(std::vector<int64_t> axes, int64_t keepdims = 0) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

TEST(KernelReduce, SumEachAxis) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_f32(run(make(Op::ReduceSum, {3}, reduce_attrs({0})), {x}), {3}, {5, 7, 9});
  expect_f32(run(make(Op::ReduceSum, {1, 3}, reduce_attrs({0}, 1)), {x}), {1, 3}, {5, 7, 9});
  expect_f32(run(make(Op::ReduceSum, {2}, reduce_attrs({1})), {x}), {2}, {6, 15});
  expect_f32(run(make(Op::ReduceSum, {2, 1}, reduce_attrs({-1}, 1)), {x}), {2, 1}, {6, 15});
  expect_f32(run(make(Op::ReduceSum, {}, reduce_attrs({0, 1})), {x}), {}, {21});
  expect_f32(run(make(Op::ReduceSum, {1, 1}, reduce_attrs({1, 0}, 1)), {x}), {1, 1}, {21});
}

TEST(KernelReduce, SumNonAdjacentAxes) {
  // x[i,j,k] = 4i + 2j + k; sum over i,k: j=0 -> 0+1+4+5, j=1 -> 2+3+6+7.
  const Tensor x = f32({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  expect_f32(run(make(Op::ReduceSum, {2}, reduce_attrs({0, 2})), {x}), {2}, {10, 18});
  expect_f32(run(make(Op::ReduceSum, {1, 2, 1}, reduce_attrs({0, -1}, 1)), {x}), {1, 2, 1}, {10, 18});
  // Middle axis only: out[i,k] = x[i,0,k] + x[i,1,k].
  expect_f32(run(make(Op::ReduceSum, {2, 2}, reduce_attrs({1})), {x}), {2, 2}, {2, 4, 10, 12});
}

TEST(KernelReduce, Mean) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_f32(run(make(Op::ReduceMean, {3}, reduce_attrs({0})), {x}), {3}, {2.5, 3.5, 4.5});
  expect_f32(run(make(Op::ReduceMean, {2, 1}, reduce_attrs({1}, 1)), {x}), {2, 1}, {2, 5});
  expect_f32(run(make(Op::ReduceMean, {}, reduce_attrs({0, 1})), {x}), {}, {3.5});
}

TEST(KernelReduce, Max) {
  const Tensor x = f32({2, 3}, {1, -5, 3, 4, 2, -6});
  expect_f32(run(make(Op::ReduceMax, {3}, reduce_attrs({0})), {x}), {3}, {4, 2, 3});
  expect_f32(run(make(Op::ReduceMax, {1, 3}, reduce_attrs({0}, 1)), {x}), {1, 3}, {4, 2, 3});
  expect_f32(run(make(Op::ReduceMax, {2}, reduce_attrs({1})), {x}), {2}, {3, 4});
  expect_f32(run(make(Op::ReduceMax, {2, 1}, reduce_attrs({1}, 1)), {x}), {2, 1}, {3, 4});
  expect_f32(run(make(Op::ReduceMax, {}, reduce_attrs({0, 1})), {f32({1, 3}, {-7, -2, -5})}), {}, {-2});
  expect_f32(run(make(Op::ReduceMax, {}, reduce_attrs({0})), {f32({3}, {1, std::nanf(""), 2})}), {}, {kNaN});
}

TEST(KernelReduce, EmptyAndPrecision) {
  const Tensor empty = Tensor::zeros(DType::f32, {0, 3});
  expect_f32(run(make(Op::ReduceSum, {3}, reduce_attrs({0})), {empty}), {3}, {0, 0, 0});
  expect_f32(run(make(Op::ReduceMean, {3}, reduce_attrs({0})), {empty}), {3}, {kNaN, kNaN, kNaN});
  expect_f32(run(make(Op::ReduceSum, {0}, reduce_attrs({1})), {empty}), {0}, {});
  // Double accumulation: in f32, 1e8 + 1 - 1e8 would be 0.
  expect_f32(run(make(Op::ReduceSum, {}, reduce_attrs({0})), {f32({3}, {1e8f, 1, -1e8f})}), {}, {1});
}

// ---- Where / CausalMask ---------------------------------------------------------------------

TEST(KernelSelect, WhereSameShape) {
  expect_f32(run(make(Op::Where, {3}), {Tensor::from_i32({3}, {1, 0, 2}), f32({3}, {1, 2, 3}), f32({3}, {10, 20, 30})}),
             {3}, {1, 20, 3});
  // f32 condition: non-zero (NaN included) is true; -0 equals 0, so it is false.
  expect_f32(run(make(Op::Where, {4}),
                 {f32({4}, {0.5f, -0.0f, std::nanf(""), 0}), f32({4}, {1, 2, 3, 4}), f32({4}, {10, 20, 30, 40})}),
             {4}, {1, 20, 3, 40});
}

TEST(KernelSelect, WhereThreeWayBroadcast) {
  // cond [2,1], a [1,3], b scalar -> [2,3].
  expect_f32(run(make(Op::Where, {2, 3}), {f32({2, 1}, {1, 0}), f32({1, 3}, {1, 2, 3}), scalar(-1)}), {2, 3},
             {1, 2, 3, -1, -1, -1});
  // cond [3] (i64) against a [2,1] and b [2,3].
  expect_f32(run(make(Op::Where, {2, 3}), {Tensor::from_i64({3}, {0, 1, 0}), f32({2, 1}, {7, 8}),
                                            f32({2, 3}, {1, 2, 3, 4, 5, 6})}),
             {2, 3}, {1, 7, 3, 4, 8, 6});
}

TEST(KernelSelect, WhereIntegerValues) {
  test::expect_ints<int64_t>(run(make(Op::Where, DType::i64, {2}),
                           {Tensor::from_i64({2}, {0, 5}), Tensor::from_i64({2}, {7, 8}), Tensor::from_i64({2}, {9, 10})}),
                       DType::i64, {2}, {9, 8});
  test::expect_ints<int32_t>(run(make(Op::Where, DType::i32, {}),
                           {Tensor::from_i32({}, {1}), Tensor::from_i32({}, {-3}), Tensor::from_i32({}, {4})}),
                       DType::i32, {}, {-3});
}

TEST(KernelSelect, CausalMaskOffsets) {
  const Tensor x = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  expect_f32(run(make(Op::CausalMask, {3, 3}), {x}), {3, 3}, {1, -kInf, -kInf, 4, 5, -kInf, 7, 8, 9});
  expect_f32(run(make(Op::CausalMask, {3, 3}, {{"offset", I(1)}}), {x}), {3, 3}, {1, 2, -kInf, 4, 5, 6, 7, 8, 9});
  expect_f32(run(make(Op::CausalMask, {3, 3}, {{"offset", I(-1)}}), {x}), {3, 3},
             {-kInf, -kInf, -kInf, 4, -kInf, -kInf, 7, 8, -kInf});
}

TEST(KernelSelect, CausalMaskBatchedNonSquare) {
  // [2,2,3]: in each batch row 0 keeps column 0, row 1 keeps columns 0..1.
  Tensor out = run(make(Op::CausalMask, {2, 2, 3}), {f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})});
  expect_f32(out, {2, 2, 3}, {1, -kInf, -kInf, 4, 5, -kInf, 7, -kInf, -kInf, 10, 11, -kInf});
  // offset 2 on [2,3]: nothing is masked.
  expect_f32(run(make(Op::CausalMask, {2, 3}, {{"offset", I(2)}}), {f32({2, 3}, {1, 2, 3, 4, 5, 6})}), {2, 3},
             {1, 2, 3, 4, 5, 6});
}

// ---- Losses ---------------------------------------------------------------------------------

// Row {1,2,3} with target 2: -log_softmax = log(1 + e^-1 + e^-2) = 0.4076059644443803.
// Row {0,0,0} with any target: log 3 = 1.0986122886681098.
TEST(KernelLoss, CrossEntropyMean) {
  const Tensor logits = f32({2, 3}, {1, 2, 3, 0, 0, 0});
  expect_f32(run(make(Op::CrossEntropy, {}), {logits, Tensor::from_i32({2}, {2, 0})}), {},
             {(0.4076059644443803 + 1.0986122886681098) / 2});
  expect_f32(run(make(Op::CrossEntropy, {}), {logits, Tensor::from_i64({2}, {2, 1})}), {},
             {(0.4076059644443803 + 1.0986122886681098) / 2});
  // Rank-3 logits [2,1,3] with targets [2,1]; target 0 on {1,2,3}: 2 + 0.4076059644443803.
  expect_f32(run(make(Op::CrossEntropy, {}), {f32({2, 1, 3}, {1, 2, 3, 0, 0, 0}), Tensor::from_i32({2, 1}, {0, 1})}),
             {}, {(2.4076059644443803 + 1.0986122886681098) / 2});
}

TEST(KernelLoss, CrossEntropyIgnoreIndex) {
  const Tensor logits = f32({2, 3}, {1, 2, 3, 0, 0, 0});
  expect_f32(run(make(Op::CrossEntropy, {}, {{"ignore_index", I(0)}}), {logits, Tensor::from_i32({2}, {2, 0})}), {},
             {0.4076059644443803});
  expect_f32(run(make(Op::CrossEntropy, {}, {{"ignore_index", I(-100)}}), {logits, Tensor::from_i64({2}, {-100, 1})}),
             {}, {1.0986122886681098});
  expect_f32(run(make(Op::CrossEntropy, {}, {{"ignore_index", I(-100)}}), {logits, Tensor::from_i64({2}, {-100, -100})}),
             {}, {kNaN});
}

TEST(KernelLoss, CrossEntropyLargeLogits) {
  // -log_softmax({1000,1001})[0] = log(1 + e).
  expect_f32(run(make(Op::CrossEntropy, {}), {f32({1, 2}, {1000, 1001}), Tensor::from_i32({1}, {0})}), {},
             {1.3132616875182228});
}

TEST(KernelLoss, CrossEntropyOutOfRangeTarget) {
  const Tensor logits = f32({2, 3}, {1, 2, 3, 0, 0, 0});
  Status s = run_status(make(Op::CrossEntropy, {}, {}, "loss"), {logits, Tensor::from_i32({2}, {1, 3})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'loss'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("target 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("position 1"), std::string::npos) << s.message();
  // -1 is out of range unless it is the ignore_index.
  s = run_status(make(Op::CrossEntropy, {}, {}, "loss"), {logits, Tensor::from_i64({2}, {-1, 0})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("target -1"), std::string::npos) << s.message();
  s = run_status(make(Op::CrossEntropy, {}, {{"ignore_index", I(-1)}}, "loss"), {logits, Tensor::from_i64({2}, {-1, 0})});
  EXPECT_TRUE(s.is_ok()) << s.to_string();
}

TEST(KernelLoss, Mse) {
  // ((1-1)^2 + (2-0)^2 + (3-0)^2) / 3 = 13/3.
  expect_f32(run(make(Op::Mse, {}), {f32({3}, {1, 2, 3}), f32({3}, {1, 0, 0})}), {}, {13.0 / 3});
  expect_f32(run(make(Op::Mse, {}), {f32({2, 2}, {1, 1, 1, 1}), f32({2, 2}, {0, 2, 1, 1})}), {}, {0.5});
  expect_f32(run(make(Op::Mse, {}), {scalar(3), scalar(1)}), {}, {4});
}

// ---- The table and evaluate_reference -------------------------------------------------------

TEST(KernelTable, EveryOpHasAKernel) {
  for (int i = 0; i < ir::kNumOps; ++i) EXPECT_NE(cpu::reference_kernel(static_cast<Op>(i)), nullptr) << i;
  EXPECT_EQ(cpu::reference_kernel(Op::Add), &cpu::ref::elementwise<Op::Add>);
  EXPECT_EQ(cpu::reference_kernel(Op::Mse), &cpu::ref::Mse);
}

TEST(KernelTable, LeavesAreNotExecuted) {
  for (Op op : {Op::Input, Op::Param, Op::Constant}) {
    Status s = run_status(make(op, {2}, {}, "leaf"), {});
    EXPECT_EQ(s.code(), StatusCode::kInternal) << s.to_string();
    EXPECT_NE(s.message().find("'leaf'"), std::string::npos) << s.message();
  }
}

TEST(KernelTable, WrongInputCountAndWorkspace) {
  Status s = run_status(make(Op::Add, {1}, {}, "x"), {f32({1}, {1})});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  ir::Graph g;
  EXPECT_EQ(cpu::reference_workspace_bytes(g, make(Op::Matmul, {2, 2})), 0u);
}

TEST(KernelTable, BadAttributeKindIsReturned) {
  Status s = run_status(make(Op::Softmax, {2}, {{"axis", std::string("last")}}), {f32({2}, {1, 2})});
  EXPECT_FALSE(s.is_ok());
}

}  // namespace
}  // namespace volta
