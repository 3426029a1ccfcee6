// Errors are values: every fallible call returns Status or Result<T>.
// Exceptions never cross the library boundary; `assert` guards internal invariants only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace volta {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad graph, shape, dtype, attribute or flag
  kParseError,       // malformed text or file
  kNotFound,         // missing file, name or value
  kUnimplemented,    // valid request the backend or build cannot serve
  kUnavailable,      // device or resource not present
  kOutOfMemory,      // plan exceeds the memory budget
  kNumericError,     // NaN / Inf under a fail-fast policy
  kInternal,         // a broken invariant inside Volta (a bug)
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: [matmul] inner dims 3 != 4 (node 'attn.q')"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status parse_error(std::string msg) { return {StatusCode::kParseError, std::move(msg)}; }
inline Status not_found(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status unimplemented(std::string msg) { return {StatusCode::kUnimplemented, std::move(msg)}; }
inline Status unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
inline Status out_of_memory(std::string msg) { return {StatusCode::kOutOfMemory, std::move(msg)}; }
inline Status numeric_error(std::string msg) { return {StatusCode::kNumericError, std::move(msg)}; }
inline Status internal_error(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

// A number as an error message names it: %g (1e+300 as such, not std::to_string's 301 digits
// and six decimals).
std::string number_for_message(double v);

// Result<T> holds a T or a non-ok Status. Written by hand (not std::expected) so the same
// headers compile with g++, clang 14 (fuzzers) and nvcc.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result built from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status ok_status;
    return is_ok() ? ok_status : std::get<Status>(v_);
  }
  T& value() & { return checked(); }
  const T& value() const& { return const_cast<Result*>(this)->checked(); }
  T&& value() && { return std::move(checked()); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->checked(); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->checked(); }

 private:
  T& checked() {
    if (!is_ok()) {  // a programmer bug: the caller did not check the Result
      std::fprintf(stderr, "volta: value() on error Result: %s\n", std::get<Status>(v_).to_string().c_str());
      std::abort();
    }
    return std::get<T>(v_);
  }
  std::variant<T, Status> v_;
};

}  // namespace volta

#define VOLTA_CONCAT_INNER(a, b) a##b
#define VOLTA_CONCAT(a, b) VOLTA_CONCAT_INNER(a, b)

#define VOLTA_RETURN_IF_ERROR(expr)                       \
  do {                                                    \
    ::volta::Status volta_status_ = (expr);               \
    if (!volta_status_.is_ok()) return volta_status_;     \
  } while (0)

// VOLTA_ASSIGN_OR_RETURN(auto x, make_x());
#define VOLTA_ASSIGN_OR_RETURN(decl, expr) \
  VOLTA_ASSIGN_OR_RETURN_IMPL(VOLTA_CONCAT(volta_result_, __LINE__), decl, expr)
#define VOLTA_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  decl = std::move(tmp).value()
