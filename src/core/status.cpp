#include "volta/status.h"

#include <cstdio>

namespace volta {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kParseError: return "parse error";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kNumericError: return "numeric error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string number_for_message(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace volta
