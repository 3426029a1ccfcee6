#include "cli/train_lm.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <tuple>

namespace volta::cli {

namespace {

void progress(bool tty, int64_t step, int64_t total, double loss, double tok_s) {
  if (!tty) return;
  const int width = 30;
  const int filled = total > 0 ? static_cast<int>(width * step / total) : width;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.4f %.0f tok/s ", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<long long>(step),
               static_cast<long long>(total), loss, tok_s);
  std::fflush(stderr);
}

// "gpt", or "llama (kv heads 2, ffn 384)".
std::string model_summary(const model::TinyLMConfig& c) {
  if (c.arch == model::Arch::Gpt) return "gpt";
  return "llama (kv heads " + std::to_string(c.kv_heads) + ", ffn " + std::to_string(c.ffn) + ")";
}

}  // namespace

Status train_lm(LMTrainFlags f, const std::function<bool(const std::string&)>& given, const GlobalFlags& global,
                const ProfileFlags& profile) {
  if (f.out.empty()) return invalid_argument("--out DIR is required for recipe " + f.recipe.name);
  VOLTA_RETURN_IF_ERROR(profile.check({f.data, f.resume, f.out + "/" + train::kLastCheckpoint, f.out + "/" + train::kBestCheckpoint,
                                       f.out + "/" + train::kLogFile, train::replacing_log_path(f.out + "/" + train::kLogFile)},
                                      f.out));
  VOLTA_ASSIGN_OR_RETURN(NumericsPolicy numerics, parse_numerics(f.numerics));
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  train::LMRecipe& r = f.recipe;
  r.model.bias = f.bias;
  VOLTA_ASSIGN_OR_RETURN(r.model.arch, model::parse_arch(f.arch));
  for (const char* flag : {"--kv-heads", "--ffn", "--rope-theta"})
    if (given(flag) && r.model.arch != model::Arch::Llama) return invalid_argument(std::string(flag) + " needs --arch llama");
  // 0 stands for "derive it" inside a config; given on the command line it is a mistake.
  for (const auto& [flag, value] : {std::pair{"--kv-heads", r.model.kv_heads}, std::pair{"--ffn", r.model.ffn}})
    if (given(flag) && value < 1) return invalid_argument(std::string(flag) + " must be >= 1, got " + std::to_string(value));
  if (r.model.arch == model::Arch::Llama) model::llama_defaults(r.model);

  // Resume: the model, recipe, tokenizer and state come from the checkpoint; only the run's
  // length and its evaluation / saving cadence may change.
  std::optional<train::LMCheckpoint> resumed;
  if (!f.resume.empty()) {
    VOLTA_ASSIGN_OR_RETURN(resumed, train::load_lm_checkpoint(f.resume));
    if (resumed->state.slots.empty()) return invalid_argument("--resume: '" + f.resume + "' holds no optimizer state");
    const train::LMRecipe& saved = resumed->recipe;
    // Settings compared as text: counts as integers, rates in their shortest round-trip form, so
    // two values that differ never print the same (std::to_string's six decimals made 1e-7 and
    // 2e-7 both "0.000000", so a changed --lr passed).
    auto num = [](double v) {
      char buf[32];
      if (v == 0) v = 0;  // -0 is 0
      for (int digits = 1; digits <= 17; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (std::strtod(buf, nullptr) == v) break;
      }
      return std::string(buf);
    };
    auto count = [](auto v) { return std::to_string(v); };
    const std::vector<std::tuple<const char*, std::string, std::string>> fixed = {
        {"--optimizer", optim::kind_name(r.optimizer.kind), optim::kind_name(saved.optimizer.kind)},
        {"--lr", num(r.optimizer.lr), num(saved.optimizer.lr)},
        {"--momentum", num(r.optimizer.momentum), num(saved.optimizer.momentum)},
        {"--min-lr", num(r.schedule.min_lr), num(saved.schedule.min_lr)},
        {"--warmup", count(r.schedule.warmup_steps), count(saved.schedule.warmup_steps)},
        {"--decay-steps", count(r.schedule.decay_steps), count(saved.schedule.decay_steps)},
        {"--beta1", num(r.optimizer.beta1), num(saved.optimizer.beta1)},
        {"--beta2", num(r.optimizer.beta2), num(saved.optimizer.beta2)},
        {"--weight-decay", num(r.optimizer.weight_decay), num(saved.optimizer.weight_decay)},
        {"--clip", num(r.optimizer.clip_norm), num(saved.optimizer.clip_norm)},
        {"--batch", count(r.batch), count(saved.batch)},
        {"--context", count(r.model.context), count(saved.model.context)},
        {"--layers", count(r.model.layers), count(saved.model.layers)},
        {"--heads", count(r.model.heads), count(saved.model.heads)},
        {"--channels", count(r.model.channels), count(saved.model.channels)},
        {"--bias", r.model.bias ? "on" : "off", saved.model.bias ? "on" : "off"},
        {"--arch", model::arch_name(r.model.arch), model::arch_name(saved.model.arch)},
        {"--kv-heads", count(r.model.kv_heads), count(saved.model.kv_heads)},
        {"--ffn", count(r.model.ffn), count(saved.model.ffn)},
        {"--rope-theta", num(r.model.rope_theta), num(saved.model.rope_theta)},
        {"--seed", count(f.seed), count(resumed->state.seed)},
    };
    // A resumed run keeps the checkpoint's hyper-parameters: repeating them is fine, changing them is not.
    for (const auto& [flag, want, have] : fixed)
      if (given(flag) && want != have)
        return invalid_argument(std::string(flag) + " " + want + " differs from the checkpoint's " + have +
                                " (--resume continues with the checkpoint's settings)");
    train::LMRecipe merged = saved;
    merged.steps = r.steps;
    merged.eval_every = given("--eval-every") ? r.eval_every : saved.eval_every;
    merged.eval_iters = given("--eval-iters") ? r.eval_iters : saved.eval_iters;
    merged.save_every = given("--save-every") || given("--eval-every") ? r.save_every : saved.save_every;
    r = merged;
  }

  // Data: the checkpoint's vocabulary when resuming, else one built from the text.
  VOLTA_ASSIGN_OR_RETURN(train::TextData data,
                         train::load_text_data(f.data, r.model.context, resumed ? &resumed->tokenizer : nullptr));
  const size_t train_tokens = data.train.size(), val_tokens = data.val.size();
  VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<train::LMTask> task, train::LMTask::create(r, std::move(data)));
  const train::LMRecipe& rr = task->recipe();

  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &task->forward()));
  rt.set_numerics(numerics);
  Profiler profiler;
  if (profile.enabled()) rt.set_profiler(&profiler);
  train::TrainerOptions opts = task->trainer_options(f.out);
  opts.resumed_from = f.resume;
  opts.replace = f.overwrite;
  std::unique_ptr<train::Trainer> trainer;
  if (resumed) {
    VOLTA_ASSIGN_OR_RETURN(trainer, train::Trainer::resume(rt, *task, opts, std::move(resumed->state), resumed->best_val_loss));
  } else {
    VOLTA_ASSIGN_OR_RETURN(trainer, train::Trainer::start(rt, *task, opts, f.seed));
  }

  int64_t n_params = 0;
  for (const ir::Node& n : task->forward().nodes)
    if (n.op == ir::Op::Param) n_params += n.type.numel();
  std::printf("recipe %s: %lld params (%s, %lld layers, %lld heads, %lld channels, context %lld, vocab %lld), batch %lld, "
              "steps %lld -> %lld on %s\n",
              rr.name.c_str(), static_cast<long long>(n_params), model_summary(rr.model).c_str(), static_cast<long long>(rr.model.layers),
              static_cast<long long>(rr.model.heads), static_cast<long long>(rr.model.channels),
              static_cast<long long>(rr.model.context), static_cast<long long>(rr.model.vocab), static_cast<long long>(rr.batch),
              static_cast<long long>(trainer->first_step()), static_cast<long long>(rr.steps),
              trainer->plan().step->backend.c_str());
  std::printf("data %s: %zu train / %zu val tokens\ntraining step: %s\n%s", f.data.c_str(), train_tokens, val_tokens,
              plan::format_kernel_summary(*trainer->plan().step).c_str(),
              plan::format_memory_report(trainer->plan().step->memory).c_str());
  std::fflush(stdout);

  const bool tty = ::isatty(::fileno(stderr)) != 0;
  VOLTA_RETURN_IF_ERROR(trainer->run([&](const train::StepReport& s) {
    if (s.val_loss) {
      if (tty) std::fprintf(stderr, "\n");
      std::printf("step %5lld/%lld  train loss %.4f  val loss %.4f  lr %.3g  %.0f tok/s\n", static_cast<long long>(s.step),
                  static_cast<long long>(rr.steps), s.stats.loss, *s.val_loss, s.stats.lr, s.tokens_per_s);
      std::fflush(stdout);
    }
    progress(tty, s.step, rr.steps, s.stats.loss, s.tokens_per_s);
    return stdout_status();
  }));
  if (tty) std::fprintf(stderr, "\n");
  const int64_t done = trainer->session().steps();
  std::printf("done: step %lld, best val loss %.4f, %.1f s training (%.1f ms/step); checkpoints in %s\n",
              static_cast<long long>(done), trainer->best_val_loss(), trainer->train_seconds(),
              1000.0 * trainer->train_seconds() / static_cast<double>(std::max<int64_t>(1, done - trainer->first_step())),
              f.out.c_str());
  return profile.finish(profiler);
}

}  // namespace volta::cli
