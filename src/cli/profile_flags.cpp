#include <cstdio>

#include "cli/commands.h"
#include "io/file.h"

namespace volta::cli {

void ProfileFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--profile", trace_path, "Write a Chrome trace of every executed op (open in Perfetto or chrome://tracing)");
  cmd.add_flag("--profile-summary", summary, "Print a per-op time table to stderr at the end");
}

Status ProfileFlags::check(const std::vector<std::string>& reads) const {
  return trace_path.empty() ? Status::ok() : io::check_output_path(trace_path, "--profile", reads, io::Writes::Json);
}

Status ProfileFlags::finish(const Profiler& p) const {
  if (!trace_path.empty()) VOLTA_RETURN_IF_ERROR(p.write_chrome_trace(trace_path));
  if (summary) std::fprintf(stderr, "%s", p.summary().c_str());
  return Status::ok();
}

}  // namespace volta::cli
