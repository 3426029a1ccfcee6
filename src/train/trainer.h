// The training loop, written once for every recipe and command (`volta train`, `volta bench
// train`): a Task says what is trained (the forward graph, the batch of each step, the
// validation loss, the checkpoint's metadata); the Trainer owns the rest: the compiled step, the
// session's resident state, evaluation on a cadence, best/last checkpoints read back from the
// backend, exact resume, and the JSON-lines log. Callers see one StepReport per step and print.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "io/lock.h"
#include "volta/checkpoint.h"
#include "volta/train.h"

namespace volta::train {

class Task {
 public:
  virtual ~Task() = default;
  // The forward graph; its first output is the loss.
  virtual const ir::Graph& forward() const = 0;
  // What one batch trains on, the unit of the throughput report: tokens for a language model,
  // examples for a classifier.
  virtual int64_t batch_tokens() const = 0;
  // The batch of the step that follows `completed` steps, drawn by (seed, completed): a resumed
  // run draws the batches an unbroken one would.
  virtual Bindings batch(uint64_t seed, int64_t completed) const = 0;
  // The validation loss after `completed` steps, with the params held by `params` on rt's
  // backend. Asked only when TrainerOptions::eval_every > 0.
  virtual Result<double> validation_loss(Runtime& rt, State& params, uint64_t seed, int64_t completed);
  // What a checkpoint of this task carries besides the training state (model config,
  // tokenizer, recipe): what its loader needs.
  virtual std::map<std::string, std::string> checkpoint_metadata() const { return {}; }
};

// The longest run a trainer accepts: more is a typo (or a value the flag parser saturated).
inline constexpr int64_t kMaxSteps = 1000000000;

struct TrainerOptions {
  TrainingOptions training;  // optimizer, schedule, compile options
  int64_t steps = 0;         // train until this many steps are complete
  int64_t eval_every = 0;    // evaluate every N steps and after the last; 0: never
  int64_t save_every = 0;    // write last.safetensors every N steps and after the last; 0: after the last only
  std::string out;           // folder of last.safetensors and best.safetensors (lowest validation loss); empty: none.
                             // Locked (out/.lock) while the trainer lives: a second run into it is refused.
  std::string log;           // JSON-lines log, one line per step; empty: none
  // An earlier run's last/best.safetensors in `out` are replaced only by a resumed run (when
  // resumed_from names its checkpoint: one of them) or when asked (replace); otherwise the
  // trainer refuses to start.
  std::string resumed_from;
  bool replace = false;
};

// Checkpoint files in the `out` folder.
inline constexpr const char* kLastCheckpoint = "last.safetensors";
inline constexpr const char* kBestCheckpoint = "best.safetensors";
inline constexpr const char* kLogFile = "log.jsonl";  // where a recipe's run logs, beside them
// Where a run that replaces an earlier one (TrainerOptions::replace) logs until its first
// checkpoint, when the file takes `log`'s name: the earlier run's log stays until then.
inline std::string replacing_log_path(const std::string& log) { return log + ".new"; }

// A checkpoint of a training state: params, optimizer slots ("optim.m.<param>", ...) and the
// "train_state" metadata {step, seed, best_val_loss}, beside `metadata`. A best validation loss
// that is not finite (no evaluation yet, a diverged run) is written as "inf", "-inf" or "nan".
io::Checkpoint state_checkpoint(const TrainState& s, double best_val_loss, std::map<std::string, std::string> metadata);
// The first param or optimizer slot element that is a nan or an infinity ("param 'wte' element
// 3"), if any: a state Volta neither saves nor loads.
std::optional<std::string> nonfinite_state(const TrainState& s);
// Reads "train_state" into s.step and s.seed and returns the best validation loss (also JSON
// null, which older checkpoints wrote for an infinite one).
Result<double> read_train_state(const std::string& text, TrainState& s);

struct StepReport {
  int64_t step = 0;  // completed steps, this one included
  StepStats stats;
  double seconds = 0.0;  // the step: batch, plan run (evaluation and saving excluded)
  double tokens_per_s = 0.0;
  std::optional<double> val_loss;  // when this step evaluated
  bool new_best = false;           // the validation loss improved (best.safetensors was written)
};

class Trainer {
 public:
  // A new run: params initialised from `seed` (which also draws the batches), zero optimizer
  // state. A log that exists is replaced; checkpoints of an earlier run in o.out only with o.replace,
  // and then at this run's first save: until it, the log is written to o.log + ".new".
  static Result<std::unique_ptr<Trainer>> start(Runtime& rt, Task& task, const TrainerOptions& o, uint64_t seed);
  // Continues a run from a snapshot (a checkpoint's state and best validation loss). The log
  // keeps its lines up to the snapshot's step; the lines after it are written again. Resumed from
  // elsewhere into o.out over an earlier run's checkpoints (o.replace), it replaces that run as
  // start() does, with a log of its own.
  static Result<std::unique_ptr<Trainer>> resume(Runtime& rt, Task& task, const TrainerOptions& o, TrainState snapshot,
                                                 double best_val_loss);

  // One step, then its log line, evaluation and checkpoints as the options schedule them.
  Result<StepReport> step();
  // Steps until options().steps are complete, then makes sure the last checkpoint exists. An
  // error from on_step (its output is gone) ends the run with that error.
  Status run(const std::function<Status(const StepReport&)>& on_step = {});
  // Writes the state as it is now to `path` (read back from the backend once per step).
  Status save(const std::string& path);

  const TrainingPlan& plan() const { return tp_; }
  TrainSession& session() { return *session_; }
  const TrainerOptions& options() const { return o_; }
  double best_val_loss() const { return best_; }
  int64_t first_step() const { return first_step_; }        // completed steps when this trainer started
  double train_seconds() const { return train_seconds_; }   // summed StepReport::seconds

 private:
  Trainer(Runtime& rt, Task& task, const TrainerOptions& o) : rt_(&rt), task_(&task), o_(o) {}
  static Result<std::unique_ptr<Trainer>> make(Runtime& rt, Task& task, const TrainerOptions& o, bool resumed);
  Status begin(TrainState snapshot, double best_val_loss, bool resumed);
  std::string out_path(const char* file) const;
  Status commit_replacement(const std::string& written);

  Runtime* rt_;
  Task* task_;
  TrainerOptions o_;
  std::optional<io::FileLock> lock_;      // of o_.out
  std::optional<io::FileLock> log_lock_;  // of the log file itself: another run's --log there is refused
  TrainingPlan tp_;
  std::optional<TrainSession> session_;
  std::optional<TrainState> saved_;  // the last snapshot read from the backend, reused within a step
  std::ofstream log_;
  std::string log_path_;    // where log_ writes: o.log, or o.log + ".new" until a replacing run's first save
  bool replacing_ = false;  // started over an earlier run's checkpoints (o.replace) and not yet saved
  double best_ = 0.0;
  int64_t first_step_ = 0;
  double train_seconds_ = 0.0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace volta::train
