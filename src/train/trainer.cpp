#include "train/trainer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/file.h"

namespace volta::train {

namespace {

using Clock = std::chrono::steady_clock;

// Keeps the lines of an existing log up to `step` (a resumed run writes what follows again).
// Writes the lines of the log at `path` up to `step` to `to` (the same file: cut in place).
Status truncate_log(const std::string& path, int64_t step, const std::string& to) {
  auto text = io::read_file(path, {uint64_t{1} << 32, "log"});
  if (!text.is_ok() && text.status().code() == StatusCode::kNotFound) text = std::string();
  if (!text.is_ok()) return text.status();
  std::istringstream in(*text);
  std::string line, kept;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    if (j["step"].get<int64_t>() <= step) kept += line + "\n";
  }
  // Replaced whole: a run interrupted here leaves the earlier log, not an empty one.
  const Status st = io::write_output(to, kept);
  return st.is_ok() ? st : Status(st.code(), "cannot rewrite log: " + st.message());
}

// An exclusive lock on the regular file `path` (created if missing), so that two runs never
// write one log (both ran, interleaving their lines, or truncating the other's); none for a
// device, a FIFO or a path under /dev/ or /proc/.
Result<std::optional<io::FileLock>> lock_log(const std::string& path) {
  if (io::is_stream_path(path)) return std::optional<io::FileLock>();  // /dev/stdout into a shared redirect file
  VOLTA_ASSIGN_OR_RETURN(const std::string target, io::link_target(path));
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return std::optional<io::FileLock>();
  auto lock = io::FileLock::acquire(target);
  if (!lock.is_ok() && lock.status().code() != StatusCode::kUnavailable) return std::optional<io::FileLock>();  // the open names it
  if (!lock.is_ok()) return Status(lock.status().code(), "--log: " + lock.status().message());
  return std::optional<io::FileLock>(std::move(*lock));
}

}  // namespace

Result<double> Task::validation_loss(Runtime&, State&, uint64_t, int64_t) {
  return unimplemented("this task has no validation set");
}

io::Checkpoint state_checkpoint(const TrainState& s, double best_val_loss, std::map<std::string, std::string> metadata) {
  io::Checkpoint out;
  out.metadata = std::move(metadata);
  nlohmann::json best = best_val_loss;
  if (!std::isfinite(best_val_loss)) best = std::isnan(best_val_loss) ? "nan" : best_val_loss > 0 ? "inf" : "-inf";
  nlohmann::json state = {{"step", s.step}, {"seed", s.seed}, {"best_val_loss", best}};
  out.metadata["train_state"] = state.dump();
  for (const auto& [name, t] : s.params) out.tensors.emplace(name, t);
  for (const auto& [name, slots] : s.slots)
    for (size_t k = 0; k < slots.size() && k < 2; ++k) out.tensors.emplace(slot_name(static_cast<int>(k), name), slots[k]);
  return out;
}

Result<double> read_train_state(const std::string& text, TrainState& s) {
  const nlohmann::json st = nlohmann::json::parse(text, nullptr, false);
  if (st.is_discarded() || !st.is_object() || !st.contains("step") || !st["step"].is_number_integer() || !st.contains("seed") ||
      !st["seed"].is_number_unsigned() || !st.contains("best_val_loss"))
    return parse_error("train_state is not {step, seed, best_val_loss}");
  s.step = st["step"].get<int64_t>();
  s.seed = st["seed"].get<uint64_t>();
  if (s.step < 0) return parse_error("train_state step is negative");
  const nlohmann::json& b = st["best_val_loss"];
  if (b.is_number()) return b.get<double>();
  if (b.is_null() || b == "inf") return std::numeric_limits<double>::infinity();
  if (b == "-inf") return -std::numeric_limits<double>::infinity();
  if (b == "nan") return std::numeric_limits<double>::quiet_NaN();
  return parse_error("train_state best_val_loss is neither a number nor \"inf\", \"-inf\" or \"nan\"");
}

