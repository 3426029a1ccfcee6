// The CPU backend's two kernel tables (the reference kernels, and the kernels it runs), the leaf
// "kernels" and evaluate_reference, which runs one node on host tensors (constant folding uses
// it).
#include "backends/cpu/kernels.h"

#include <array>
#include <string>
#include <vector>

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
  for (size_t i = 0; i < t.size(); ++i) t[i] = {kReferenceKernels[i], "reference", Determinism::Strict};
  auto set = [&](ir::Op op, Kernel k) { t[static_cast<size_t>(op)] = {k, "cpu", Determinism::Strict}; };
  for (size_t i = 0; i < t.size(); ++i)
    if (const Kernel k = elementwise_kernel(static_cast<ir::Op>(i))) set(static_cast<ir::Op>(i), k);
  using ir::Op;
  set(Op::FusedElementwise, fused_elementwise);
  set(Op::Gelu, gelu);
  set(Op::GeluGrad, gelu_grad);
  set(Op::GeluAndGrad, gelu_and_grad);
  set(Op::SiluGrad, silu_grad);
  set(Op::Swiglu, swiglu);
  set(Op::SwigluGrad, swiglu_grad);
  set(Op::Softmax, softmax);
  set(Op::LogSoftmax, log_softmax);
  set(Op::SoftmaxGrad, softmax_grad);
  set(Op::LayerNorm, layer_norm);
  set(Op::RmsNorm, rms_norm);
  set(Op::LayerNormGrad, layer_norm_grad);
  set(Op::RmsNormGrad, rms_norm_grad);
  set(Op::NormParamGrad, norm_param_grad);
  set(Op::CrossEntropy, cross_entropy);
  set(Op::CrossEntropyGrad, cross_entropy_grad);
  set(Op::ReduceSum, reduce_sum);
  set(Op::Transpose, transpose);
  set(Op::Slice, slice);
  set(Op::Pad, pad);
  set(Op::Concat, concat);
  set(Op::Embedding, embedding);
  set(Op::EmbeddingGrad, embedding_grad);
  set(Op::Attention, attention);
  set(Op::AttentionGrad, attention_grad);
  set(Op::Rope, rope);
  set(Op::Matmul, matmul);
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
