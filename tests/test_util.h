// Helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <vector>
#include <string>

#include "backends/cpu/matmul.h"
#include "volta/ir.h"
#include "volta/runtime.h"
#include "volta/status.h"

// EXPECT that `expr` (a Status or Result) failed and its message contains `needle`.
#define EXPECT_ERROR_CONTAINS(expr, needle)                                                  \
  do {                                                                                       \
    auto&& volta_r_ = (expr);                                                                \
    ASSERT_FALSE(volta_r_.is_ok()) << "expected an error containing: " << (needle);         \
    EXPECT_NE(::volta::test::message_of(volta_r_).find(needle), std::string::npos)          \
        << "message: " << ::volta::test::message_of(volta_r_);                               \
  } while (0)

#define ASSERT_OK(expr)                                                                     \
  do {                                                                                      \
    auto&& volta_r_ = (expr);                                                               \
    ASSERT_TRUE(volta_r_.is_ok()) << ::volta::test::message_of(volta_r_);                   \
  } while (0)

// `lhs = *expr` when `expr` (a Result) holds a value, else a fatal failure with its message.
#define ASSERT_OK_AND_ASSIGN(lhs, expr) VOLTA_TEST_ASSIGN_(VOLTA_TEST_CAT_(volta_result_, __LINE__), lhs, expr)
#define VOLTA_TEST_CAT_(a, b) VOLTA_TEST_CAT2_(a, b)
#define VOLTA_TEST_CAT2_(a, b) a##b
#define VOLTA_TEST_ASSIGN_(tmp, lhs, expr)                          \
  auto tmp = (expr);                                                \
  ASSERT_TRUE(tmp.is_ok()) << ::volta::test::message_of(tmp);       \
  lhs = std::move(*tmp)

namespace volta::test {
inline std::string message_of(const Status& s) { return s.message(); }
template <typename T>
std::string message_of(const Result<T>& r) { return r.status().message(); }

std::string read_file(const std::string& path);
// Runs a shell command, returns its exit code and fills stdout/stderr.
int run_command(const std::string& cmd, std::string* out, std::string* err = nullptr);
std::string source_path(const std::string& rel);  // VOLTA_SOURCE_DIR/rel
// examples/<file> parsed; a failure fails the test (and gives an empty graph).
ir::Graph load_example(const std::string& file);
// IR text parsed; a failure fails the test (and gives an empty graph).
ir::Graph parse_ir(const std::string& text);
// Every param of g seeded (init_params) and every input random (random_inputs), from `seed`.
Result<Bindings> seeded_values(const ir::Graph& g, uint64_t seed);
// Runs fn(isa, threads) with each matmul ISA this CPU has made the active one and the CPU
// backend at 1 and then 2 threads, then restores both: the configurations a bits test compares.
void for_each_cpu_config(const std::function<void(cpu::MatmulIsa isa, int threads)>& fn);
// A tensor of integer dtype `dtype` (T its element type) with this shape and these values.
template <typename T>
void expect_ints(const Tensor& t, DType dtype, const Shape& shape, const std::vector<T>& want) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(static_cast<size_t>(t.numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(t.data<T>()[i], want[i]) << "at " << i;
}

}  // namespace volta::test
