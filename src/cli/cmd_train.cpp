// `volta train --recipe mlp-spirals | shakespeare-char`: flags to a recipe, a Trainer runs it
// (train/trainer.h), and the command prints its progress and result.
#include <cstdio>

#include "cli/commands.h"
#include "cli/train_lm.h"
#include "train/spirals.h"
#include "volta/train.h"

namespace volta::cli {

namespace {

struct TrainFlags {
  std::string recipe;
  int64_t steps = 300;  // mlp-spirals default
  uint64_t seed = 0;
  std::string log;
  std::string optimizer = "adamw";
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, momentum = 0.0, weight_decay = 0.0, clip = 0.0, min_lr = 0.0;
  int64_t warmup = 0;
  std::string schedule = "constant";
  std::string numerics = "off";
  train::SpiralsConfig spirals;
};

Status train_spirals(const TrainFlags& f, const GlobalFlags& global, const ProfileFlags& profile) {
  VOLTA_RETURN_IF_ERROR(profile.check({f.log}));  // (the log is checked when the trainer opens it)
  train::TrainerOptions opts;
  opts.steps = f.steps;
  opts.log = f.log;
  optim::OptimizerConfig& o = opts.training.optimizer;
  VOLTA_ASSIGN_OR_RETURN(o.kind, optim::parse_kind(f.optimizer));
  o.lr = f.lr;
  o.beta1 = f.beta1;
  o.beta2 = f.beta2;
  o.momentum = f.momentum;
  o.weight_decay = f.weight_decay;
  o.clip_norm = f.clip;
  if (f.schedule == "cosine") {
    opts.training.schedule = {optim::Schedule::Kind::WarmupCosine, f.warmup, f.steps, f.min_lr};
  } else if (f.schedule != "constant") {
    return invalid_argument("--schedule must be constant or cosine, got '" + f.schedule + "'");
  }
  VOLTA_ASSIGN_OR_RETURN(NumericsPolicy numerics, parse_numerics(f.numerics));
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<train::SpiralsTask> task, train::SpiralsTask::create(f.spirals, f.seed));
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &task->forward()));
  rt.set_numerics(numerics);
  Profiler profiler;
  if (profile.enabled()) rt.set_profiler(&profiler);
  VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<train::Trainer> trainer, train::Trainer::start(rt, *task, opts, f.seed));

  std::printf("recipe mlp-spirals: %lld points, %lld classes, hidden %lld, batch %lld, %s, loss %s, %lld steps on %s\n",
              static_cast<long long>(task->data().labels.numel()), static_cast<long long>(f.spirals.classes),
              static_cast<long long>(f.spirals.hidden), static_cast<long long>(f.spirals.batch), f.optimizer.c_str(),
              f.spirals.loss.c_str(), static_cast<long long>(f.steps), trainer->plan().step->backend.c_str());
  std::printf("training step: %s\n%s", plan::format_kernel_summary(*trainer->plan().step).c_str(),
              plan::format_memory_report(trainer->plan().step->memory).c_str());
  const int64_t every = std::max<int64_t>(1, f.steps / 10);
  double first_loss = 0.0, last_loss = 0.0;
  VOLTA_RETURN_IF_ERROR(trainer->run([&](const train::StepReport& s) {
    if (s.step == 1) first_loss = s.stats.loss;
    last_loss = s.stats.loss;
    if (s.step % every == 0 || s.step == f.steps)
      std::printf("step %5lld/%lld  loss %.4f  lr %.3g  grad norm %.3f\n", static_cast<long long>(s.step),
                  static_cast<long long>(f.steps), s.stats.loss, s.stats.lr, s.stats.grad_norm);
    return stdout_status();
  }));
  VOLTA_ASSIGN_OR_RETURN(train::SpiralsTask::Score score, task->score(rt, trainer->session().state()));
  std::printf("loss %.4f -> %.4f; full-data loss %.4f; accuracy %.1f%% on %lld points\n", first_loss, last_loss, score.loss,
              100.0 * score.accuracy, static_cast<long long>(task->data().labels.numel()));
  if (numerics == NumericsPolicy::Check && rt.numerics_report().nonfinite_values > 0)
    std::printf("numerics: %lld non-finite values, first: %s\n", static_cast<long long>(rt.numerics_report().nonfinite_values),
                rt.numerics_report().first.c_str());
  return profile.finish(profiler);
}

}  // namespace

