// Graph -> graph rewrites. Each pass lives in its own file under src/passes/, is deterministic
// (no pointer or hash-order iteration), returns a new graph and never changes its input.
// The pipeline (their order) is listed once, in src/passes/pipeline.cpp.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "volta/ir.h"

namespace volta::passes {

// Removes nodes no output depends on. Inputs and params are kept: they are the graph's interface.
Result<ir::Graph> eliminate_dead_code(const ir::Graph& g);
// Merges nodes with the same op, inputs, attributes and (for constants) payload.
// Inputs and params are never merged. Keeps the first node (lowest id) of each class.
Result<ir::Graph> eliminate_common_subexpressions(const ir::Graph& g);
// Evaluates nodes whose inputs are all constants with the reference kernels, up to
// kMaxFoldElements elements per result, and replaces them by constants.
Result<ir::Graph> fold_constants(const ir::Graph& g);
constexpr int64_t kMaxFoldElements = 1 << 16;
// Folds mul-by-a-scalar and a causal mask into the softmax that reads them, and the matching
// mask and scale after a softmax_grad into it (src/passes/fuse_attention_softmax.cpp).
Result<ir::Graph> fuse_attention_softmax(const ir::Graph& g);
// matmul(softmax(matmul(q, k, transpose_b)), v) -> attention(q, k, v), absorbing a two-block
// concat of k and v (src/passes/fuse_attention.cpp).
Result<ir::Graph> fuse_attention(const ir::Graph& g);
// The position form of the same block whose scores product reads its keys as they lie, k
// [.., D, S] (a key cache stored transposed) -> attention(q, k, v, position) with keys_transposed
// (src/passes/fuse_attention.cpp).
Result<ir::Graph> fuse_attention_keys_transposed(const ir::Graph& g);
// A decode step's two cache_writes and the attention that reads them in place ->
// cache_attention(q, caches, k, v, position) (src/passes/fuse_cache_attention.cpp).
Result<ir::Graph> fuse_cache_attention(const ir::Graph& g);
// The training form: the attention block's forward and backward (after autograd) ->
// attention(q, k, v) and attention_grad(q, k, v, dy) (src/passes/fuse_attention_training.cpp).
// `packed_follows`: fuse_attention_heads runs next, so blocks of a packed projection fuse from
// fewer keys.
Result<ir::Graph> fuse_attention_training(const ir::Graph& g, bool packed_follows = false);
// The head split of a packed q/k/v projection and the merge of attention's output (and of
// attention_grad's) folded into the attention nodes as packed_heads (src/passes/fuse_attention_heads.cpp).
Result<ir::Graph> fuse_attention_heads(const ir::Graph& g);
// Trees of elementwise ops -> one fused_elementwise node (src/passes/fuse_elementwise.cpp).
Result<ir::Graph> fuse_elementwise(const ir::Graph& g);
// add(matmul(a, b), bias[N]) -> matmul(a, b, bias), then relu / gelu of a matmul -> its
// `activation` (src/passes/fuse_matmul_epilogue.cpp).
Result<ir::Graph> fuse_matmul_epilogue(const ir::Graph& g);
// add(r, matmul(...)) -> matmul(..., r) {residual = 1}, r of the sum's type
// (src/passes/fuse_matmul_epilogue.cpp).
Result<ir::Graph> fuse_matmul_residual(const ir::Graph& g);
// gelu(h) whose h is otherwise read only as gelu_grad's x -> gelu_and_grad(h), its planes (views)
// the gelu and the derivative, which the gradients multiply instead (src/passes/store_gelu_grad.cpp).
Result<ir::Graph> store_gelu_grad(const ir::Graph& g);
// attention(q, k, v) and its attention_grad(q, k, v, dy) -> attention {store_probs = 1}, whose
// result holds the output and the probabilities (views), and attention_grad(q, k, v, dy, p)
// (src/passes/store_attention_probs.cpp).
Result<ir::Graph> store_attention_probs(const ir::Graph& g);
// A norm's parameter gradients as autograd writes them (the norm of x with unit gain times dy,
// summed over the leading axes; dy summed) -> one norm_param_grad(x, dy)
// (src/passes/fuse_norm_param_grad.cpp).
Result<ir::Graph> fuse_norm_param_grad(const ir::Graph& g);
// transpose -> matmul operand and matmul result -> transpose become the matmul's a_perm, b_perm
// and out_perm (src/passes/fuse_matmul_layout.cpp).
Result<ir::Graph> fuse_matmul_layout(const ir::Graph& g);

// Weights in a storage dtype, asked for by inference (`--weights`), not part of the pipeline:
// every param and constant of rank >= 2 read only as matmuls' right operand becomes `dtype`
// (bf16 or f16): params frozen (their values are the caller's to narrow), constants rounded to
// nearest even. `converted` (optional) receives the params' names (src/passes/store_weights.cpp).
Result<ir::Graph> store_weights_as(const ir::Graph& g, DType dtype, std::vector<std::string>* converted = nullptr);
// Inference's weights (f32, bf16 or f16) stored in the backend's packed layout
// (Backend::matmul_weight_packing, ir/packed_weight.h): each param named in `layouts` is frozen and read as b_packed = [kc, nr] by
// every matmul (it must be read only as a plain right operand); the caller stores its values so
// (ir::repack_weight). Decode reads each task's columns of a packed weight as one contiguous
// piece, which stays in its core's L2 from token to token.
Result<ir::Graph> store_weights_packed(const ir::Graph& g, const std::map<std::string, std::array<int64_t, 2>>& layouts);
// Inference's copy of each f32 param a matmul reads transposed (a GPT's tied output embedding,
// x @ wte^T): a frozen param `<name>.t` holding its transpose, which those matmuls read plainly,
// as decode's small products read a weight in place; a transposed one they transpose on every
// call (the shakespeare model's head: 1.3 -> 0.3 us a token). It costs the param's bytes again.
// `copies` receives (copy, original) names; the caller stores the transposes.
Result<ir::Graph> untie_transposed_weights(const ir::Graph& g, std::vector<std::pair<std::string, std::string>>* copies = nullptr);

struct PipelineOptions;
// Constant matmul weights in the layout the backend's GEMM reads (PipelineOptions::weight_packing):
// b_packed (src/passes/pack_matmul_weights.cpp).
// Takes the graph by value and replaces each weight in place, so a weight nobody else holds is
// freed as its packed copy is made (the plan never holds both).
Result<ir::Graph> pack_matmul_weights(ir::Graph g, const PipelineOptions& opts);

using PassFn = std::function<Result<ir::Graph>(const ir::Graph&)>;
using TargetPassFn = std::function<Result<ir::Graph>(ir::Graph, const PipelineOptions&)>;
struct Pass {
  std::string name;
  PassFn run;  // or, for a pass that asks the backend (a layout its kernels read), run_for_target
  // Ops the pass writes that its input may not have had, and op variants (Capabilities
  // features): a runtime skips the pass when its backend lacks one of them (a fusion must never
  // make a graph unrunnable).
  std::vector<ir::Op> introduces = {};
  std::vector<std::string> features = {};
  TargetPassFn run_for_target = nullptr;
};

// The pipeline, in order.
const std::vector<Pass>& pipeline();

struct PipelineOptions {
  std::set<std::string> disabled;  // pass names to skip
  bool verify_each = false;        // run verify_graph after every pass
  std::string dump_after;          // pass name: print the IR after it to `dump`
  std::function<void(const std::string& pass, const ir::Graph&)> dump;
  // The layout [kc, nr] the backend's GEMM reads a constant weight of an M x N x K product in,
  // or none (Backend::matmul_weight_packing; the runtime sets it).
  std::function<std::optional<std::array<int64_t, 2>>(int64_t M, int64_t N, int64_t K)> weight_packing;
};

// `opts` with every pass disabled that introduces an op `supported` rejects or needs a feature
// `has_feature` rejects.
PipelineOptions without_unsupported(PipelineOptions opts, const std::function<bool(ir::Op)>& supported,
                                    const std::function<bool(const std::string&)>& has_feature);

// Names of the passes that will run, e.g. "fold_constants,eliminate_common_subexpressions,...".
std::string pipeline_signature(const PipelineOptions& opts);
// By value: a graph moved in is the pipeline's own, so the passes that replace constants free them.
Result<ir::Graph> run_pipeline(ir::Graph g, const PipelineOptions& opts);

// Identifies graph + pipeline: a hash of the printed graph and the pipeline signature.
uint64_t graph_hash(const ir::Graph& g, const std::string& pipeline_sig = "");

}  // namespace volta::passes
