// `volta inspect FILE.vir`: the verified graph after the pipeline, its schedule and memory plan.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/pipeline_flags.h"
#include "model/generate.h"
#include "train/lm.h"
#include "volta/text.h"

namespace volta::cli {

namespace {
constexpr int64_t kShownConstantValues = 16;  // longer constants (imported weights) are elided
struct InspectFlags {
  std::string file;
  bool json = false;
  std::vector<std::string> inputs;  // ONNX: values of inputs that feed shape operands
  std::vector<std::string> shapes;  // ONNX: NAME=DIMS for inputs with dynamic dims
  PipelineFlags pipeline;
};
// A TinyLM checkpoint: config, params, and the training and inference memory plans.
Status inspect_checkpoint(const InspectFlags& f, const GlobalFlags& global, const CompileOptions& opts) {
  VOLTA_ASSIGN_OR_RETURN(train::LMCheckpoint ck, train::load_lm_checkpoint(f.file));
  const train::LMRecipe& r = ck.recipe;
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, model::build_tinylm_loss(r.model, r.batch, r.model.context));
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &g));
  train::TrainingOptions topts;
  topts.optimizer = r.optimizer;
  topts.schedule = r.schedule;
  topts.compile = opts;
  VOLTA_ASSIGN_OR_RETURN(train::TrainingPlan tp, train::compile_training(rt, g, topts));
  const model::KeyCache keys = model::key_cache_layout(rt, opts);  // as generation lays out its caches
  VOLTA_ASSIGN_OR_RETURN(ir::Graph infer, model::build_tinylm_prefill(r.model, 1, r.model.context, keys));
  VOLTA_ASSIGN_OR_RETURN(auto infer_plan, rt.compile(infer, opts));
  VOLTA_ASSIGN_OR_RETURN(ir::Graph decode, model::build_tinylm_decode(r.model, 1, keys));
  VOLTA_ASSIGN_OR_RETURN(auto decode_plan, rt.compile(decode, opts));
  // Steps that write the KV cache in place: cache_write, or attention with its write fused in.
  const size_t cache_writes = decode_plan->graph.nodes_of(ir::Op::CacheWrite).size() +
                              decode_plan->graph.nodes_of(ir::Op::CacheAttention).size();
  int64_t total = 0;
  for (const auto& [name, t] : ck.state.params) total += t.numel();
  const size_t updates = tp.step->graph.nodes_of(ir::Op::OptimizerUpdate).size();
  if (f.json) {
    nlohmann::ordered_json j;
    j["checkpoint"] = {{"file", f.file},          {"format", 1},
                       {"step", ck.state.step},   {"seed", ck.state.seed},
                       {"best_val_loss", ck.best_val_loss}, {"optimizer_state", !ck.state.slots.empty()}};
    j["model"] = nlohmann::ordered_json::parse(model::config_to_json(r.model));
    j["recipe"] = nlohmann::ordered_json::parse(train::recipe_to_json(r));
    j["tokenizer_characters"] = ck.tokenizer.vocab_size();
    j["params"] = nlohmann::ordered_json::array();
    for (const auto& [name, t] : ck.state.params)
      j["params"].push_back({{"name", name}, {"type", t.type().to_string()}, {"elements", t.numel()}});
    j["training_step"] = nlohmann::ordered_json::parse(plan::plan_to_json(*tp.step, -1));
    j["training_step"]["optimizer_updates"] = updates;
    j["inference"] = nlohmann::ordered_json::parse(plan::plan_to_json(*infer_plan, -1));
    j["decode_step"] = nlohmann::ordered_json::parse(plan::plan_to_json(*decode_plan, -1));
    j["decode_step"]["cache_writes"] = cache_writes;
    std::printf("%s\n", j.dump().c_str());
    return Status::ok();
  }
  std::printf("checkpoint %s: format v1, step %lld, seed %llu, best val loss %.4f\n", f.file.c_str(),
              static_cast<long long>(ck.state.step), static_cast<unsigned long long>(ck.state.seed), ck.best_val_loss);
  std::printf("model: %s\nrecipe: %s\ntokenizer: %lld characters\nparams: %lld in %zu tensors%s\n\n",
              model::config_to_json(r.model).c_str(), train::recipe_to_json(r).c_str(),
              static_cast<long long>(ck.tokenizer.vocab_size()), static_cast<long long>(total), ck.state.params.size(),
              ck.state.slots.empty() ? "" : " (+ optimizer state)");
  std::printf("%-28s %-16s %12s\n", "tensor", "type", "elements");
  for (const auto& [name, t] : ck.state.params)
    std::printf("%-28s %-16s %12lld\n", name.c_str(), t.type().to_string().c_str(), static_cast<long long>(t.numel()));
  std::printf("\ntraining step (batch %lld, context %lld): %zu steps, %zu of them %s updates of the state in place\n  %s\n%s",
              static_cast<long long>(r.batch), static_cast<long long>(r.model.context), tp.step->schedule.size(), updates,
              optim::kind_name(r.optimizer.kind), plan::format_kernel_summary(*tp.step).c_str(),
              plan::format_memory_report(tp.step->memory).c_str());
  std::printf("\ninference (prefill of %lld tokens, batch 1): %zu steps\n%s", static_cast<long long>(r.model.context),
              infer_plan->schedule.size(), plan::format_memory_report(infer_plan->memory).c_str());
  std::printf("\ndecode step (one token, batch 1, any position): %zu steps, %zu of them write the KV cache in place\n%s",
              decode_plan->schedule.size(), cache_writes, plan::format_memory_report(decode_plan->memory).c_str());
  return Status::ok();
}

}  // namespace

