// The determinism policy's names and where a run's level comes from (include/volta/determinism.h).
#include "volta/determinism.h"

#include <string>

#include "runtime/flag_or_env.h"

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
  return from_flag_or_env(flag, "--deterministic", "VOLTA_DETERMINISTIC", Determinism::Strict, parse_determinism);
}

}  // namespace volta
