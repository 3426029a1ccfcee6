// The pass pipeline, in order. This is the one place that lists it.
#include "volta/passes.h"
#include "volta/text.h"
#include "volta/verify.h"

namespace volta::passes {

const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> kPipeline = {
      {"fold_constants", fold_constants},
      {"eliminate_common_subexpressions", eliminate_common_subexpressions},
      {"fuse_attention_softmax", fuse_attention_softmax},
      {"fuse_attention", fuse_attention, {ir::Op::Attention}},
      {"fuse_attention_keys_transposed", fuse_attention_keys_transposed, {ir::Op::Attention}, {"attention.keys_transposed"}},
      {"fuse_cache_attention", fuse_cache_attention, {ir::Op::CacheAttention}},
      {"fuse_attention_training", nullptr, {ir::Op::Attention, ir::Op::AttentionGrad}, {},
       [](ir::Graph g, const PipelineOptions& o) { return fuse_attention_training(g, !o.disabled.count("fuse_attention_heads")); }},
      {"fuse_attention_heads", fuse_attention_heads, {}, {"attention.packed_heads"}},
      {"fuse_matmul_epilogue", fuse_matmul_epilogue, {}, {"matmul.epilogue"}},
      {"fuse_matmul_residual", fuse_matmul_residual, {}, {"matmul.residual"}},
      {"store_gelu_grad", store_gelu_grad, {ir::Op::GeluAndGrad}},
      {"store_attention_probs", store_attention_probs, {}, {"attention.stored_probs"}},
      {"fuse_norm_param_grad", fuse_norm_param_grad, {ir::Op::NormParamGrad}},
      {"fuse_matmul_layout", fuse_matmul_layout, {}, {"matmul.layout"}},
      {"fuse_elementwise", fuse_elementwise, {ir::Op::FusedElementwise}},
      {"eliminate_dead_code", eliminate_dead_code},
      {"pack_matmul_weights", nullptr, {}, {"matmul.packed_b"}, pack_matmul_weights},
  };
  return kPipeline;
}

PipelineOptions without_unsupported(PipelineOptions opts, const std::function<bool(ir::Op)>& supported,
                                    const std::function<bool(const std::string&)>& has_feature) {
  for (const Pass& p : pipeline()) {
    for (ir::Op op : p.introduces)
      if (!supported(op)) opts.disabled.insert(p.name);
    for (const std::string& f : p.features)
      if (!has_feature(f)) opts.disabled.insert(p.name);
  }
  return opts;
}

std::string pipeline_signature(const PipelineOptions& opts) {
  std::string sig;
  for (const Pass& p : pipeline()) {
    if (opts.disabled.count(p.name)) continue;
    if (!sig.empty()) sig += ",";
    sig += p.name;
  }
  return sig;
}

Result<ir::Graph> run_pipeline(ir::Graph g, const PipelineOptions& opts) {
  for (const std::string& name : opts.disabled) {
    bool known = false;
    for (const Pass& p : pipeline()) known = known || p.name == name;
    if (!known) return invalid_argument("unknown pass '" + name + "' (see `volta inspect --help` for the pipeline)");
  }
  ir::Graph cur = std::move(g);
  for (const Pass& p : pipeline()) {
    if (opts.disabled.count(p.name)) continue;
    auto next = p.run_for_target ? p.run_for_target(std::move(cur), opts) : p.run(cur);
    if (!next.is_ok()) return Status(next.status().code(), "pass " + p.name + ": " + next.status().message());
    cur = std::move(next).value();
    if (opts.verify_each) {
      Status s = ir::verify_graph(cur);
      if (!s.is_ok()) return internal_error("pass " + p.name + " produced an invalid graph: " + s.message());
    }
    if (opts.dump && opts.dump_after == p.name) opts.dump(p.name, cur);
  }
  return cur;
}

uint64_t graph_hash(const ir::Graph& g, const std::string& pipeline_sig) {
  // Large constants (imported weights) enter by their bytes' hash, not as text: printing 90 MB
  // of floats took seconds. Smaller ones stay printed, so the hashes of built graphs are unchanged.
  constexpr int64_t kPrintedConstantValues = 4096;
  return fnv1a64(pipeline_sig, fnv1a64(ir::print_graph(g, kPrintedConstantValues)));
}

}  // namespace volta::passes
