// Helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

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

namespace volta::test {
inline std::string message_of(const Status& s) { return s.message(); }
template <typename T>
std::string message_of(const Result<T>& r) { return r.status().message(); }

std::string read_file(const std::string& path);
// Runs a shell command, returns its exit code and fills stdout/stderr.
int run_command(const std::string& cmd, std::string* out, std::string* err = nullptr);
std::string source_path(const std::string& rel);  // VOLTA_SOURCE_DIR/rel
}  // namespace volta::test