namespace {

// Whether this run resumes from the checkpoint at `path`.
bool resumes_from(const TrainerOptions& o, const std::filesystem::path& path) {
  std::error_code ec;
  return !o.resumed_from.empty() && std::filesystem::equivalent(o.resumed_from, path, ec);
}

// Whether the checkpoint `later` exists and holds a later step than `earlier` (or either's step
// cannot be read from its header).
bool goes_past(const std::filesystem::path& later, const std::filesystem::path& earlier) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(later, ec))) return false;
  const auto step = [](const std::filesystem::path& p) -> std::optional<int64_t> {
    auto meta = io::load_checkpoint_metadata(p.string());
    if (!meta.is_ok() || !meta->count("train_state")) return std::nullopt;
    TrainState s;
    if (!read_train_state(meta->at("train_state"), s).is_ok()) return std::nullopt;
    return s.step;
  };
  const auto a = step(later), b = step(earlier);
  return !a || !b || *a > *b;
}

// The checkpoint of an earlier run that o.out holds (last before best), unless this run resumes
// from its last checkpoint (continuing that run; or from its best when no last goes past it):
// empty when there is none. A resume from the best behind a last would roll the run back: its
// log cut to the best's step and its last replaced by another trajectory's; that last counts.
std::string earlier_run_checkpoint(const TrainerOptions& o) {
  const std::filesystem::path dir(o.out);
  std::error_code ec;
  if (resumes_from(o, dir / kLastCheckpoint) ||
      (resumes_from(o, dir / kBestCheckpoint) && !goes_past(dir / kLastCheckpoint, dir / kBestCheckpoint)))
    return "";
  for (const char* name : {kLastCheckpoint, kBestCheckpoint})
    if (std::filesystem::exists(std::filesystem::symlink_status(dir / name, ec))) return name;
  return "";
}

// Refuses to start over an earlier run's checkpoints: a second `train --out DIR` without
// --resume would replace a finished run's last and best checkpoints at its first save.
// `name`: earlier_run_checkpoint(o).
Status check_earlier_run(const TrainerOptions& o, bool resumed, const std::string& name) {
  if (o.replace || (resumed && o.resumed_from.empty()) || name.empty()) return Status::ok();
  const std::string path = (std::filesystem::path(o.out) / name).string();
  if (resumes_from(o, std::filesystem::path(o.out) / kBestCheckpoint))
    return invalid_argument("--resume " + o.resumed_from + ": the run in --out " + o.out + " goes on past its best, to " + path +
                            "; resuming from the best would cut its log and replace that checkpoint: continue with --resume " +
                            path + ", or start over from the best with --overwrite");
  return invalid_argument("--out " + o.out + ": holds " + name + " of an earlier run; continue it with --resume " + path +
                          ", or start over in it with --overwrite (its checkpoints are replaced)");
}

}  // namespace

Result<std::unique_ptr<Trainer>> Trainer::make(Runtime& rt, Task& task, const TrainerOptions& o, bool resumed) {
  if (o.steps < 0 || o.steps > kMaxSteps) return invalid_argument("--steps must be in [0, 10^9], got " + std::to_string(o.steps));
  if (o.eval_every < 0) return invalid_argument("--eval-every must be >= 0, got " + std::to_string(o.eval_every));
  if (o.save_every < 0) return invalid_argument("--save-every must be >= 0, got " + std::to_string(o.save_every));
  std::unique_ptr<Trainer> t(new Trainer(rt, task, o));
  if (!o.out.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) return not_found("--out: cannot create '" + o.out + "': " + ec.message());
    auto lock = io::FileLock::acquire(t->out_path(".lock"));
    if (!lock.is_ok()) return Status(lock.status().code(), "--out " + o.out + ": " + lock.status().message());
    t->lock_.emplace(std::move(*lock));
    if (::access(o.out.c_str(), W_OK | X_OK) != 0)  // checkpoints are new files here: known now, not at the first save
      return not_found("--out: cannot write into '" + o.out + "': " + std::strerror(errno));
    const std::string earlier = earlier_run_checkpoint(o);  // under the lock: no other run writes them now
    VOLTA_RETURN_IF_ERROR(check_earlier_run(o, resumed, earlier));
    t->replacing_ = o.replace && !earlier.empty();  // a new run, or one resumed from elsewhere
    for (const char* name : {kLastCheckpoint, kBestCheckpoint})  // a folder in its place fails now, not at the first save
      VOLTA_RETURN_IF_ERROR(io::check_output_path(t->out_path(name), "--out", {}, io::Writes::Checkpoint));
  }
  VOLTA_ASSIGN_OR_RETURN(t->tp_, compile_training(rt, task.forward(), o.training));
  return t;
}

