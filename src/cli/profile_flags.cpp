#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "io/file.h"

namespace volta::cli {

void ProfileFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--profile", trace_path, "Write a Chrome trace of every executed op (open in Perfetto or chrome://tracing)");
  cmd.add_flag("--profile-summary", summary, "Print a per-op time table to stderr at the end");
}

namespace {
std::string g_hash_trace;  // (set before any command runs)
}  // namespace

void set_hash_trace_path(std::string path) { g_hash_trace = std::move(path); }

Status stdout_status() {
  if (std::ferror(stdout) == 0) return Status::ok();
  // (errno names the failure only if this flush is the write that failed)
  const bool now = std::fflush(stdout) != 0;
  return not_found(std::string("cannot write to stdout") + (now ? std::string(": ") + std::strerror(errno) : ""));
}

Status ProfileFlags::check(const std::vector<std::string>& files, const std::string& made_dir) const {
  // A directory the command makes, or one made on the way to it, is compared as an absolute
  // path (it may not exist yet): "out/", "./out" and "out" are one.
  const auto absolute = [](const std::string& p) {
    std::error_code ec;
    std::string a = std::filesystem::absolute(p, ec).lexically_normal().string();
    while (a.size() > 1 && a.back() == '/') a.pop_back();
    return a;
  };
  const std::string made = made_dir.empty() ? "" : absolute(made_dir);
  const auto parent_ok = [&](const std::string& path, const std::string& what) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    const std::string parent = absolute(dir.empty() ? "." : dir.string());
    if (!made.empty() && (made == parent || made.starts_with(parent + "/"))) return Status::ok();
    return io::check_parent_dir(path, what);
  };
  if (!trace_path.empty()) {
    VOLTA_RETURN_IF_ERROR(io::check_output_path(trace_path, "--profile", files, io::Writes::Json));
    VOLTA_RETURN_IF_ERROR(parent_ok(trace_path, "--profile"));
  }
  if (g_hash_trace.empty()) return Status::ok();
  std::vector<std::string> others = files;
  if (!trace_path.empty()) others.push_back(trace_path);
  VOLTA_RETURN_IF_ERROR(io::check_output_path(g_hash_trace, "--trace-hashes", others));
  return parent_ok(g_hash_trace, "--trace-hashes");
}

Status ProfileFlags::finish(const Profiler& p) const {
  if (!trace_path.empty()) VOLTA_RETURN_IF_ERROR(p.write_chrome_trace(trace_path));
  if (summary) std::fprintf(stderr, "%s", p.summary().c_str());
  return Status::ok();
}

}  // namespace volta::cli
