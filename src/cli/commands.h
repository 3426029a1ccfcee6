// Subcommands of the `volta` CLI. Each registers its flags on a CLI11 subcommand and returns
// a Status; main() prints errors as one line and maps them to the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "cli/pipeline_flags.h"
#include "volta/determinism.h"
#include "volta/onnx.h"
#include "volta/profiler.h"
#include "volta/runtime.h"
#include "volta/trace.h"
#include "volta/status.h"

namespace volta::cli {

struct GlobalFlags {
  std::string device;  // empty: VOLTA_DEVICE or cpu
  int threads = 0;     // CPU threads; 0: one per hardware thread
  std::string memory_limit;  // bytes with optional K/M/G; empty: the available memory
  std::string deterministic;  // --deterministic LEVEL; empty: VOLTA_DETERMINISTIC or strict
  Determinism determinism = Determinism::Strict;  // the level resolved from those, before any command runs
  std::string trace_hashes;  // --trace-hashes FILE: every node's output hash on every run
  bool trace_values = false;  // --trace-values: keep the outputs too (FILE.values/), for diff-trace
  std::shared_ptr<HashTrace> trace;  // opened before any command runs when trace_hashes is set
};

// The runtime a command runs on: the device, the determinism level and the hash trace of `global`.
Result<Runtime> new_runtime(const GlobalFlags& global, DeviceKind device, const ir::Graph* g);

// --profile FILE.json / --profile-summary on commands that run models: attaches a Profiler to
// the runtime and, when the command is done, writes the Chrome trace and prints the table.
struct ProfileFlags {
  std::string trace_path;
  bool summary = false;
  void add_to(CLI::App& cmd);
  bool enabled() const { return summary || !trace_path.empty(); }
  // Before the command runs: the trace may not go to a FIFO or device, nor over a file the
  // command reads or writes (`files`), nor into a directory that does not exist unless the
  // command makes it (`made_dir` or a folder on its way); nor may --trace-hashes (hash_trace_path).
  Status check(const std::vector<std::string>& files, const std::string& made_dir = "") const;
  Status finish(const Profiler& p) const;
};

// The global --trace-hashes FILE (empty: none), set once the flags are parsed, which
// ProfileFlags::check keeps off the command's files.
void set_hash_trace_path(std::string path);

// Not ok once a write to stdout has failed (a closed pipe: SIGPIPE is ignored), so a command
// that prints as it goes stops instead of working on for a reader that is gone.
Status stdout_status();

using Action = std::function<Status()>;

// ONNX models on the CLI (cmd_run.cpp): imports FILE.onnx with the --input NAME=FILE values
// (.pb TensorProto or .npy) and binds the model's inputs from them.
struct OnnxRun {
  onnx::Model model;
  Bindings bindings;
  bool npy = false;  // the inputs were .npy files, so outputs are written as .npy too
};
bool is_onnx_file(const std::string& path);
Result<OnnxRun> import_onnx(const std::string& file, const std::vector<std::string>& input_specs, bool require_all,
                            const std::vector<std::string>& shape_specs = {});

// Timed runs of one plan (bench_model.cpp): the first run apart, then `warmup` untimed runs,
// then `runs` timed ones (the profiler, when given, sees only those).
struct RunTimes {
  double first_ms = 0, median_ms = 0, p90_ms = 0, min_ms = 0;
  std::vector<double> ms;       // the timed runs
  std::vector<Tensor> outputs;  // of the first run
};
Result<RunTimes> time_runs(Runtime& rt, const plan::ExecutionPlan& plan, const Bindings& bindings, int64_t runs, int64_t warmup,
                           Profiler* profiler);
std::string format_run_times(const RunTimes& t);
int64_t peak_rss_bytes();  // of this process so far

struct BenchModelFlags {
  std::string file;
  std::vector<std::string> inputs, shapes;  // as run's --input and inspect's --shape
  int64_t runs = 20, warmup = 3;
  uint64_t seed = 1;
  bool json = false;
  std::string weights = "f32";  // matmul weights' dtype (passes::store_weights_as)
  ProfileFlags profile;
  PipelineFlags pipeline;
};
Status bench_model(const BenchModelFlags& f, const GlobalFlags& global);

// --weights f32 | bf16 | f16: the dtype inference reads matmul weights in; empty: `stored`.
Result<DType> weights_flag(const std::string& flag, DType stored);

Action add_inspect(CLI::App& app, GlobalFlags& global);
Action add_run(CLI::App& app, GlobalFlags& global);
Action add_train(CLI::App& app, GlobalFlags& global);
Action add_generate(CLI::App& app, GlobalFlags& global);
Action add_eval(CLI::App& app, GlobalFlags& global);
Action add_bench(CLI::App& app, GlobalFlags& global);
Action add_tune(CLI::App& app, GlobalFlags& global);
Action add_export(CLI::App& app, GlobalFlags& global);
Action add_diff_trace(CLI::App& app, GlobalFlags& global);

}  // namespace volta::cli
