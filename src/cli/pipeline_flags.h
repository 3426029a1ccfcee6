// Flags shared by commands that compile a graph: pass switches, IR dumps, memory budget.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "volta/runtime.h"

namespace volta::cli {

struct PipelineFlags {
  std::vector<std::string> disable_passes;
  std::string dump_after;
  std::string budget;  // bytes, with optional K/M/G suffix (powers of 1024)

  void add_to(CLI::App& cmd);
  // Validates the flags (naming the bad one) and fills CompileOptions.
  Result<CompileOptions> to_options() const;
};

// ok when `name` is a pass of the pipeline, else the one-line error naming `flag`.
Status check_pass_name(const std::string& name, const std::string& flag);

// "64K", "3M", "1G", "1000" -> bytes.
Result<size_t> parse_bytes(const std::string& text, const std::string& flag);

}  // namespace volta::cli
