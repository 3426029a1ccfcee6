#include "train/lm.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "volta/passes.h"

namespace volta::train {

using nlohmann::json;

LMRecipe shakespeare_char() {
  LMRecipe r;
  r.optimizer.kind = optim::Kind::AdamW;
  r.optimizer.lr = 1e-3;
  r.optimizer.beta1 = 0.9;
  r.optimizer.beta2 = 0.99;
  r.optimizer.weight_decay = 0.1;
  r.optimizer.decay_matrices_only = true;
  r.optimizer.clip_norm = 1.0;
  r.schedule = {optim::Schedule::Kind::WarmupCosine, 100, 2000, 1e-4};
  return r;
}

Status validate(const LMRecipe& r) {
  VOLTA_RETURN_IF_ERROR(model::validate(r.model));
  if (r.batch < 1 || r.batch > 65536) return invalid_argument("--batch must be in [1, 65536], got " + std::to_string(r.batch));
  if (r.steps < 0 || r.steps > kMaxSteps) return invalid_argument("--steps must be in [0, 10^9], got " + std::to_string(r.steps));
  if (r.eval_every < 1) return invalid_argument("--eval-every must be >= 1, got " + std::to_string(r.eval_every));
  if (r.eval_iters < 1 || r.eval_iters > 100000)
    return invalid_argument("--eval-iters must be in [1, 100000], got " + std::to_string(r.eval_iters));
  if (r.save_every < 0) return invalid_argument("--save-every must be >= 0, got " + std::to_string(r.save_every));
  VOLTA_RETURN_IF_ERROR(optim::validate(r.optimizer));
  return optim::validate(r.schedule, r.optimizer.lr);
}

std::string recipe_to_json(const LMRecipe& r) {
  const optim::OptimizerConfig& o = r.optimizer;
  json j = {{"name", r.name},
            {"batch", r.batch},
            {"steps", r.steps},
            {"eval_every", r.eval_every},
            {"eval_iters", r.eval_iters},
            {"save_every", r.save_every},
            {"optimizer",
             {{"kind", optim::kind_name(o.kind)}, {"lr", o.lr}, {"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps},
              {"momentum", o.momentum}, {"weight_decay", o.weight_decay}, {"decay_matrices_only", o.decay_matrices_only},
              {"clip_norm", o.clip_norm}}},
            {"schedule",
             {{"kind", r.schedule.kind == optim::Schedule::Kind::Constant ? "constant" : "warmup_cosine"},
              {"warmup_steps", r.schedule.warmup_steps}, {"decay_steps", r.schedule.decay_steps}, {"min_lr", r.schedule.min_lr}}}};
  return j.dump();
}

namespace {

// Typed field access without exceptions.
template <typename T>
Status read(const json& j, const char* key, T& out) {
  if (!j.is_object() || !j.contains(key)) return parse_error(std::string("recipe has no '") + key + "'");
  const json& v = j[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return parse_error(std::string("recipe '") + key + "' is not a boolean");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return parse_error(std::string("recipe '") + key + "' is not an integer");
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return parse_error(std::string("recipe '") + key + "' is not a number");
  } else {
    if (!v.is_string()) return parse_error(std::string("recipe '") + key + "' is not a string");
  }
  out = v.get<T>();
  return Status::ok();
}

}  // namespace

Result<LMRecipe> recipe_from_json(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return parse_error("recipe is not a JSON object");
  LMRecipe r;
  VOLTA_RETURN_IF_ERROR(read(j, "name", r.name));
  VOLTA_RETURN_IF_ERROR(read(j, "batch", r.batch));
  VOLTA_RETURN_IF_ERROR(read(j, "steps", r.steps));
  VOLTA_RETURN_IF_ERROR(read(j, "eval_every", r.eval_every));
  VOLTA_RETURN_IF_ERROR(read(j, "eval_iters", r.eval_iters));
  VOLTA_RETURN_IF_ERROR(read(j, "save_every", r.save_every));
  if (!j.contains("optimizer") || !j.contains("schedule")) return parse_error("recipe has no optimizer or schedule");
  const json& o = j["optimizer"];
  std::string kind;
  VOLTA_RETURN_IF_ERROR(read(o, "kind", kind));
  VOLTA_ASSIGN_OR_RETURN(r.optimizer.kind, optim::parse_kind(kind));
  VOLTA_RETURN_IF_ERROR(read(o, "lr", r.optimizer.lr));
  VOLTA_RETURN_IF_ERROR(read(o, "beta1", r.optimizer.beta1));
  VOLTA_RETURN_IF_ERROR(read(o, "beta2", r.optimizer.beta2));
  VOLTA_RETURN_IF_ERROR(read(o, "eps", r.optimizer.eps));
  VOLTA_RETURN_IF_ERROR(read(o, "momentum", r.optimizer.momentum));
  VOLTA_RETURN_IF_ERROR(read(o, "weight_decay", r.optimizer.weight_decay));
  VOLTA_RETURN_IF_ERROR(read(o, "decay_matrices_only", r.optimizer.decay_matrices_only));
  VOLTA_RETURN_IF_ERROR(read(o, "clip_norm", r.optimizer.clip_norm));
  const json& s = j["schedule"];
  std::string skind;
  VOLTA_RETURN_IF_ERROR(read(s, "kind", skind));
  if (skind != "constant" && skind != "warmup_cosine") return parse_error("recipe schedule kind '" + skind + "' is unknown");
  r.schedule.kind = skind == "constant" ? optim::Schedule::Kind::Constant : optim::Schedule::Kind::WarmupCosine;
  VOLTA_RETURN_IF_ERROR(read(s, "warmup_steps", r.schedule.warmup_steps));
  VOLTA_RETURN_IF_ERROR(read(s, "decay_steps", r.schedule.decay_steps));
  VOLTA_RETURN_IF_ERROR(read(s, "min_lr", r.schedule.min_lr));
  return r;
}

Result<std::unique_ptr<LMTask>> LMTask::create(LMRecipe r, TextData data) {
  r.model.vocab = data.tokenizer.vocab_size();
  if (r.save_every == 0) r.save_every = r.eval_every;
  VOLTA_RETURN_IF_ERROR(validate(r));
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, model::build_tinylm_loss(r.model, r.batch, r.model.context));
  return std::unique_ptr<LMTask>(new LMTask(std::move(r), std::move(data), std::move(g)));
}

Bindings LMTask::batch(uint64_t seed, int64_t completed) const {
  return lm_batch(data_.train, r_.batch, r_.model.context, seed, "train", static_cast<uint64_t>(completed));
}

Result<double> LMTask::validation_loss(Runtime& rt, State& params, uint64_t seed, int64_t completed) {
  return loss(rt, params, data_.val, seed, "val", static_cast<uint64_t>(completed) * static_cast<uint64_t>(r_.eval_iters),
              r_.eval_iters);
}

Result<double> LMTask::loss(Runtime& rt, State& params, const std::vector<int32_t>& split, uint64_t seed, std::string_view stream,
                            uint64_t base, int64_t iters) {
  if (!loss_plan_ || loss_rt_ != &rt) {
    VOLTA_ASSIGN_OR_RETURN(loss_plan_, rt.compile(forward_));
    loss_rt_ = &rt;
  }
  double total = 0.0;
  for (int64_t i = 0; i < iters; ++i) {
    Bindings b = lm_batch(split, r_.batch, r_.model.context, seed, stream, base + static_cast<uint64_t>(i));
    VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt.run(*loss_plan_, b, &params));
    total += out[0].data<float>()[0];
  }
  return total / static_cast<double>(iters);
}

