// The CPU backend's two kernel tables (the reference kernels, and the kernels it runs), the leaf
// "kernels" and evaluate_reference, which runs one node on host tensors (constant folding uses
// it).
#include "backends/cpu/kernels.h"

#include <array>
#include <string>
#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {
namespace ref {
namespace {

// Leaves are bound by the runtime, never executed: reaching a kernel is a planner bug.
Status leaf(const KernelArgs& a) {
  return internal_error(op_prefix(a.node) + "leaves are bound, not executed " + ir::node_ref(a.node));
}

}  // namespace

Status Input(const KernelArgs& a) { return leaf(a); }
Status Param(const KernelArgs& a) { return leaf(a); }
Status Constant(const KernelArgs& a) { return leaf(a); }

}  // namespace ref

Kernel reference_kernel(ir::Op op) {
  const auto i = static_cast<size_t>(op);
  return i < kReferenceKernels.size() ? kReferenceKernels[i] : nullptr;
}

namespace {

// The kernel table the backend runs: the reference kernels, then its own where it has one. Every
// kernel here is strict: one reduction order per output element, tasks fixed by the shape.
std::array<KernelEntry, ir::kNumOps> cpu_kernels() {
  std::array<KernelEntry, ir::kNumOps> t;
  for (size_t i = 0; i < t.size(); ++i) t[i] = {kReferenceKernels[i], "reference", Determinism::Strict, StepRole::Solo};
  // (The reference optimizer's kernels share their loops over the threads.)
  using ir::Op;
  for (const Op op : {Op::OptimizerUpdate, Op::GradNorm}) t[static_cast<size_t>(op)].role = StepRole::Forks;
  auto set = [&](ir::Op op, Kernel k) { t[static_cast<size_t>(op)] = {k, "cpu", Determinism::Strict}; };
  // A decode step's kernels keep a team's rules (parallel.h): every write in a task, or alone.
  auto shared = [&](ir::Op op, Kernel k) { t[static_cast<size_t>(op)] = {k, "cpu", Determinism::Strict, StepRole::Shared}; };
  for (size_t i = 0; i < t.size(); ++i)
    if (const Kernel k = elementwise_kernel(static_cast<ir::Op>(i))) shared(static_cast<ir::Op>(i), k);
  shared(Op::FusedElementwise, fused_elementwise);
  shared(Op::Gelu, gelu);
  shared(Op::GeluGrad, gelu_grad);
  shared(Op::GeluAndGrad, gelu_and_grad);
  shared(Op::SiluGrad, silu_grad);
  shared(Op::Swiglu, swiglu);
  shared(Op::SwigluGrad, swiglu_grad);
  shared(Op::Softmax, softmax);
  shared(Op::LogSoftmax, log_softmax);
  shared(Op::SoftmaxGrad, softmax_grad);
  shared(Op::LayerNorm, layer_norm);
  shared(Op::RmsNorm, rms_norm);
  shared(Op::LayerNormGrad, layer_norm_grad);
  shared(Op::RmsNormGrad, rms_norm_grad);
  shared(Op::NormParamGrad, norm_param_grad);
  set(Op::CrossEntropy, cross_entropy);
  set(Op::CrossEntropyGrad, cross_entropy_grad);
  set(Op::ReduceSum, reduce_sum);
  shared(Op::Transpose, transpose);
  shared(Op::Slice, slice);
  shared(Op::Pad, pad);
  shared(Op::Concat, concat);
  shared(Op::Embedding, embedding);
  set(Op::EmbeddingGrad, embedding_grad);
  shared(Op::Attention, attention);
  shared(Op::CacheAttention, cache_attention);
  set(Op::AttentionGrad, attention_grad);
  shared(Op::Rope, rope);
  shared(Op::Matmul, matmul);
  set(Op::GradNorm, fast_grad_norm);
  set(Op::OptimizerUpdate, [](const KernelArgs& a) { return optimizer_update_node(a, fast_optimizer_update); });
  return t;
}

// Faster kernels below strict, each for the nodes its predicate accepts. Planning takes the first
// that applies when the requested level allows its own; index i + 1 at execute.
struct Alternative {
  ir::Op op;
  KernelEntry entry;
  bool (*applies)(const ir::Graph& g, const ir::Node& node);
};
constexpr Alternative kAlternatives[] = {
    {ir::Op::Matmul, {matmul_split_k, "cpu.split-k", Determinism::RunToRun}, split_k_applies},
};

}  // namespace

