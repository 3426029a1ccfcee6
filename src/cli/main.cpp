// `volta`: one command, one subcommand per job. Errors print one line and exit non-zero:
// 1 for a failed job, 2 for bad usage.
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "cli/commands.h"
#include "cli/pipeline_flags.h"
#include "io/file.h"
#include "volta/backend.h"

namespace {

// An error message as the user reads it: one line however long a value it quotes (an attribute,
// a line of a file, a path), cut in the middle so its start and end (node, file, offset) stay.
std::string one_line(const std::string& raw) {
  // Line breaks become spaces; other control bytes (a NUL from a file's string would end the
  // printed message) are spelled \xNN.
  std::string m;
  m.reserve(raw.size());
  for (const char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r') {
      m += ' ';
    } else if ((u < 0x20 && c != '\t') || u == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      m += {'\\', 'x', kHex[u >> 4], kHex[u & 15]};
    } else {
      m += c;
    }
  }
  constexpr size_t kMax = 1000, kHead = 700, kTail = 200;
  if (m.size() > kMax)
    m = m.substr(0, kHead) + " ... [" + std::to_string(m.size() - kHead - kTail) + " characters cut] ... " + m.substr(m.size() - kTail);
  return m;
}

// CLI11 converts leniently: an empty value becomes 0 or "", "-1" wraps around in an unsigned
// flag and "nan" is a float. Every value-taking option of every command is checked here, once,
// by the type it converts to.
std::string bad_value(const std::string& v, const std::string& type) {
  if (v.empty()) return "an empty value is not allowed";
  size_t first = v.find_first_not_of(" \t");
  if (type == "UINT" && first != std::string::npos && v[first] == '-') return "'" + v + "' is negative";
  if (type == "INT" || type == "UINT") {  // CLI11 saturates a 64-bit value: 2^64 read as 2^64-1
    errno = 0;
    char* end = nullptr;
    if (type == "INT") static_cast<void>(std::strtoll(v.c_str(), &end, 0));
    else static_cast<void>(std::strtoull(v.c_str(), &end, 0));
    if (errno == ERANGE) return "'" + v + "' is out of the 64-bit range";
  }
  if (type == "FLOAT") {
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (end != v.c_str() && !std::isfinite(d)) return "'" + v + "' is not a finite number";
  }
  return "";
}

void check_values(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size() == 0) continue;  // a flag without a value
    std::string type = opt->get_type_name();
    opt->check([type](const std::string& v) { return bad_value(v, type); });
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_values(*sub);
}