Action add_train(CLI::App& app, GlobalFlags& global) {
  struct Args {
    TrainFlags spirals;
    LMTrainFlags lm;
    CLI::App* cmd = nullptr;
    ProfileFlags profile;
  };
  auto a = std::make_shared<Args>();
  TrainFlags& f = a->spirals;
  train::LMRecipe& r = a->lm.recipe;
  CLI::App* cmd = a->cmd = app.add_subcommand("train", "Train a model from a recipe");
  cmd->add_option("--recipe", f.recipe, "mlp-spirals | shakespeare-char")->required();
  cmd->add_option("--steps", f.steps, "Total optimizer steps (mlp-spirals 300, shakespeare-char 2000)");
  cmd->add_option("--seed", f.seed, "Seed for params, data and batches")->capture_default_str();
  cmd->add_option("--log", f.log, "mlp-spirals: write one JSON line per step (step, train_loss, lr, grad_norm, tokens_per_s, elapsed_s)");
  cmd->add_option("--optimizer", f.optimizer, "sgd | adam | adamw")->capture_default_str();
  cmd->add_option("--lr", f.lr, "Learning rate (mlp-spirals 0.01, shakespeare-char 1e-3)");
  cmd->add_option("--beta1", f.beta1, "Adam beta1 (0.9)");
  cmd->add_option("--beta2", f.beta2, "Adam beta2 (mlp-spirals 0.999, shakespeare-char 0.99)");
  cmd->add_option("--momentum", f.momentum, "SGD momentum (0)");
  cmd->add_option("--weight-decay", f.weight_decay, "Weight decay, decoupled for adamw (mlp-spirals 0, shakespeare-char 0.1 on matrices)");
  cmd->add_option("--clip", f.clip, "Clip gradients to this global L2 norm, 0: off (mlp-spirals 0, shakespeare-char 1)");
  cmd->add_option("--schedule", f.schedule, "mlp-spirals: constant | cosine")->capture_default_str();
  cmd->add_option("--warmup", f.warmup, "Warm-up steps of the cosine schedule (shakespeare-char 100)");
  cmd->add_option("--min-lr", f.min_lr, "Final learning rate of the cosine schedule (shakespeare-char 1e-4)");
  cmd->add_option("--decay-steps", r.schedule.decay_steps, "shakespeare-char: step where the cosine decay ends (2000)");
  cmd->add_option("--numerics", f.numerics, "NaN/Inf policy: off | check | fail-fast")->capture_default_str();
  cmd->add_option("--loss", f.spirals.loss, "mlp-spirals: ce | mse")->capture_default_str();
  cmd->add_option("--hidden", f.spirals.hidden, "mlp-spirals: hidden units")->capture_default_str();
  cmd->add_option("--batch", f.spirals.batch, "Batch size (mlp-spirals 64, shakespeare-char 12)");
  cmd->add_option("--classes", f.spirals.classes, "mlp-spirals: spiral arms")->capture_default_str();
  cmd->add_option("--points", f.spirals.points_per_class, "mlp-spirals: points per arm")->capture_default_str();
  cmd->add_option("--data", a->lm.data, "shakespeare-char: training text")->capture_default_str();
  cmd->add_option("--out", a->lm.out, "shakespeare-char: output folder (log.jsonl, last/best.safetensors)");
  cmd->add_option("--resume", a->lm.resume, "shakespeare-char: continue from a checkpoint up to --steps");
  cmd->add_flag("--overwrite", a->lm.overwrite,
                "shakespeare-char: start over in an --out folder that holds an earlier run's checkpoints (replaced at the first save)");
  cmd->add_option("--eval-every", r.eval_every, "shakespeare-char: evaluate every N steps")->capture_default_str();
  cmd->add_option("--eval-iters", r.eval_iters, "shakespeare-char: validation batches per evaluation")->capture_default_str();
  cmd->add_option("--save-every", r.save_every, "shakespeare-char: write last.safetensors every N steps (default: --eval-every)");
  cmd->add_option("--context", r.model.context, "shakespeare-char: context length")->capture_default_str();
  cmd->add_option("--layers", r.model.layers, "shakespeare-char: transformer blocks")->capture_default_str();
  cmd->add_option("--heads", r.model.heads, "shakespeare-char: attention heads")->capture_default_str();
  cmd->add_option("--channels", r.model.channels, "shakespeare-char: model width")->capture_default_str();
  cmd->add_flag("--bias", a->lm.bias, "shakespeare-char: biases on linear layers and LayerNorms (gpt)");
  cmd->add_option("--arch", a->lm.arch, "shakespeare-char: gpt | llama (RMSNorm, SwiGLU, rope, grouped-query attention)")
      ->capture_default_str();
  cmd->add_option("--kv-heads", r.model.kv_heads, "shakespeare-char, llama: key/value heads (default heads / 2)");
  cmd->add_option("--ffn", r.model.ffn, "shakespeare-char, llama: SwiGLU hidden width (default: a gpt block's weights)");
  cmd->add_option("--rope-theta", r.model.rope_theta, "shakespeare-char, llama: rope base")->capture_default_str();
  a->profile.add_to(*cmd);
  return [a, &global]() -> Status {
    TrainFlags fl = a->spirals;
    auto given = [a](const std::string& flag) { return a->cmd->count(flag) > 0; };
    // A flag of the other recipe (its help names the recipe it is for) is an error, not ignored.
    for (const CLI::Option* o : a->cmd->get_options()) {
      const std::string& help = o->get_description();
      const bool lm_only = help.starts_with("shakespeare-char:") || help.starts_with("shakespeare-char,");
      const bool spirals_only = help.starts_with("mlp-spirals:");
      if (o->count() == 0 || (!lm_only && !spirals_only)) continue;
      if ((lm_only && fl.recipe == "mlp-spirals") || (spirals_only && fl.recipe == "shakespeare-char"))
        return invalid_argument(o->get_name() + " is a " + (lm_only ? "shakespeare-char" : "mlp-spirals") +
                                " flag; --recipe " + fl.recipe + " does not use it");
    }
    if (fl.recipe == "mlp-spirals") {
      if (!given("--batch")) fl.spirals.batch = train::SpiralsConfig{}.batch;
      return train_spirals(fl, global, a->profile);
    }
    if (fl.recipe == "shakespeare-char") {
      LMTrainFlags lm = a->lm;
      train::LMRecipe& rr = lm.recipe;
      lm.seed = fl.seed;
      lm.numerics = fl.numerics;
      if (given("--steps")) rr.steps = fl.steps;
      if (given("--batch")) rr.batch = fl.spirals.batch;
      if (given("--optimizer")) {
        VOLTA_ASSIGN_OR_RETURN(rr.optimizer.kind, optim::parse_kind(fl.optimizer));
      }
      if (given("--lr")) rr.optimizer.lr = fl.lr;
      if (given("--beta1")) rr.optimizer.beta1 = fl.beta1;
      if (given("--beta2")) rr.optimizer.beta2 = fl.beta2;
      if (given("--momentum")) rr.optimizer.momentum = fl.momentum;
      if (given("--weight-decay")) rr.optimizer.weight_decay = fl.weight_decay;
      if (given("--clip")) rr.optimizer.clip_norm = fl.clip;
      if (given("--warmup")) rr.schedule.warmup_steps = fl.warmup;
      if (given("--min-lr")) rr.schedule.min_lr = fl.min_lr;
      return train_lm(lm, given, global, a->profile);
    }
    return invalid_argument("--recipe: unknown recipe '" + fl.recipe + "' (available: mlp-spirals, shakespeare-char)");
  };
}

}  // namespace volta::cli