KernelEntry cpu_kernel(ir::Op op) {
  static const std::array<KernelEntry, ir::kNumOps> table = cpu_kernels();
  const auto i = static_cast<size_t>(op);
  return i < table.size() ? table[i] : KernelEntry{};
}

KernelInfo choose_cpu_kernel(const ir::Graph& g, const ir::Node& node, Determinism level) {
  for (size_t i = 0; i < std::size(kAlternatives); ++i) {
    const Alternative& alt = kAlternatives[i];
    if (alt.op == node.op && alt.entry.level >= level && alt.applies(g, node))
      return {alt.entry.variant, alt.entry.level, static_cast<int>(i + 1)};
  }
  const KernelEntry k = cpu_kernel(node.op);
  return {k.variant, k.level, 0};
}

KernelEntry cpu_kernel_at(ir::Op op, int index) {
  if (index == 0) return cpu_kernel(op);
  const auto i = static_cast<size_t>(index - 1);
  return index > 0 && i < std::size(kAlternatives) && kAlternatives[i].op == op ? kAlternatives[i].entry : KernelEntry{};
}

// The most rows a matmul reads its weight in place for (matmul.cpp's small-M path: batched
// decode up to 16 sequences).
constexpr int64_t kMaxDecodeRows = 16;

StepRole cpu_step_role(const ir::Node& node, const KernelInfo& kernel) {
  const StepRole role = cpu_kernel_at(node.op, kernel.index).role;
  if (role != StepRole::Shared || node.op != ir::Op::Matmul) return role;
  const int64_t cols = node.type.shape.empty() ? 1 : node.type.shape.back();
  return cols > 0 && node.type.numel() / cols > kMaxDecodeRows ? StepRole::Forks : role;
}

Status run_alone(Kernel k, const KernelArgs& a) {
  Status st = Status::ok();
  run_alone([&](int64_t) { st = k(a); });
  return st;
}

size_t reference_workspace_bytes(const ir::Graph& /*g*/, const ir::Node& node) {
  // embedding_grad accumulates rows in double before rounding once.
  if (node.op == ir::Op::EmbeddingGrad) return static_cast<size_t>(node.type.numel()) * sizeof(double);
  return 0;
}

Result<Tensor> evaluate_reference(const ir::Node& node, std::span<const Tensor> inputs) {
  const ir::OpInfo& info = ir::op_info(node.op);
  const auto n_in = static_cast<int>(inputs.size());
  if (n_in < info.min_inputs || n_in > info.max_inputs) {
    return invalid_argument(std::string("[") + info.name + "] expects " + std::to_string(info.min_inputs) + " to " +
                            std::to_string(info.max_inputs) + " inputs, got " + std::to_string(n_in) + " " +
                            ir::node_ref(node));
  }
  std::vector<TensorRef> refs;
  refs.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      return invalid_argument(std::string("[") + info.name + "] input " + std::to_string(i) + " is undefined " +
                              ir::node_ref(node));
    }
    // Kernels only read their inputs; TensorRef is a mutable view for uniformity.
    refs.push_back(TensorRef{const_cast<std::byte*>(inputs[i].raw()), inputs[i].type()});
  }
  Tensor out = Tensor::zeros(node.type.dtype, node.type.shape);
  const TensorRef out_ref{out.raw(), out.type()};
  const Kernel kernel = reference_kernel(node.op);
  if (!kernel) return internal_error(std::string("no reference kernel for op ") + info.name + " " + ir::node_ref(node));
  std::vector<std::byte> workspace(reference_workspace_bytes(ir::Graph{}, node));
  VOLTA_RETURN_IF_ERROR(kernel(KernelArgs{node, refs, out_ref, workspace}));
  return out;
}

}  // namespace volta::cpu