Result<std::unique_ptr<Trainer>> Trainer::start(Runtime& rt, Task& task, const TrainerOptions& o, uint64_t seed) {
  VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> t, make(rt, task, o, false));
  VOLTA_ASSIGN_OR_RETURN(Bindings init, init_params(task.forward(), seed));
  VOLTA_ASSIGN_OR_RETURN(TrainState s, init_state(t->tp_, std::move(init), seed));
  VOLTA_RETURN_IF_ERROR(t->begin(std::move(s), std::numeric_limits<double>::infinity(), false));
  return t;
}

Result<std::unique_ptr<Trainer>> Trainer::resume(Runtime& rt, Task& task, const TrainerOptions& o, TrainState snapshot,
                                                 double best_val_loss) {
  if (snapshot.step > o.steps)
    return invalid_argument("--steps " + std::to_string(o.steps) + " is below the checkpoint's step " + std::to_string(snapshot.step));
  VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<Trainer> t, make(rt, task, o, true));
  VOLTA_RETURN_IF_ERROR(t->begin(std::move(snapshot), best_val_loss, true));
  return t;
}

Status Trainer::begin(TrainState snapshot, double best_val_loss, bool resumed) {
  VOLTA_ASSIGN_OR_RETURN(TrainSession s, TrainSession::start(*rt_, tp_, snapshot));
  session_.emplace(std::move(s));
  saved_ = std::move(snapshot);
  best_ = best_val_loss;
  first_step_ = session_->steps();
  if (!o_.log.empty()) {
    VOLTA_RETURN_IF_ERROR(io::check_output_path(o_.log, "log", {}, io::Writes::Json));
    // Replacing an earlier run: its log stays until this run's first checkpoint replaces its
    // checkpoints (commit_replacement), so a run that fails before then leaves the earlier run's
    // files as they were. A resume continues its own log, up to its step.
    // A run resumed from this folder's best over a later last (--overwrite) keeps the log's lines
    // up to its step in its own log too.
    const bool own = resumed && resumes_from(o_, out_path(kBestCheckpoint));
    const bool append = resumed && (!replacing_ || own);
    log_path_ = replacing_ ? replacing_log_path(o_.log) : o_.log;
    if (replacing_) VOLTA_RETURN_IF_ERROR(io::check_output_path(log_path_, "log", {}, io::Writes::Json));
    if (append) {  // the log's earlier lines are rewritten under its lock, then the new file is locked
      VOLTA_ASSIGN_OR_RETURN(log_lock_, lock_log(o_.log));
      VOLTA_RETURN_IF_ERROR(truncate_log(o_.log, first_step_, log_path_));
    }
    VOLTA_ASSIGN_OR_RETURN(log_lock_, lock_log(log_path_));
    log_.open(log_path_, append ? std::ios::app : std::ios::trunc);
    if (!log_) return not_found("cannot write log '" + log_path_ + "'");
  }
  started_ = Clock::now();
  return Status::ok();
}

std::string Trainer::out_path(const char* file) const { return (std::filesystem::path(o_.out) / file).string(); }

namespace {

// The first element of `t` that is a nan or an infinity, else -1 (f32, bf16 and f16: the dtypes
// a checkpoint's float tensors have).
int64_t first_nonfinite(const Tensor& t) {
  if (t.dtype() == DType::f32) {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(t.data<float>()[i])) return i;
  } else if (is_half(t.dtype())) {  // all exponent bits set
    const int shift = t.dtype() == DType::bf16 ? 7 : 10;
    const unsigned mask = t.dtype() == DType::bf16 ? 0xff : 0x1f;
    for (int64_t i = 0; i < t.numel(); ++i)
      if (((t.data<uint16_t>()[i] >> shift) & mask) == mask) return i;
  }
  return -1;
}

}  // namespace

std::optional<std::string> nonfinite_state(const TrainState& s) {
  for (const auto& [name, t] : s.params)
    if (const int64_t i = first_nonfinite(t); i >= 0) return "param '" + name + "' element " + std::to_string(i);
  for (const auto& [name, slots] : s.slots)
    for (const Tensor& t : slots)
      if (const int64_t i = first_nonfinite(t); i >= 0) return "the optimizer state of '" + name + "' element " + std::to_string(i);
  return std::nullopt;
}

