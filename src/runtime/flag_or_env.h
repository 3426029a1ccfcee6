// A run setting from its command-line flag, else its environment variable, else a default (the
// device, the determinism level). A bad value is an error naming where it came from.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "volta/status.h"

namespace volta {

template <typename T, typename Parse>
Result<T> from_flag_or_env(std::string_view flag, const char* flag_name, const char* env_name, T fallback, Parse parse) {
  const char* env = std::getenv(env_name);
  const bool from_flag = !flag.empty();
  if (!from_flag && !(env && *env)) return fallback;
  Result<T> v = parse(from_flag ? flag : std::string_view(env));
  if (!v.is_ok()) return invalid_argument(std::string(from_flag ? flag_name : env_name) + ": " + v.status().message());
  return v;
}

}  // namespace volta
