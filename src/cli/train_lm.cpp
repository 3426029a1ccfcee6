#include "cli/train_lm.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

namespace volta::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Keeps the lines of an existing log up to `step` (a resumed run rewrites what follows).
Status truncate_log(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return Status::ok();
  std::string line, kept;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    if (j["step"].get<int64_t>() <= step) kept += line + "\n";
  }
  in.close();
  std::ofstream out(path, std::ios::trunc);
  if (!out || !(out << kept)) return not_found("cannot rewrite log '" + path + "'");
  return Status::ok();
}

void progress(bool tty, int64_t step, int64_t total, double loss, double tok_s) {
  if (!tty) return;
  const int width = 30;
  const int filled = total > 0 ? static_cast<int>(width * step / total) : width;
  std::fprintf(stderr, "\r[%s%s] %lld/%lld loss %.4f %.0f tok/s ", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<long long>(step),
               static_cast<long long>(total), loss, tok_s);
  std::fflush(stderr);
}

}  // namespace

Status train_lm(LMTrainFlags f, const std::function<bool(const std::string&)>& given, const GlobalFlags& global,
                const ProfileFlags& profile) {
  if (f.out.empty()) return invalid_argument("--out DIR is required for recipe " + f.recipe.name);
  VOLTA_ASSIGN_OR_RETURN(NumericsPolicy numerics, parse_numerics(f.numerics));
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  train::LMRecipe& r = f.recipe;
  r.model.bias = f.bias;
  if (r.save_every == 0) r.save_every = r.eval_every;

  // Resume: the model, recipe, tokenizer and state come from the checkpoint; only the run's
  // length and its evaluation / saving cadence may change.
  std::optional<train::LMCheckpoint> resumed;
  if (!f.resume.empty()) {
    VOLTA_ASSIGN_OR_RETURN(resumed, train::load_lm_checkpoint(f.resume));
    if (resumed->state.slots.empty()) return invalid_argument("--resume: '" + f.resume + "' holds no optimizer state");
    const train::LMRecipe& saved = resumed->recipe;
    auto num = [](double v) { return std::to_string(v); };
    const std::vector<std::tuple<const char*, std::string, std::string>> fixed = {
        {"--lr", num(r.optimizer.lr), num(saved.optimizer.lr)},
        {"--min-lr", num(r.schedule.min_lr), num(saved.schedule.min_lr)},
        {"--warmup", num(static_cast<double>(r.schedule.warmup_steps)), num(static_cast<double>(saved.schedule.warmup_steps))},
        {"--decay-steps", num(static_cast<double>(r.schedule.decay_steps)), num(static_cast<double>(saved.schedule.decay_steps))},
        {"--beta1", num(r.optimizer.beta1), num(saved.optimizer.beta1)},
        {"--beta2", num(r.optimizer.beta2), num(saved.optimizer.beta2)},
        {"--weight-decay", num(r.optimizer.weight_decay), num(saved.optimizer.weight_decay)},
        {"--clip", num(r.optimizer.clip_norm), num(saved.optimizer.clip_norm)},
        {"--batch", num(static_cast<double>(r.batch)), num(static_cast<double>(saved.batch))},
        {"--context", num(static_cast<double>(r.model.context)), num(static_cast<double>(saved.model.context))},
        {"--layers", num(static_cast<double>(r.model.layers)), num(static_cast<double>(saved.model.layers))},
        {"--heads", num(static_cast<double>(r.model.heads)), num(static_cast<double>(saved.model.heads))},
        {"--channels", num(static_cast<double>(r.model.channels)), num(static_cast<double>(saved.model.channels))},
        {"--bias", r.model.bias ? "on" : "off", saved.model.bias ? "on" : "off"},
        {"--seed", num(static_cast<double>(f.seed)), num(static_cast<double>(resumed->state.seed))},
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
    if (resumed->state.step > r.steps)
      return invalid_argument("--steps " + std::to_string(r.steps) + " is below the checkpoint's step " + std::to_string(resumed->state.step));
  }

  // Data: the checkpoint's vocabulary when resuming, else one built from the text.
  VOLTA_ASSIGN_OR_RETURN(train::TextData data,
                         train::load_text_data(f.data, r.model.context, resumed ? &resumed->tokenizer : nullptr));
  r.model.vocab = data.tokenizer.vocab_size();
  VOLTA_RETURN_IF_ERROR(train::validate(r));

  std::error_code ec;
  std::filesystem::create_directories(f.out, ec);
  if (ec) return not_found("--out: cannot create '" + f.out + "': " + ec.message());
  const std::string log_path = (std::filesystem::path(f.out) / "log.jsonl").string();
  const std::string last_path = (std::filesystem::path(f.out) / "last.safetensors").string();
  const std::string best_path = (std::filesystem::path(f.out) / "best.safetensors").string();

  const int64_t T = r.model.context;
  VOLTA_ASSIGN_OR_RETURN(ir::Graph model, model::build_tinylm_loss(r.model, r.batch, T));
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, Runtime::create(device, &model));
  rt.set_numerics(numerics);
  Profiler profiler;
  if (profile.enabled()) rt.set_profiler(&profiler);
  train::TrainingOptions opts;
  opts.optimizer = r.optimizer;
  opts.schedule = r.schedule;
  VOLTA_ASSIGN_OR_RETURN(train::TrainingPlan tp, train::compile_training(rt, model, opts));
  VOLTA_ASSIGN_OR_RETURN(auto eval_plan, rt.compile(model));

  train::LMCheckpoint ck;
  ck.recipe = r;
  ck.tokenizer = data.tokenizer;
  ck.best_val_loss = std::numeric_limits<double>::infinity();
  if (resumed) {
    ck.state = std::move(resumed->state);
    ck.best_val_loss = resumed->best_val_loss;
    VOLTA_RETURN_IF_ERROR(truncate_log(log_path, ck.state.step));
  } else {
    VOLTA_ASSIGN_OR_RETURN(Bindings init, init_params(model, f.seed));
    VOLTA_ASSIGN_OR_RETURN(ck.state, train::init_state(tp, std::move(init), f.seed));
  }
  VOLTA_ASSIGN_OR_RETURN(train::TrainSession session, train::TrainSession::start(rt, tp, ck.state));
  // Checkpoints read the state back from the backend, once per step however many are saved.
  auto save = [&](const std::string& path) -> Status {
    if (ck.state.step != session.steps()) {
      VOLTA_ASSIGN_OR_RETURN(ck.state, session.snapshot());
    }
    return io::save_checkpoint(train::to_checkpoint(ck), path);
  };
  std::ofstream log(log_path, resumed ? std::ios::app : std::ios::trunc);
  if (!log) return not_found("cannot write log '" + log_path + "'");

  int64_t n_params = 0;
  for (const auto& [name, t] : ck.state.params) n_params += t.numel();
  std::printf("recipe %s: %lld params (%lld layers, %lld heads, %lld channels, context %lld, vocab %lld), batch %lld, "
              "steps %lld -> %lld on %s\n",
              r.name.c_str(), static_cast<long long>(n_params), static_cast<long long>(r.model.layers),
              static_cast<long long>(r.model.heads), static_cast<long long>(r.model.channels), static_cast<long long>(T),
              static_cast<long long>(r.model.vocab), static_cast<long long>(r.batch), static_cast<long long>(ck.state.step),
              static_cast<long long>(r.steps), tp.step->backend.c_str());
  std::printf("data %s: %zu train / %zu val tokens\n%s", f.data.c_str(), data.train.size(), data.val.size(),
              plan::format_memory_report(tp.step->memory).c_str());
  std::fflush(stdout);

  const bool tty = ::isatty(::fileno(stderr)) != 0;
  const auto start = Clock::now();
  double train_seconds = 0.0;
  const int64_t first_step = session.steps();
  const int64_t tokens_per_step = r.batch * T;
  while (session.steps() < r.steps) {
    const auto t0 = Clock::now();
    Bindings batch = train::lm_batch(data.train, r.batch, T, session.seed(), "train", static_cast<uint64_t>(session.steps()));
    VOLTA_ASSIGN_OR_RETURN(train::StepStats st, session.step(batch));
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    train_seconds += dt;
    const int64_t step = session.steps();
    nlohmann::ordered_json line = {{"step", step}, {"train_loss", st.loss}, {"lr", st.lr}};
    const bool eval_now = step % r.eval_every == 0 || step == r.steps;
    if (eval_now) {
      VOLTA_ASSIGN_OR_RETURN(double val, train::evaluate_lm(rt, *eval_plan, session.state(), data.val, r.batch, T, session.seed(), "val",
                                                            static_cast<uint64_t>(step) * static_cast<uint64_t>(r.eval_iters), r.eval_iters));
      line["val_loss"] = val;
      if (val < ck.best_val_loss) {
        ck.best_val_loss = val;
        VOLTA_RETURN_IF_ERROR(save(best_path));
      }
      if (tty) std::fprintf(stderr, "\n");
      std::printf("step %5lld/%lld  train loss %.4f  val loss %.4f  lr %.3g  %.0f tok/s\n", static_cast<long long>(step),
                  static_cast<long long>(r.steps), st.loss, val, st.lr, static_cast<double>(tokens_per_step) / dt);
      std::fflush(stdout);
    }
    line["tokens_per_s"] = static_cast<double>(tokens_per_step) / dt;
    line["elapsed_s"] = std::chrono::duration<double>(Clock::now() - start).count();
    log << line.dump() << "\n";
    log.flush();
    if (step % r.save_every == 0 || step == r.steps) VOLTA_RETURN_IF_ERROR(save(last_path));
    progress(tty, step, r.steps, st.loss, static_cast<double>(tokens_per_step) / dt);
  }
  if (tty) std::fprintf(stderr, "\n");
  if (session.steps() == r.steps && !std::filesystem::exists(last_path)) VOLTA_RETURN_IF_ERROR(save(last_path));
  std::printf("done: step %lld, best val loss %.4f, %.1f s training (%.1f ms/step); checkpoints in %s\n",
              static_cast<long long>(session.steps()), ck.best_val_loss, train_seconds,
              1000.0 * train_seconds / static_cast<double>(std::max<int64_t>(1, session.steps() - first_step)), f.out.c_str());
  return profile.finish(profiler);
}

}  // namespace volta::cli
