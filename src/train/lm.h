// TinyLM language-model training: the shakespeare-char recipe, evaluation, and the checkpoint
// contents (model config, tokenizer, params, optimizer state, step, seed, recipe).
#pragma once

#include <string>

#include "model/tinylm.h"
#include "train/text_data.h"
#include "train/trainer.h"

namespace volta::train {

struct LMRecipe {
  std::string name = "shakespeare-char";
  model::TinyLMConfig model;
  int64_t batch = 12;
  int64_t steps = 2000;
  int64_t eval_every = 250;
  int64_t eval_iters = 20;
  int64_t save_every = 0;  // 0: at every evaluation (LMTask::create sets it so)
  optim::OptimizerConfig optimizer;
  optim::Schedule schedule;
};

// 4 layers, 4 heads, 128 channels, context 64, batch 12, AdamW lr 1e-3 betas (0.9, 0.99),
// weight decay 0.1 on matrices, 100 warm-up steps, cosine decay to 1e-4 at 2000, clip 1.0.
LMRecipe shakespeare_char();
Status validate(const LMRecipe& r);
std::string recipe_to_json(const LMRecipe& r);
Result<LMRecipe> recipe_from_json(const std::string& text);

// TinyLM on a text file, trained by a recipe: the batches of step s are windows of the train
// split drawn by (seed, "train", s); an evaluation after step s averages `eval_iters` windows of
// the val split drawn by (seed, "val", s * eval_iters + i).
class LMTask : public Task {
 public:
  // Validates the recipe; its vocabulary is the data's tokenizer's, and save_every 0 becomes
  // eval_every.
  static Result<std::unique_ptr<LMTask>> create(LMRecipe r, TextData data);

  const ir::Graph& forward() const override { return forward_; }
  int64_t batch_tokens() const override { return r_.batch * r_.model.context; }
  Bindings batch(uint64_t seed, int64_t completed) const override;
  Result<double> validation_loss(Runtime& rt, State& params, uint64_t seed, int64_t completed) override;
  std::map<std::string, std::string> checkpoint_metadata() const override;

  // Mean loss over `iters` windows of `split` drawn from (seed, stream, base + i), with the
  // params held by `params` on rt's backend (`volta eval` and the validation loss).
  Result<double> loss(Runtime& rt, State& params, const std::vector<int32_t>& split, uint64_t seed, std::string_view stream,
                      uint64_t base, int64_t iters);
  // For evaluation only: the forward graph reads its matmul weights as `dtype` (bf16 / f16,
  // passes::store_weights_as). Returns the params whose values the caller narrows to it.
  Result<std::vector<std::string>> store_weights_as(DType dtype);
  // The recipe's steps, cadences, optimizer and schedule, with checkpoints and log.jsonl in `out`.
  TrainerOptions trainer_options(const std::string& out) const;

  const LMRecipe& recipe() const { return r_; }
  const TextData& data() const { return data_; }

 private:
  LMTask(LMRecipe r, TextData data, ir::Graph forward) : r_(std::move(r)), data_(std::move(data)), forward_(std::move(forward)) {}
  LMRecipe r_;
  TextData data_;
  ir::Graph forward_;
  std::shared_ptr<const plan::ExecutionPlan> loss_plan_;  // compiled on first use, for loss_rt_
  const Runtime* loss_rt_ = nullptr;
};

struct LMCheckpoint {
  LMRecipe recipe;
  CharTokenizer tokenizer;
  TrainState state;
  double best_val_loss = 0.0;
};

io::Checkpoint to_checkpoint(const LMCheckpoint& c);
// The dtype the checkpoint's matmul weights are stored in: bf16 or f16 for an inference
// checkpoint written by `volta export --weights`, else f32.
DType stored_weights(const LMCheckpoint& c);
// Checks the metadata and that every tensor matches the model config (names, shapes,
// optimizer state) and names what does not.
Result<LMCheckpoint> from_checkpoint(const io::Checkpoint& c, const std::string& source);
// Also refuses a checkpoint holding a nan or an infinity.
Result<LMCheckpoint> load_lm_checkpoint(const std::string& path);

}  // namespace volta::train
