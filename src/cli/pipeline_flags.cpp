#include "cli/pipeline_flags.h"

#include <charconv>
#include <cstdio>

#include "cli/commands.h"
#include "volta/text.h"

namespace volta::cli {

void PipelineFlags::add_to(CLI::App& cmd) {
  std::string names;
  for (const passes::Pass& p : passes::pipeline()) names += (names.empty() ? "" : ", ") + p.name;
  cmd.add_option("--disable-pass", disable_passes, "Skip a pass of the pipeline (" + names + ")");
  cmd.add_option("--dump-after", dump_after, "Print the IR after this pass to stderr");
  cmd.add_option("--budget", budget, "Memory budget for the plan in bytes (suffix K, M or G); planning fails above it");
}

Result<size_t> parse_bytes(const std::string& text, const std::string& flag) {
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view rest(end, static_cast<size_t>(text.data() + text.size() - end));
  size_t scale = 1;
  if (rest == "K" || rest == "k") scale = size_t{1} << 10;
  else if (rest == "M" || rest == "m") scale = size_t{1} << 20;
  else if (rest == "G" || rest == "g") scale = size_t{1} << 30;
  else if (!rest.empty()) ec = std::errc::invalid_argument;
  if (ec != std::errc() || text.empty() || value > SIZE_MAX / scale)
    return invalid_argument(flag + ": '" + text + "' is not a byte count (e.g. 4096, 64K, 3M, 1G)");
  return value * scale;
}

Status check_pass_name(const std::string& name, const std::string& flag) {
  for (const passes::Pass& p : passes::pipeline())
    if (p.name == name) return Status::ok();
  return invalid_argument(flag + ": unknown pass '" + name + "'");
}

Result<CompileOptions> PipelineFlags::to_options() const {
  CompileOptions opts;
  for (const std::string& name : disable_passes) {
    VOLTA_RETURN_IF_ERROR(check_pass_name(name, "--disable-pass"));
    opts.pipeline.disabled.insert(name);
  }
  if (!dump_after.empty()) {
    VOLTA_RETURN_IF_ERROR(check_pass_name(dump_after, "--dump-after"));
    opts.pipeline.dump_after = dump_after;
    opts.pipeline.dump = [](const std::string& pass, const ir::Graph& g) {
      std::fprintf(stderr, "# IR after %s\n%s", pass.c_str(), ir::print_graph(g).c_str());
    };
  }
  if (!budget.empty()) {
    VOLTA_ASSIGN_OR_RETURN(opts.plan.memory_budget_bytes, parse_bytes(budget, "--budget"));
  }
  return opts;
}

Result<Runtime> new_runtime(const GlobalFlags& global, DeviceKind device, const ir::Graph* g) {
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, Runtime::create(device, g, global.determinism));
  rt.set_trace(global.trace.get());
  return rt;
}

}  // namespace volta::cli