Result<std::vector<std::string>> LMTask::store_weights_as(DType dtype) {
  std::vector<std::string> names;
  VOLTA_ASSIGN_OR_RETURN(forward_, passes::store_weights_as(forward_, dtype, &names));
  loss_plan_.reset();
  loss_rt_ = nullptr;
  return names;
}

namespace {
// What a TinyLM checkpoint carries besides the training state.
std::map<std::string, std::string> lm_metadata(const LMRecipe& r, const CharTokenizer& tok) {
  return {{"model_config", model::config_to_json(r.model)}, {"tokenizer", tok.to_json()}, {"recipe", recipe_to_json(r)}};
}
}  // namespace

std::map<std::string, std::string> LMTask::checkpoint_metadata() const { return lm_metadata(r_, data_.tokenizer); }

TrainerOptions LMTask::trainer_options(const std::string& out) const {
  TrainerOptions o;
  o.training.optimizer = r_.optimizer;
  o.training.schedule = r_.schedule;
  o.steps = r_.steps;
  o.eval_every = r_.eval_every;
  o.save_every = r_.save_every;
  o.out = out;
  if (!out.empty()) o.log = (std::filesystem::path(out) / kLogFile).string();
  return o;
}

io::Checkpoint to_checkpoint(const LMCheckpoint& c) {
  return state_checkpoint(c.state, c.best_val_loss, lm_metadata(c.recipe, c.tokenizer));
}

