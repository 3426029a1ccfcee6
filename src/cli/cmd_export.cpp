// `volta export --checkpoint CKPT --onnx OUT.onnx`: a TinyLM checkpoint as an ONNX model that
// maps tokens int32 [batch, seq] to logits float [batch, seq, vocab] at every position. The
// model carries the checkpoint's model config and tokenizer as metadata.
// `volta export --checkpoint CKPT --safetensors OUT [--weights bf16|f16]`: an inference
// checkpoint: the params without optimizer state, the matmul weights in the asked dtype (BF16 /
// F16 tensors any safetensors reader opens); generate, eval and bench read it.
#include <cstdio>

#include "cli/commands.h"
#include "io/file.h"
#include "model/generate.h"
#include "train/lm.h"

namespace volta::cli {

namespace {
struct ExportFlags {
  std::string checkpoint;
  std::string onnx;
  std::string safetensors;
  std::string weights;  // --safetensors: empty keeps the checkpoint's
  int64_t batch = 1;
  int64_t seq = 0;  // when --seq is not given: the model's context
};
Status export_safetensors(const ExportFlags& f) {
  VOLTA_RETURN_IF_ERROR(io::check_output_path(f.safetensors, "--safetensors", {f.checkpoint}, io::Writes::Checkpoint));
  VOLTA_RETURN_IF_ERROR(io::check_parent_dir(f.safetensors, "--safetensors"));
  VOLTA_ASSIGN_OR_RETURN(train::LMCheckpoint ck, train::load_lm_checkpoint(f.checkpoint));
  VOLTA_ASSIGN_OR_RETURN(const DType weights, weights_flag(f.weights, train::stored_weights(ck)));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<std::string> matmul, model::matmul_weights(ck.recipe.model));
  ck.state.params = model::params_as(std::move(ck.state.params), matmul, weights);
  if (auto where = train::nonfinite_state(ck.state))  // a weight past the dtype's largest value (f16: 65504)
    return invalid_argument("--weights " + std::string(dtype_name(weights)) + ": " + *where + " does not fit " + dtype_name(weights) +
                            " (it overflows to infinity); '" + f.safetensors + "' was not written");
  size_t bytes = 0;
  for (const auto& [name, t] : ck.state.params) bytes += t.bytes();
  ck.state.slots.clear();
  VOLTA_RETURN_IF_ERROR(io::save_checkpoint(train::to_checkpoint(ck), f.safetensors));
  std::printf("wrote %s: %zu params, %zu bytes, matmul weights %s, no optimizer state\n", f.safetensors.c_str(),
              ck.state.params.size(), bytes, dtype_name(weights));
  return Status::ok();
}

}  // namespace

Action add_export(CLI::App& app, GlobalFlags&) {
  auto f = std::make_shared<ExportFlags>();
  CLI::App* cmd = app.add_subcommand("export", "Write a TinyLM checkpoint as an ONNX model (tokens -> logits) or an inference checkpoint");
  cmd->add_option("--checkpoint", f->checkpoint, "TinyLM checkpoint (.safetensors)")->required();
  cmd->add_option("--onnx", f->onnx, "ONNX file to write");
  cmd->add_option("--safetensors", f->safetensors, "Inference checkpoint to write (no optimizer state)");
  cmd->add_option("--weights", f->weights, "--safetensors: matmul weights in f32, bf16 or f16 (default: as stored)");
  cmd->add_option("--batch", f->batch, "Batch size of the model's tokens input")->capture_default_str();
  CLI::Option* seq_flag = cmd->add_option("--seq", f->seq, "Sequence length of the tokens input (default: the model's context)");
  return [f, seq_flag]() -> Status {
    if (f->onnx.empty() == f->safetensors.empty()) return invalid_argument("export needs one of --onnx FILE and --safetensors FILE");
    if (!f->safetensors.empty()) return export_safetensors(*f);
    if (!f->weights.empty()) return invalid_argument("--weights applies to --safetensors (the ONNX model is f32)");
    VOLTA_RETURN_IF_ERROR(io::check_output_path(f->onnx, "--onnx", {f->checkpoint}, io::Writes::Onnx));
    VOLTA_RETURN_IF_ERROR(io::check_parent_dir(f->onnx, "--onnx"));
    VOLTA_ASSIGN_OR_RETURN(train::LMCheckpoint ck, train::load_lm_checkpoint(f->checkpoint));
    ck.state.params = model::params_as(std::move(ck.state.params), {}, DType::f32);  // the ONNX model is f32
    const model::TinyLMConfig& c = ck.recipe.model;
    const int64_t seq = seq_flag->count() > 0 ? f->seq : c.context;  // a given 0 is refused below, not the default
    if (f->batch < 1 || f->batch > 4096) return invalid_argument("--batch must be in [1, 4096], got " + std::to_string(f->batch));
    if (seq < 1 || seq > c.context)
      return invalid_argument("--seq must be in [1, " + std::to_string(c.context) + "] (the model's context), got " + std::to_string(seq));
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, model::build_tinylm_logits(c, f->batch, seq));
    onnx::ExportOptions o;
    o.doc = "TinyLM exported by Volta from " + f->checkpoint + ": tokens int32 [batch, seq] -> logits [batch, seq, vocab]";
    o.metadata["volta.model_config"] = model::config_to_json(c);
    o.metadata["volta.tokenizer"] = ck.tokenizer.to_json();
    VOLTA_RETURN_IF_ERROR(onnx::save_model(f->onnx, g, ck.state.params, o));
    std::printf("wrote %s: tokens int32 [%lld, %lld] -> logits [%lld, %lld, %lld], ONNX opset %lld\n", f->onnx.c_str(),
                static_cast<long long>(f->batch), static_cast<long long>(seq), static_cast<long long>(f->batch),
                static_cast<long long>(seq), static_cast<long long>(c.vocab), static_cast<long long>(onnx::kExportOpset));
    return Status::ok();
  };
}

}  // namespace volta::cli
