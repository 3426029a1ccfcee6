// The integer math of the elementwise ops (i32 / i64 operands, ir/scalar_math.h) through the
// reference kernels, against hand-computed values: wrapping, truncating division that never
// traps, powers by squaring, bitwise_and, and the type rules.
#include <gtest/gtest.h>

#include <algorithm>
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

ir::Node int_node(Op op, DType dtype, Shape shape) {
  ir::Node n;
  n.op = op;
  n.name = "t";
  n.type = TensorType{dtype, std::move(shape)};
  return n;
}

Tensor run_ref(const ir::Node& n, std::vector<Tensor> in) {
  Result<Tensor> r = cpu::evaluate_reference(n, in);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : Tensor{};
}

Tensor i32s(Shape s, std::vector<int32_t> v) {
  Tensor t = Tensor::zeros(DType::i32, std::move(s));
  std::copy(v.begin(), v.end(), t.data<int32_t>());
  return t;
}
constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min(), kMax32 = std::numeric_limits<int32_t>::max();
constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min(), kMax64 = std::numeric_limits<int64_t>::max();

TEST(KernelInteger, AddSubMulWrapInTheirWidth) {
  test::expect_ints<int32_t>(run_ref(int_node(Op::Add, DType::i32, {3}), {i32s({3}, {kMax32, 5, -7}), i32s({3}, {1, -9, 3})}),
                       DType::i32, {3}, {kMin32, -4, -4});
  test::expect_ints<int32_t>(run_ref(int_node(Op::Sub, DType::i32, {2, 2}), {i32s({2, 1}, {kMin32, 10}), i32s({2}, {1, -3})}),
                       DType::i32, {2, 2}, {kMax32, kMin32 + 3, 9, 13});
  test::expect_ints<int32_t>(run_ref(int_node(Op::Mul, DType::i32, {2}), {i32s({2}, {65536, -3}), i32s({2}, {65536, 7})}),
                       DType::i32, {2}, {0, -21});
  test::expect_ints<int64_t>(run_ref(int_node(Op::Mul, DType::i64, {2}), {Tensor::from_i64({2}, {kMax64, 3}), Tensor::from_i64({}, {2})}),
                       DType::i64, {2}, {-2, 6});
}

TEST(KernelInteger, DivTruncatesAndNeverTraps) {
  test::expect_ints<int32_t>(run_ref(int_node(Op::Div, DType::i32, {6}),
                           {i32s({6}, {7, -7, 7, -7, 5, kMin32}), i32s({6}, {2, 2, -2, -2, 0, -1})}),
                       DType::i32, {6}, {3, -3, -3, 3, 0, kMin32});
  test::expect_ints<int64_t>(run_ref(int_node(Op::Div, DType::i64, {2}), {Tensor::from_i64({2}, {kMin64, 9}), Tensor::from_i64({2}, {-1, 0})}),
                       DType::i64, {2}, {kMin64, 0});
}

TEST(KernelInteger, PowBySquaringWithNegativeExponents) {
  test::expect_ints<int64_t>(run_ref(int_node(Op::Pow, DType::i64, {7}), {Tensor::from_i64({7}, {3, -2, 2, 1, -1, -1, 5}),
                                                           Tensor::from_i64({7}, {6, 3, 62, -4, -3, -2, -1})}),
                       DType::i64, {7}, {729, -8, int64_t{1} << 62, 1, -1, 1, 0});
  test::expect_ints<int32_t>(run_ref(int_node(Op::Pow, DType::i32, {3}), {i32s({3}, {2, 0, 0}), i32s({3}, {33, 0, -1})}),
                       DType::i32, {3}, {0, 1, 0});  // 2^33 wraps to 0; 0^0 = 1; 0^-1 has no value: 0
}

TEST(KernelInteger, UnaryOpsAndBitwiseAnd) {
  test::expect_ints<int32_t>(run_ref(int_node(Op::Neg, DType::i32, {3}), {i32s({3}, {5, -2, kMin32})}), DType::i32, {3}, {-5, 2, kMin32});
  test::expect_ints<int32_t>(run_ref(int_node(Op::Abs, DType::i32, {3}), {i32s({3}, {5, -2, kMin32})}), DType::i32, {3}, {5, 2, kMin32});
  test::expect_ints<int64_t>(run_ref(int_node(Op::Sign, DType::i64, {3}), {Tensor::from_i64({3}, {-9, 0, 4})}), DType::i64, {3}, {-1, 0, 1});
  test::expect_ints<int32_t>(run_ref(int_node(Op::Relu, DType::i32, {3}), {i32s({3}, {-9, 0, 4})}), DType::i32, {3}, {0, 0, 4});
  test::expect_ints<int32_t>(run_ref(int_node(Op::BitwiseAnd, DType::i32, {3}), {i32s({3}, {300, -1, -200}), i32s({}, {255})}),
                       DType::i32, {3}, {44, 255, 56});
}

TEST(KernelInteger, TypeRules) {
  const TensorType a{DType::i32, {3}}, b{DType::i64, {3}}, f{DType::f32, {3}};
  EXPECT_EQ(ir::infer_type(Op::Add, std::vector<TensorType>{a, a}, {}).value(), a);
  EXPECT_NE(test::message_of(ir::infer_type(Op::Add, std::vector<TensorType>{a, b}, {})).find("differ in dtype"), std::string::npos);
  EXPECT_FALSE(ir::infer_type(Op::Add, std::vector<TensorType>{f, a}, {}).is_ok());
  EXPECT_FALSE(ir::infer_type(Op::Exp, std::vector<TensorType>{a}, {}).is_ok());  // no integer math
  EXPECT_FALSE(ir::infer_type(Op::BitwiseAnd, std::vector<TensorType>{f, f}, {}).is_ok());
  EXPECT_EQ(ir::infer_type(Op::BitwiseAnd, std::vector<TensorType>{b, TensorType{DType::i64, {}}}, {}).value(), b);
}

}  // namespace
}  // namespace volta
