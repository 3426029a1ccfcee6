// The determinism policy: what a run promises about its bits, an explicit input of the Runtime and
// of each compile (CompileOptions), never a hidden default. Every kernel of every backend declares
// the level it meets, and planning refuses a plan whose kernels fall below the requested level.
// docs/determinism.md is the policy in full.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "volta/status.h"

namespace volta {

// Ordered: a kernel meets a requested level when its own level is at least that.
enum class Determinism : uint8_t {
  Off = 0,       // anything goes, fastest
  RunToRun = 1,  // bitwise identical across runs with the same configuration; the thread count,
                 // GPU model or library workspace may change the bits
  Strict = 2,    // bitwise identical across runs and thread counts on the same backend and ISA
};

// The kernel a backend runs for a node: its name (plan reports show it) and the level it meets.
// Every entry of a backend's kernel table declares both. Planning chooses it once; the plan keeps
// it and hands it back to every execute() of the node, so what runs is what the report shows.
struct KernelInfo {
  std::string variant;  // "cpu" (the backend's own), "reference", "cpu.split-k", "cuda", ...
  Determinism level = Determinism::Strict;
  int index = 0;  // the backend's own number for the variant (0: its default kernel for the op)
};

const char* determinism_name(Determinism d);               // "off", "run-to-run", "strict"
Result<Determinism> parse_determinism(std::string_view s);  // those names
// --deterministic when given, else VOLTA_DETERMINISTIC, else strict; an error names the source.
Result<Determinism> determinism_from_flag_or_env(std::string_view flag);

}  // namespace volta
