// TinyLM language-model training: the shakespeare-char recipe, evaluation, and the checkpoint
// contents (model config, tokenizer, params, optimizer state, step, seed, recipe).
#pragma once

#include <string>

#include "model/tinylm.h"
#include "train/text_data.h"
#include "volta/checkpoint.h"
#include "volta/train.h"

namespace volta::train {

struct LMRecipe {
  std::string name = "shakespeare-char";
  model::TinyLMConfig model;
  int64_t batch = 12;
  int64_t steps = 2000;
  int64_t eval_every = 250;
  int64_t eval_iters = 20;
  int64_t save_every = 0;  // 0: at every evaluation
  optim::OptimizerConfig optimizer;
  optim::Schedule schedule;
};

// 4 layers, 4 heads, 128 channels, context 64, batch 12, AdamW lr 1e-3 betas (0.9, 0.99),
// weight decay 0.1 on matrices, 100 warm-up steps, cosine decay to 1e-4 at 2000, clip 1.0.
LMRecipe shakespeare_char();
Status validate(const LMRecipe& r);
std::string recipe_to_json(const LMRecipe& r);
Result<LMRecipe> recipe_from_json(const std::string& text);

// Mean loss over `iters` windows of `data` drawn from (seed, stream, base + i), with the params
// held by a State on rt's backend.
Result<double> evaluate_lm(Runtime& rt, const plan::ExecutionPlan& loss_plan, State& params,
                           const std::vector<int32_t>& data, int64_t batch, int64_t T, uint64_t seed,
                           std::string_view stream, uint64_t base, int64_t iters);

struct LMCheckpoint {
  LMRecipe recipe;
  CharTokenizer tokenizer;
  TrainState state;
  double best_val_loss = 0.0;
};

io::Checkpoint to_checkpoint(const LMCheckpoint& c);
// Checks the metadata and that every tensor matches the model config (names, shapes,
// optimizer state) and names what does not.
Result<LMCheckpoint> from_checkpoint(const io::Checkpoint& c, const std::string& source);
Result<LMCheckpoint> load_lm_checkpoint(const std::string& path);

}  // namespace volta::train