// --help and --version print to std::cout; a text that did not arrive is a failed command.
int help_exit(CLI::App& app, const CLI::Error& e) {
  int code = app.exit(e);
  std::cout.flush();
  if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "volta: error: cannot write to stdout: %s\n", std::strerror(errno));
    return 1;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout (`volta train ... | head -1`) fails the write, which is reported as a failed
  // command, instead of killing the process mid-run.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    CLI::App app{"Volta: a deterministic ML compiler-runtime", "volta"};
    app.set_version_flag("--version", std::string("volta ") + VOLTA_VERSION);
    app.require_subcommand(1);
    volta::cli::GlobalFlags global;
    app.add_option("--device", global.device, "cpu | cuda | auto (default: $VOLTA_DEVICE, else cpu)");
    // Every subcommand, in the order --help lists them.
    using Adder = volta::cli::Action (*)(CLI::App&, volta::cli::GlobalFlags&);
    const std::vector<std::pair<const char*, Adder>> adders = {
        {"inspect", volta::cli::add_inspect}, {"run", volta::cli::add_run},   {"train", volta::cli::add_train},
        {"generate", volta::cli::add_generate}, {"eval", volta::cli::add_eval}, {"bench", volta::cli::add_bench},
        {"tune", volta::cli::add_tune}, {"export", volta::cli::add_export}, {"diff-trace", volta::cli::add_diff_trace}};
    std::vector<std::pair<CLI::App*, volta::cli::Action>> commands;
    std::string names;
    for (const auto& [name, add] : adders) {
      volta::cli::Action action = add(app, global);
      commands.emplace_back(app.get_subcommand(name), std::move(action));
      names += std::string(names.empty() ? "" : ", ") + name;
    }
    app.add_option("--threads", global.threads, "CPU threads (default: one per hardware thread); at --deterministic strict results do not depend on it");
    const char* limit_help = "Most memory a plan may need, in bytes (suffix K, M or G; default: the available memory)";
    app.add_option("--memory-limit", global.memory_limit, limit_help);
    const char* det_help = "strict | run-to-run | off: what the run promises about its bits; planning refuses kernels "
                           "below it (default: $VOLTA_DETERMINISTIC, else strict)";
    app.add_option("--deterministic", global.deterministic, det_help);
    const char* trace_help = "Write a hash of every executed node's output on every run to FILE (compare two with volta diff-trace)";
    const char* values_help = "With --trace-hashes, also keep every output in FILE.values/ (diff-trace then measures the difference)";
    app.add_option("--trace-hashes", global.trace_hashes, trace_help);
    app.add_flag("--trace-values", global.trace_values, values_help);
    // Global flags are accepted before or after the subcommand.
    for (auto& [sub, action] : commands) {
      sub->add_option("--device", global.device, "cpu | cuda | auto");
      sub->add_option("--threads", global.threads, "CPU threads (default: one per hardware thread)");
      sub->add_option("--memory-limit", global.memory_limit, limit_help);
      sub->add_option("--deterministic", global.deterministic, det_help);
      sub->add_option("--trace-hashes", global.trace_hashes, trace_help);
      sub->add_flag("--trace-values", global.trace_values, values_help);
    }

    check_values(app);

    // The first word that is not a flag must name a subcommand.
    std::string command;
    for (int i = 1; i < argc; ++i) {
      std::string word = argv[i];
      if (word == "--device" || word == "--threads" || word == "--memory-limit" || word == "--deterministic" ||
          word == "--trace-hashes") {
        ++i;
        continue;
      }
      if (word.rfind("-", 0) == 0) continue;
      bool known = false;
      for (auto& [sub, action] : commands) known = known || sub->get_name() == word;
      if (!known) {
        std::fprintf(stderr, "volta: error: unknown command '%s' (commands: %s; see volta --help)\n", word.c_str(), names.c_str());
        return 2;
      }
      command = word;
      break;
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return help_exit(app, e);
    } catch (const CLI::CallForAllHelp& e) {
      return help_exit(app, e);
    } catch (const CLI::CallForVersion& e) {
      return help_exit(app, e);
    } catch (const CLI::ParseError& e) {  // bad usage: one line, like every other error
      const std::string who = command.empty() ? "volta" : "volta " + command;
      std::fprintf(stderr, "%s: error: %s (see %s --help)\n", who.c_str(), one_line(e.what()).c_str(), who.c_str());
      return 2;
    }
    // A global flag given before and after the subcommand: one variable holds both, so the
    // second would silently win (--trace-hashes ta generate ... --trace-hashes tb wrote tb alone).
    // (bench and tune subcommands take some of them again, one level down)
    for (const char* flag : {"--device", "--threads", "--memory-limit", "--deterministic", "--trace-hashes"}) {
      int given = 0;
      for (CLI::App* level = &app; level;) {
        if (const CLI::Option* o = level->get_option_no_throw(flag); o && o->count() > 0) ++given;
        const auto parsed = level->get_subcommands();
        level = parsed.empty() ? nullptr : parsed.front();
      }
      if (given > 1) {
        std::fprintf(stderr, "volta %s: error: %s is given both before and after '%s'; give it once (see volta %s --help)\n",
                     command.c_str(), flag, command.c_str(), command.c_str());
        return 2;
      }
    }
    // A pool past the machine's threads only waits on itself; 100000 failed to start its threads.
    constexpr int kMaxThreads = 1024;
    if (global.threads < 0 || global.threads > kMaxThreads) {
      std::fprintf(stderr, "volta: error: --threads must be in [0, %d], got %d\n", kMaxThreads, global.threads);
      return 2;
    }
    volta::set_cpu_threads(global.threads);
    if (const volta::Status st = volta::start_cpu_threads(global.threads > 0); !st.is_ok()) {
      std::fprintf(stderr, "volta: error: %s\n", one_line(st.message()).c_str());
      return 1;
    }
    if (auto level = volta::determinism_from_flag_or_env(global.deterministic); level.is_ok()) {
      global.determinism = *level;
    } else {
      std::fprintf(stderr, "volta: error: %s\n", one_line(level.status().message()).c_str());
      return 2;
    }
    if (global.trace_values && global.trace_hashes.empty()) {
      std::fprintf(stderr, "volta: error: --trace-values needs --trace-hashes FILE\n");
      return 2;
    }
    if (!global.trace_hashes.empty()) {
      // (HashTrace::create refuses an existing file that is not a trace; nothing is written yet)
      volta::Status ok = volta::io::check_output_path(global.trace_hashes, "--trace-hashes");
      auto trace = ok.is_ok() ? volta::HashTrace::create(global.trace_hashes, global.trace_values)
                              : volta::Result<std::unique_ptr<volta::HashTrace>>(ok);
      if (!trace.is_ok()) {
        std::fprintf(stderr, "volta: error: %s\n", one_line(trace.status().message()).c_str());
        return 1;
      }
      global.trace = std::move(trace).value();
      volta::cli::set_hash_trace_path(global.trace_hashes);
    }
    if (!global.memory_limit.empty()) {
      auto limit = volta::cli::parse_bytes(global.memory_limit, "--memory-limit");
      if (!limit.is_ok() || *limit == 0) {
        std::fprintf(stderr, "volta: error: %s\n",
                     limit.is_ok() ? "--memory-limit must be > 0" : one_line(limit.status().message()).c_str());
        return 2;
      }
      volta::set_memory_limit(*limit);
    }
    for (auto& [sub, action] : commands) {
      if (!sub->parsed()) continue;
      volta::Status s = action();
      // The trace replaces FILE now, also after a failed run (its records up to the failure are
      // what diff-trace compares); the command's own error comes first.
      if (global.trace) {
        volta::Status t = global.trace->finish();
        if (s.is_ok()) s = t;
      }
      // What the command printed must have reached stdout: a full disk or a closed pipe is a
      // failed command, not a silently shortened output.
      if (s.is_ok() && (std::fflush(stdout) != 0 || std::ferror(stdout)))
        s = volta::not_found(std::string("cannot write to stdout: ") + std::strerror(errno));
      if (!s.is_ok()) {
        std::fprintf(stderr, "volta %s: error: %s\n", sub->get_name().c_str(), one_line(s.message()).c_str());
        return 1;
      }
    }
    return 0;
  } catch (const std::bad_alloc&) {  // an allocation outside the paths that report it as a Status
    std::fprintf(stderr, "volta: error: out of memory (try a smaller model or batch, or see --memory-limit)\n");
    return 1;
  } catch (const std::exception& e) {  // last line of defence: never let an exception escape
    std::fprintf(stderr, "volta: internal error: %s\n", one_line(e.what()).c_str());
    return 3;
  }
}
