// The determinism policy's names and where a run's level comes from (include/volta/determinism.h).
#include "volta/determinism.h"

#include <cstdlib>
#include <string>

namespace volta {

const char* determinism_name(Determinism d) {
  switch (d) {
    case Determinism::Off: return "off";
    case Determinism::RunToRun: return "run-to-run";
    case Determinism::Strict: return "strict";
  }
  return "?";
}

Result<Determinism> parse_determinism(std::string_view s) {
  for (Determinism d : {Determinism::Strict, Determinism::RunToRun, Determinism::Off})
    if (s == determinism_name(d)) return d;
  return invalid_argument("unknown determinism level '" + std::string(s) + "' (expected strict, run-to-run or off)");
}

Result<Determinism> determinism_from_flag_or_env(std::string_view flag) {
  if (!flag.empty()) {
    auto d = parse_determinism(flag);
    if (!d.is_ok()) return invalid_argument("--deterministic: " + d.status().message());
    return d;
  }
  const char* env = std::getenv("VOLTA_DETERMINISTIC");
  if (env && *env) {
    auto d = parse_determinism(env);
    if (!d.is_ok()) return invalid_argument("VOLTA_DETERMINISTIC: " + d.status().message());
    return d;
  }
  return Determinism::Strict;
}

}  // namespace volta
