// First-divergence diagnostics: a hash of every node's output on every run (`--trace-hashes
// FILE`), and the comparison of two such traces that names the first node, run and op whose
// output differs (`volta diff-trace A B`). Together they turn a reproducibility report into the
// one kernel that diverged.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "volta/backend.h"
#include "volta/status.h"

namespace volta {

// Written as JSON lines, one per executed node in schedule order:
//   {"run":0,"graph":"mlp","step":2,"node":"h","op":"relu","type":"f32[8,16]","hash":"fnv1a64:..."}
// `run` counts Runtime::run calls (a training step is one run of the step's plan; evaluation and
// generation add theirs). With `values`, each output's bytes are also kept in FILE.values/, as
// <run>.<step>.bin, so that diff-trace can measure the difference.
//
// FILE is never truncated up front: the records go to FILE.tmp.<pid> and replace FILE when the
// trace finishes (finish(), or the destructor), and only if some run wrote one, so a command that
// fails before running anything leaves an earlier trace as it was. An existing FILE that is not a
// hash trace (a checkpoint, data, a model named by mistake) is refused, at create and at finish;
// a trace whose writes failed stays beside FILE. A character device, a FIFO or a path under /dev
// or /proc (/dev/null, a pipe, /dev/stdout) is opened at create and written directly.
class HashTrace {
 public:
  static Result<std::unique_ptr<HashTrace>> create(const std::string& path, bool values);
  ~HashTrace();
  // A new run of `graph` begins.
  void begin_run(const std::string& graph);
  // Node n's output at schedule step `step`, as host bytes.
  Status record(const ir::Node& n, int64_t step, const std::byte* data, size_t bytes);
  // The records into FILE (see above); later calls do nothing.
  Status finish();

 private:
  HashTrace(std::string path, bool values, bool direct) : path_(std::move(path)), values_(values), direct_(direct) {}
  std::string path_;
  bool values_ = false;
  bool direct_ = false;  // a device or FIFO: written in place
  bool finished_ = false;
  bool failed_ = false;  // a write failed: the records are incomplete
  std::string written_;  // where the records go: FILE.tmp.<pid>, or FILE when direct_; empty until the first
  std::ofstream out_;
  int64_t run_ = -1;
  std::string graph_;
};

// Where two traces first disagree. `same` when they hold the same records with the same hashes.
struct TraceDiff {
  bool same = true;
  int64_t records = 0;  // records compared before the first difference (or in all)
  std::string where;    // "run 3 (graph train_step), step 17, node 'h0.mlp' (matmul), f32[8,64]"
  std::string what;     // "hash fnv1a64:... != fnv1a64:...; max |a - b| = 2.4e-07 at element 5", or the structural difference
  std::optional<double> max_abs_diff;  // when both traces kept the values
};
Result<TraceDiff> diff_traces(const std::string& a, const std::string& b);
// The same on two traces' text (a and b name them in messages; values are looked up beside them).
Result<TraceDiff> diff_trace_texts(std::string_view text_a, std::string_view text_b, const std::string& a, const std::string& b);

}  // namespace volta
