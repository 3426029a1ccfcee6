// `volta generate --checkpoint CKPT`: text from a TinyLM checkpoint. Only the generated text
// (prompt + continuation; samples separated by a blank line) goes to stdout.
#include <cstdio>

#include "cli/commands.h"
#include "model/generate.h"
#include "train/lm.h"

namespace volta::cli {

Result<DType> weights_flag(const std::string& flag, DType stored) {
  if (flag.empty()) return stored;
  if (flag == "f32") return DType::f32;
  if (flag == "bf16") return DType::bf16;
  if (flag == "f16") return DType::f16;
  return invalid_argument("--weights must be f32, bf16 or f16, got '" + flag + "'");
}

namespace {
struct GenerateFlags {
  std::string checkpoint;
  std::string prompt = "\n";
  bool no_kv_cache = false;
  std::string weights;  // empty: as the checkpoint stores them
  model::SampleOptions sample;
  ProfileFlags profile;
};
}  // namespace

Action add_generate(CLI::App& app, GlobalFlags& global) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a TinyLM checkpoint");
  cmd->add_option("--checkpoint", f->checkpoint, "TinyLM checkpoint (.safetensors)")->required();
  cmd->add_option("--prompt", f->prompt, "Text to continue (default: a newline)");
  cmd->add_option("--tokens", f->sample.tokens, "New tokens per sample")->capture_default_str();
  cmd->add_option("--temperature", f->sample.temperature, "Sampling temperature; 0 is greedy")->capture_default_str();
  cmd->add_option("--top-k", f->sample.top_k, "Sample from the k most likely tokens (0: all)")->capture_default_str();
  cmd->add_option("--top-p", f->sample.top_p, "Sample from the smallest set holding this probability mass")->capture_default_str();
  cmd->add_option("--seed", f->sample.seed, "Sampling seed (same seed, same text)")->capture_default_str();
  cmd->add_option("--batch", f->sample.batch, "Independent samples of the prompt")->capture_default_str();
  cmd->add_flag("--no-kv-cache", f->no_kv_cache, "Recompute the whole window for every token");
  cmd->add_option("--keep", f->sample.keep,
                  "Tokens a full context keeps when it moves on (0: half the context; the context: slide by one token)")
      ->capture_default_str();
  cmd->add_option("--weights", f->weights, "Matmul weights in f32, bf16 or f16 (converted once; f32 arithmetic; default: as stored)");
  f->profile.add_to(*cmd);
  return [f, &global]() -> Status {
    VOLTA_RETURN_IF_ERROR(f->profile.check({f->checkpoint}));
    VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
    VOLTA_ASSIGN_OR_RETURN(train::LMCheckpoint ck, train::load_lm_checkpoint(f->checkpoint));
    VOLTA_ASSIGN_OR_RETURN(const DType weights, weights_flag(f->weights, train::stored_weights(ck)));
    const model::TinyLMConfig& c = ck.recipe.model;
    model::SampleOptions o = f->sample;
    o.kv_cache = !f->no_kv_cache;
    VOLTA_RETURN_IF_ERROR(model::validate(o, c.vocab));
    auto ids = ck.tokenizer.encode(f->prompt);
    if (!ids.is_ok()) return invalid_argument("--prompt: " + ids.status().message());
    std::vector<int32_t> prompt = *ids;
    if (prompt.empty()) return invalid_argument("--prompt is empty");
    if (static_cast<int64_t>(prompt.size()) > c.context) {
      std::fprintf(stderr, "note: the prompt has %zu characters; the model sees only the last %lld (its context)\n", prompt.size(),
                   static_cast<long long>(c.context));
      prompt.erase(prompt.begin(), prompt.end() - c.context);
    }
    VOLTA_ASSIGN_OR_RETURN(ir::Graph step, model::build_tinylm_decode(c, o.batch));  // what --device auto must run
    VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &step));
    Profiler profiler;
    if (f->profile.enabled()) rt.set_profiler(&profiler);
    VOLTA_ASSIGN_OR_RETURN(model::Generator gen, model::Generator::create(rt, c, ck.state.params, weights));
    VOLTA_ASSIGN_OR_RETURN(auto samples, gen.generate(prompt, o));
    // Byte-exact: the vocabulary may hold NUL, so no C-string writes.
    const std::string shown = ck.tokenizer.decode(prompt);
    std::string text;
    for (size_t b = 0; b < samples.size(); ++b) text += (b ? "\n\n" : "") + shown + ck.tokenizer.decode(samples[b]);
    text += "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return f->profile.finish(profiler);
  };
}

}  // namespace volta::cli