Action add_inspect(CLI::App& app, GlobalFlags& global) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a model's verified graph, schedule and memory plan");
  cmd->add_option("file", flags->file, "Model in the IR text format (.vir), an ONNX model (.onnx) or a TinyLM checkpoint")->required();
  cmd->add_option("--input", flags->inputs,
                  "ONNX models: NAME=FILE.pb|.npy gives a graph input a value at import (for inputs that set shapes)");
  cmd->add_option("--shape", flags->shapes,
                  "ONNX models: NAME=DIMS (e.g. input_ids=1x128) binds the dynamic dims of a graph input for this import");
  cmd->add_flag("--json", flags->json, "Print one JSON object (with peak_bytes and naive_bytes)");
  flags->pipeline.add_to(*cmd);
  return [flags, &global]() -> Status {
    VOLTA_ASSIGN_OR_RETURN(CompileOptions opts, flags->pipeline.to_options());
    const std::string& file = flags->file;
    if (is_onnx_file(file)) {
      const auto t0 = std::chrono::steady_clock::now();
      VOLTA_ASSIGN_OR_RETURN(OnnxRun r, import_onnx(file, flags->inputs, false, flags->shapes));
      VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
      VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &r.model.graph));
      VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(r.model.graph, opts));
      const double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const int64_t rss = peak_rss_bytes();
      if (flags->json) {
        auto j = nlohmann::ordered_json::parse(plan::plan_to_json(*plan));
        j["compile_ms"] = compile_ms;
        j["peak_rss_bytes"] = rss;
        std::printf("%s\n", j.dump().c_str());
        return Status::ok();
      }
      std::printf("onnx %s: opset %lld, producer '%s', %zu inputs, %zu outputs\n", file.c_str(),
                  static_cast<long long>(r.model.opset), r.model.producer.c_str(), r.model.inputs.size(), r.model.outputs.size());
      std::printf("  compile (import, passes, plan) %.1f ms, peak RSS %.1f MB\n", compile_ms, static_cast<double>(rss) / 1e6);
      const auto kind = [](const onnx::IoValue& io) {
        if (io.absent) return std::string("optional, holds nothing: ");
        return std::string(io.optional ? "optional " : "") + (io.sequence ? "sequence of " + std::to_string(io.elements.size()) + " " : "");
      };
      for (const onnx::IoValue& io : r.model.inputs)
        std::printf("  input  %-20s %s%s%s%s\n", io.name.c_str(), kind(io).c_str(), onnx::elem_type_name(static_cast<int32_t>(io.onnx_type)),
                    shape_to_string(io.type.shape).c_str(), io.node < 0 && !io.sequence && !io.absent ? " (folded into constants at import)" : "");
      for (const onnx::IoValue& io : r.model.outputs)
        std::printf("  output %-20s %s%s%s\n", io.name.c_str(), kind(io).c_str(), onnx::elem_type_name(static_cast<int32_t>(io.onnx_type)),
                    shape_to_string(io.type.shape).c_str());
      std::printf("graph %s: %zu nodes imported, %zu after passes [%s], hash %s\n\n", r.model.graph.name.c_str(),
                  r.model.graph.size(), plan->graph.size(), passes::pipeline_signature(opts.pipeline).c_str(),
                  hash_to_hex(plan->graph_hash).c_str());
      std::printf("%s\n%s", ir::print_graph(plan->graph, kShownConstantValues).c_str(), plan::format_plan(*plan).c_str());
      return Status::ok();
    }
    if (!flags->inputs.empty() || !flags->shapes.empty())  // (they were ignored)
      return invalid_argument(std::string(flags->inputs.empty() ? "--shape" : "--input") + " is for ONNX models; '" + file +
                              "' is not one");
    if (file.size() < 4 || file.compare(file.size() - 4, 4, ".vir") != 0) return inspect_checkpoint(*flags, global, opts);
    VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, ir::load_graph(flags->file));
    VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &g));
    VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(g, opts));
    if (flags->json) {
      std::printf("%s\n", plan::plan_to_json(*plan).c_str());
      return Status::ok();
    }
    std::printf("graph %s: %zu nodes in, %zu after passes [%s], hash %s\n\n", g.name.c_str(), g.size(),
                plan->graph.size(), passes::pipeline_signature(opts.pipeline).c_str(), hash_to_hex(plan->graph_hash).c_str());
    std::printf("%s\n%s", ir::print_graph(plan->graph, kShownConstantValues).c_str(), plan::format_plan(*plan).c_str());
    return Status::ok();
  };
}

}  // namespace volta::cli
