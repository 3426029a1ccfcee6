// The Trainer: evaluation and checkpoint cadence, exact resume with the log's tail rewritten,
// and write errors that stop the run.
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "test_util.h"
#include "train/lm.h"
#include "train/spirals.h"

namespace volta {
namespace {

// A tiny TinyLM recipe on a synthetic text: 7 steps, evaluation every 3, last checkpoint every 2.
std::unique_ptr<train::LMTask> tiny_task() {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the cat sat on a mat. " + std::to_string(i % 7) + "\n";
  train::LMRecipe r = train::shakespeare_char();
  r.model = {0, 8, 1, 2, 16, false};
  r.batch = 2;
  r.steps = 7;
  r.eval_every = 3;
  r.eval_iters = 2;
  r.save_every = 2;
  r.schedule = {optim::Schedule::Kind::WarmupCosine, 2, 7, 1e-4};
  auto data = train::split_text(text, train::CharTokenizer::from_text(text), r.model.context, "text");
  EXPECT_TRUE(data.is_ok()) << data.status().message();
  auto task = train::LMTask::create(r, std::move(*data));
  EXPECT_TRUE(task.is_ok()) << task.status().message();
  return std::move(*task);
}

std::string temp_dir(const std::string& name) {
  std::string d = ::testing::TempDir() + "trainer_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

// The log without its timings, which differ run to run.
std::vector<nlohmann::ordered_json> log_lines(const std::string& path) {
  std::istringstream in(test::read_file(path));
  std::vector<nlohmann::ordered_json> out;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::ordered_json::parse(line);
    j.erase("tokens_per_s");
    j.erase("elapsed_s");
    out.push_back(j);
  }
  return out;
}

TEST(Trainer, EvaluatesSavesAndLogsOnItsCadence) {
  auto task = tiny_task();
  const std::string dir = temp_dir("cadence");
  ASSERT_OK_AND_ASSIGN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  ASSERT_OK_AND_ASSIGN(auto trainer, train::Trainer::start(rt, *task, task->trainer_options(dir), 3));
  std::vector<train::StepReport> reports;
  ASSERT_OK(trainer->run([&](const train::StepReport& r) {
    reports.push_back(r);
    return Status::ok();
  }));
  ASSERT_EQ(reports.size(), 7u);
  double best = 1e9;
  int64_t best_step = 0;
  for (const train::StepReport& r : reports) {
    EXPECT_EQ(r.val_loss.has_value(), r.step == 3 || r.step == 6 || r.step == 7) << r.step;
    if (!r.val_loss) continue;
    EXPECT_EQ(r.new_best, *r.val_loss < best) << r.step;
    if (*r.val_loss < best) best = *r.val_loss, best_step = r.step;
  }
  EXPECT_EQ(trainer->best_val_loss(), best);

  // The log: one line per step, with the step's stats and its validation loss where it had one.
  const auto lines = log_lines(dir + "/log.jsonl");
  ASSERT_EQ(lines.size(), 7u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["step"], reports[i].step);
    EXPECT_EQ(lines[i]["train_loss"].get<double>(), reports[i].stats.loss);
    EXPECT_EQ(lines[i]["grad_norm"].get<double>(), reports[i].stats.grad_norm);
    EXPECT_EQ(lines[i].contains("val_loss"), reports[i].val_loss.has_value());
  }