Status Trainer::save(const std::string& path) {
  if (!saved_ || saved_->step != session_->steps()) {
    VOLTA_ASSIGN_OR_RETURN(TrainState s, session_->snapshot());
    saved_ = std::move(s);
  }
  if (auto which = nonfinite_state(*saved_))  // a diverged run would replace a good checkpoint
    return numeric_error("step " + std::to_string(saved_->step) + ": " + *which +
                         " holds nan or inf (the run diverged: try a lower --lr, or --clip); '" + path + "' was not written");
  std::map<std::string, std::string> metadata = task_->checkpoint_metadata();
  metadata["determinism"] = determinism_name(rt_->determinism());  // the level its steps were planned for
  VOLTA_RETURN_IF_ERROR(io::save_checkpoint(state_checkpoint(*saved_, best_, std::move(metadata)), path));
  return replacing_ ? commit_replacement(path) : Status::ok();
}

// This run's first checkpoint is written: the earlier run's other checkpoint goes (a best of the
// earlier run beside this run's last would pass for this run's) unless this run resumed from it,
// and this run's log takes the earlier one's name.
Status Trainer::commit_replacement(const std::string& written) {
  replacing_ = false;
  std::error_code ec;
  for (const char* name : {kLastCheckpoint, kBestCheckpoint}) {
    const std::string other = out_path(name);
    // (the best this run resumed from stays: it is this run's best so far)
    if (other == written || resumes_from(o_, other)) continue;
    if (!std::filesystem::remove(other, ec) && ec)
      return not_found("--overwrite: cannot remove the earlier run's '" + other + "': " + ec.message());
  }
  if (!o_.log.empty()) {  // the open stream follows its file to the new name
    std::filesystem::rename(log_path_, o_.log, ec);
    if (ec) return not_found("--overwrite: cannot rename '" + log_path_ + "' to '" + o_.log + "': " + ec.message());
    log_path_ = o_.log;
  }
  return Status::ok();
}

Result<StepReport> Trainer::step() {
  StepReport r;
  const auto t0 = Clock::now();
  const Bindings batch = task_->batch(session_->seed(), session_->steps());
  VOLTA_ASSIGN_OR_RETURN(r.stats, session_->step(batch));
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.tokens_per_s = static_cast<double>(task_->batch_tokens()) / r.seconds;
  train_seconds_ += r.seconds;
  r.step = session_->steps();
  const bool last = r.step == o_.steps;
  if (o_.eval_every > 0 && (r.step % o_.eval_every == 0 || last)) {
    VOLTA_ASSIGN_OR_RETURN(double val, task_->validation_loss(*rt_, session_->state(), session_->seed(), r.step));
    r.val_loss = val;
    if (val < best_) {
      best_ = val;
      r.new_best = true;
      if (!o_.out.empty()) VOLTA_RETURN_IF_ERROR(save(out_path(kBestCheckpoint)));
    }
  }
  if (log_.is_open()) {
    nlohmann::ordered_json line = {{"step", r.step}, {"train_loss", r.stats.loss}, {"lr", r.stats.lr}, {"grad_norm", r.stats.grad_norm}};
    if (r.val_loss) line["val_loss"] = *r.val_loss;
    line["determinism"] = determinism_name(rt_->determinism());
    line["tokens_per_s"] = r.tokens_per_s;
    line["elapsed_s"] = std::chrono::duration<double>(Clock::now() - started_).count();
    log_ << line.dump() << "\n";
    if (!log_.flush()) return not_found("cannot write log '" + log_path_ + "' (disk full?)");
  }
  if (!o_.out.empty() && ((o_.save_every > 0 && r.step % o_.save_every == 0) || last))
    VOLTA_RETURN_IF_ERROR(save(out_path(kLastCheckpoint)));
  return r;
}

Status Trainer::run(const std::function<Status(const StepReport&)>& on_step) {
  while (session_->steps() < o_.steps) {
    VOLTA_ASSIGN_OR_RETURN(StepReport r, step());
    if (on_step) VOLTA_RETURN_IF_ERROR(on_step(r));  // (it may stop the run: its output is gone)
  }
  // A run resumed at its last step writes no step, but still leaves its last checkpoint.
  if (!o_.out.empty() && session_->steps() == o_.steps && (replacing_ || !std::filesystem::exists(out_path(kLastCheckpoint))))
    return save(out_path(kLastCheckpoint));
  return Status::ok();
}

}  // namespace volta::train