Result<LMCheckpoint> from_checkpoint(const io::Checkpoint& c, const std::string& source) {
  auto meta = [&](const char* key) -> Result<std::string> {
    auto it = c.metadata.find(key);
    if (it == c.metadata.end()) return parse_error(source + ": metadata has no '" + key + "'");
    return it->second;
  };
  auto tag = [&](const Status& s) { return Status(s.code(), source + ": " + s.message()); };
  LMCheckpoint out;
  VOLTA_ASSIGN_OR_RETURN(std::string config_text, meta("model_config"));
  auto config = model::config_from_json(config_text);
  if (!config.is_ok()) return tag(config.status());
  VOLTA_ASSIGN_OR_RETURN(std::string recipe_text, meta("recipe"));
  auto recipe = recipe_from_json(recipe_text);
  if (!recipe.is_ok()) return tag(recipe.status());
  out.recipe = *recipe;
  out.recipe.model = *config;
  VOLTA_ASSIGN_OR_RETURN(std::string tok_text, meta("tokenizer"));
  auto tok = CharTokenizer::from_json(tok_text);
  if (!tok.is_ok()) return tag(tok.status());
  out.tokenizer = *tok;
  if (out.tokenizer.vocab_size() != config->vocab)
    return parse_error(source + ": tokenizer has " + std::to_string(out.tokenizer.vocab_size()) + " characters but the model vocab is " +
                       std::to_string(config->vocab));
  VOLTA_ASSIGN_OR_RETURN(std::string state_text, meta("train_state"));
  auto st = read_train_state(state_text, out.state);
  if (!st.is_ok()) return tag(st.status());
  out.best_val_loss = *st;
  // The recipe is checked like flags: a resumed run, eval and generate trust it.
  if (Status s = validate(out.recipe); !s.is_ok()) return parse_error(source + ": recipe: " + s.message());

  // Every param of the config, with its shape; optimizer state for all or none of them.
  auto g = model::build_tinylm_loss(*config, 1, 1);
  if (!g.is_ok()) return tag(g.status());
  size_t expected = 0;
  bool has_moments = c.tensors.count(slot_name(0, "wte")) != 0;
  for (const ir::Node& n : g->nodes) {
    if (n.op != ir::Op::Param) continue;
    auto it = c.tensors.find(n.name);
    if (it == c.tensors.end()) return parse_error(source + ": tensor '" + n.name + "' of the model is missing");
    // Matmul weights may be stored in bf16 / f16 (`volta export --weights`): an inference
    // checkpoint, without optimizer state.
    const TensorType& t = it->second.type();
    if (t != n.type && !(is_half(t.dtype) && t.shape == n.type.shape && n.type.shape.size() >= 2))
      return parse_error(source + ": tensor '" + n.name + "' is " + t.to_string() + " but the model config needs " +
                         n.type.to_string());
    if (is_half(t.dtype) && has_moments)
      return parse_error(source + ": tensor '" + n.name + "' is " + t.to_string() + " but the checkpoint holds optimizer state "
                         "(weights in bf16 / f16 are for inference; training checkpoints are f32)");
    out.state.params.emplace(n.name, it->second);
    ++expected;
    if (!has_moments) continue;
    for (int k = 0; k < 2; ++k) {
      auto m = c.tensors.find(slot_name(k, n.name));
      if (m == c.tensors.end() || m->second.type() != n.type)
        return parse_error(source + ": optimizer state '" + slot_name(k, n.name) + "' is missing or not " + n.type.to_string());
      out.state.slots[n.name].push_back(m->second);
      ++expected;
    }
  }
  if (expected != c.tensors.size())
    return parse_error(source + ": holds " + std::to_string(c.tensors.size()) + " tensors but the model config accounts for " +
                       std::to_string(expected));
  return out;
}

DType stored_weights(const LMCheckpoint& c) {
  for (const auto& [name, t] : c.state.params)
    if (is_half(t.dtype())) return t.dtype();
  return DType::f32;
}

Result<LMCheckpoint> load_lm_checkpoint(const std::string& path) {
  VOLTA_ASSIGN_OR_RETURN(io::Checkpoint c, io::load_checkpoint(path));
  VOLTA_ASSIGN_OR_RETURN(LMCheckpoint ck, from_checkpoint(c, path));
  // Volta refuses to save a diverged run (and to export weights that overflow their dtype), so a
  // model that only gives nan is not run, resumed or exported.
  if (auto where = nonfinite_state(ck.state))
    return invalid_argument(path + ": " + *where + " is nan or inf: a diverged or damaged model (Volta refuses to save one)");
  return ck;
}

}  // namespace volta::train