  // best.safetensors holds the state of the best evaluation, last.safetensors the final state.
  ASSERT_OK_AND_ASSIGN(train::LMCheckpoint last, train::load_lm_checkpoint(dir + "/last.safetensors"));
  ASSERT_OK_AND_ASSIGN(train::LMCheckpoint bestck, train::load_lm_checkpoint(dir + "/best.safetensors"));
  EXPECT_EQ(last.state.step, 7);
  EXPECT_EQ(bestck.state.step, best_step);
  EXPECT_EQ(bestck.best_val_loss, best);
  ASSERT_OK_AND_ASSIGN(train::TrainState now, trainer->session().snapshot());
  EXPECT_TRUE(last.state.bitwise_equal(now));
  std::filesystem::remove_all(dir);
}

TEST(Trainer, ResumeAfterAKillContinuesBitForBitAndRewritesTheLogTail) {
  auto task = tiny_task();
  const std::string straight = temp_dir("straight"), killed = temp_dir("killed");
  ASSERT_OK_AND_ASSIGN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  {
    ASSERT_OK_AND_ASSIGN(auto t, train::Trainer::start(rt, *task, task->trainer_options(straight), 5));
    ASSERT_OK(t->run());
  }
  {
    // Killed after step 5: last.safetensors is from step 4, the log has a line past it.
    ASSERT_OK_AND_ASSIGN(auto t, train::Trainer::start(rt, *task, task->trainer_options(killed), 5));
    for (int i = 0; i < 5; ++i) ASSERT_OK(t->step().status());
  }
  ASSERT_EQ(log_lines(killed + "/log.jsonl").size(), 5u);
  ASSERT_OK_AND_ASSIGN(train::LMCheckpoint ck, train::load_lm_checkpoint(killed + "/last.safetensors"));
  ASSERT_EQ(ck.state.step, 4);
  ASSERT_OK_AND_ASSIGN(Runtime rt2, Runtime::create(DeviceKind::Cpu));
  {
    ASSERT_OK_AND_ASSIGN(auto t, train::Trainer::resume(rt2, *task, task->trainer_options(killed), std::move(ck.state),
                                                        ck.best_val_loss));
    EXPECT_EQ(t->first_step(), 4);
    ASSERT_OK(t->run());
  }
  for (const char* file : {"last.safetensors", "best.safetensors"})
    EXPECT_EQ(test::read_file(straight + "/" + file), test::read_file(killed + "/" + file)) << file;
  EXPECT_EQ(log_lines(straight + "/log.jsonl"), log_lines(killed + "/log.jsonl"));

  // Resuming a finished run trains nothing and leaves the same last checkpoint.
  std::filesystem::remove(killed + "/last.safetensors");
  ASSERT_OK_AND_ASSIGN(train::LMCheckpoint done, train::load_lm_checkpoint(straight + "/last.safetensors"));
  ASSERT_OK_AND_ASSIGN(auto again, train::Trainer::resume(rt2, *task, task->trainer_options(killed), done.state, done.best_val_loss));
  int steps = 0;
  ASSERT_OK(again->run([&](const train::StepReport&) {
    ++steps;
    return Status::ok();
  }));
  EXPECT_EQ(steps, 0);
  EXPECT_EQ(test::read_file(straight + "/last.safetensors"), test::read_file(killed + "/last.safetensors"));

  // A snapshot past the run's length is refused.
  train::TrainerOptions shorter = task->trainer_options(killed);
  shorter.steps = 3;
  EXPECT_ERROR_CONTAINS(train::Trainer::resume(rt2, *task, shorter, done.state, done.best_val_loss),
                        "--steps 3 is below the checkpoint's step 7");
  std::filesystem::remove_all(straight);
  std::filesystem::remove_all(killed);
}

TEST(Trainer, ASecondRunIntoTheSameFolderIsRefusedWhileTheFirstLives) {
  auto task = tiny_task();
  const std::string dir = temp_dir("lock");
  ASSERT_OK_AND_ASSIGN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  {
    ASSERT_OK_AND_ASSIGN(auto first, train::Trainer::start(rt, *task, task->trainer_options(dir), 1));
    EXPECT_ERROR_CONTAINS(train::Trainer::start(rt, *task, task->trainer_options(dir), 1), "another run is writing here");
    ASSERT_OK(first->step().status());
  }
  // Released with the first trainer (and by the kernel when a process dies).
  ASSERT_OK_AND_ASSIGN(auto second, train::Trainer::start(rt, *task, task->trainer_options(dir), 1));
  std::filesystem::remove_all(dir);
}

TEST(Trainer, CheckpointsWithoutAFiniteBestLossLoad) {
  auto task = tiny_task();
  const std::string dir = temp_dir("inf");
  ASSERT_OK_AND_ASSIGN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  ASSERT_OK_AND_ASSIGN(auto t, train::Trainer::start(rt, *task, task->trainer_options(dir), 1));
  ASSERT_OK(t->step().status());
  ASSERT_OK(t->save(dir + "/early.safetensors"));  // before the first evaluation: best is +inf
  ASSERT_OK_AND_ASSIGN(train::LMCheckpoint ck, train::load_lm_checkpoint(dir + "/early.safetensors"));
  EXPECT_EQ(ck.best_val_loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(ck.state.step, 1);
  for (const auto& [text, want] : std::vector<std::pair<std::string, double>>{
           {"\"-inf\"", -std::numeric_limits<double>::infinity()}, {"null", std::numeric_limits<double>::infinity()}, {"1.5", 1.5}}) {
    train::TrainState s;
    ASSERT_OK_AND_ASSIGN(double best, train::read_train_state(R"({"step":3,"seed":2,"best_val_loss":)" + text + "}", s));
    EXPECT_EQ(best, want) << text;
    EXPECT_EQ(s.step, 3);
  }
  train::TrainState s;
  ASSERT_OK_AND_ASSIGN(double nan, train::read_train_state(R"({"step":3,"seed":2,"best_val_loss":"nan"})", s));
  EXPECT_TRUE(std::isnan(nan));
  EXPECT_ERROR_CONTAINS(train::read_train_state(R"({"step":3,"seed":2,"best_val_loss":"big"})", s), "neither a number");
  EXPECT_ERROR_CONTAINS(train::read_train_state(R"({"step":-1,"seed":2,"best_val_loss":1})", s), "step is negative");
  std::filesystem::remove_all(dir);
}

TEST(Trainer, WriteErrorsStopTheRun) {
  auto task = tiny_task();
  ASSERT_OK_AND_ASSIGN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  train::TrainerOptions o = task->trainer_options("");
  o.log = "/dev/full";  // every write fails with ENOSPC
  ASSERT_OK_AND_ASSIGN(auto t, train::Trainer::start(rt, *task, o, 1));
  EXPECT_ERROR_CONTAINS(t->step(), "cannot write log '/dev/full'");
  o.log = "/no/such/dir/log.jsonl";
  EXPECT_ERROR_CONTAINS(train::Trainer::start(rt, *task, o, 1), "cannot write log '/no/such/dir/log.jsonl'");
  o = task->trainer_options("/proc/volta_no_such_dir");
  EXPECT_ERROR_CONTAINS(train::Trainer::start(rt, *task, o, 1), "--out: cannot create '/proc/volta_no_such_dir'");
}

TEST(Trainer, ATaskWithoutValidationTrainsAndEvaluationIsRefused) {
  train::SpiralsConfig c;
  c.points_per_class = 20;
  c.batch = 8;
  ASSERT_OK_AND_ASSIGN(auto task, train::SpiralsTask::create(c, 1));
  ASSERT_OK_AND_ASSIGN(Runtime rt, Runtime::create(DeviceKind::Cpu));
  train::TrainerOptions o;
  o.steps = 3;
  ASSERT_OK_AND_ASSIGN(auto t, train::Trainer::start(rt, *task, o, 1));
  ASSERT_OK(t->run());
  EXPECT_EQ(t->session().steps(), 3);
  ASSERT_OK_AND_ASSIGN(train::SpiralsTask::Score s, task->score(rt, t->session().state()));
  EXPECT_GE(s.accuracy, 0.0);
  EXPECT_LE(s.accuracy, 1.0);
  o.eval_every = 2;
  ASSERT_OK_AND_ASSIGN(auto e, train::Trainer::start(rt, *task, o, 1));
  ASSERT_OK(e->step().status());
  EXPECT_ERROR_CONTAINS(e->step(), "this task has no validation set");
}

}  // namespace
}  // namespace volta
