// `volta eval --checkpoint CKPT --data FILE`: validation loss of a TinyLM checkpoint.
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "model/generate.h"
#include "train/lm.h"

namespace volta::cli {

namespace {
struct EvalFlags {
  std::string checkpoint;
  std::string data = "data/tinyshakespeare.txt";
  int64_t iters = 200;
  uint64_t seed = 0;
  std::string split = "val";
  std::string weights;  // empty: as the checkpoint stores them
};
}  // namespace

Action add_eval(CLI::App& app, GlobalFlags& global) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand("eval", "Print the loss of a TinyLM checkpoint on a text file");
  cmd->add_option("--checkpoint", f->checkpoint, "TinyLM checkpoint (.safetensors)")->required();
  cmd->add_option("--data", f->data, "Text file (split 90/10 as in training)")->capture_default_str();
  cmd->add_option("--eval-iters", f->iters, "Random batches to average")->capture_default_str();
  cmd->add_option("--seed", f->seed, "Seed of the batch draw")->capture_default_str();
  cmd->add_option("--split", f->split, "val | train")->capture_default_str();
  cmd->add_option("--weights", f->weights, "Matmul weights in f32, bf16 or f16 (converted once; f32 arithmetic; default: as stored)");
  return [f, &global]() -> Status {
    if (f->split != "val" && f->split != "train") return invalid_argument("--split must be val or train, got '" + f->split + "'");
    if (f->iters < 1 || f->iters > 100000)
      return invalid_argument("--eval-iters must be in [1, 100000], got " + std::to_string(f->iters));
    VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
    VOLTA_ASSIGN_OR_RETURN(train::LMCheckpoint ck, train::load_lm_checkpoint(f->checkpoint));
    VOLTA_ASSIGN_OR_RETURN(const DType weights, weights_flag(f->weights, train::stored_weights(ck)));
    const train::LMRecipe& r = ck.recipe;
    VOLTA_ASSIGN_OR_RETURN(train::TextData data, train::load_text_data(f->data, r.model.context, &ck.tokenizer));
    VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<train::LMTask> task, train::LMTask::create(r, std::move(data)));
    std::vector<std::string> narrowed;
    if (weights != DType::f32) {
      VOLTA_ASSIGN_OR_RETURN(narrowed, task->store_weights_as(weights));
    }
    ck.state.params = model::params_as(std::move(ck.state.params), narrowed, weights);
    VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &task->forward()));
    State params(rt.backend());  // uploaded once for all the batches
    VOLTA_RETURN_IF_ERROR(params.put_all(ck.state.params, plan::MemClass::Param));
    const auto& split = f->split == "val" ? task->data().val : task->data().train;
    VOLTA_ASSIGN_OR_RETURN(double loss, task->loss(rt, params, split, f->seed, "eval." + f->split, 0, f->iters));
    if (!std::isfinite(loss))  // as generate refuses nan logits: a loss that is not a number is no answer
      return numeric_error("eval: the " + f->split + " loss of '" + f->checkpoint + "' is " + (std::isnan(loss) ? "nan" : "infinite") +
                           ": the model's arithmetic overflows (its weights are finite but too large)");
    std::printf("%s loss %.4f (%lld batches of %lld x %lld, step %lld)\n", f->split.c_str(), loss, static_cast<long long>(f->iters),
                static_cast<long long>(r.batch), static_cast<long long>(r.model.context), static_cast<long long>(ck.state.step));
    return Status::ok();
  };
}

}  // namespace volta::cli
