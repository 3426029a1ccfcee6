// Reference CPU kernels: straightforward, single-threaded, correctness first. They are the
// oracle every fast or device kernel is tested against, and constant folding runs them.
//
// Contract: shapes and dtypes were checked by the op's type rule before a kernel runs, so
// kernels assume them. Kernels return an error only for data-dependent problems (an index out
// of range), naming the node. Reductions accumulate in double in a fixed order.
#pragma once

#include <array>
#include <span>
#include <string_view>

#include "backends/cpu/vec_kernels.h"
#include "volta/backend.h"
#include "volta/ir.h"
#include "volta/op_attrs.h"
#include "volta/optim.h"

namespace volta::cpu {

struct KernelArgs {
  const ir::Node& node;
  std::span<const TensorRef> in;
  const TensorRef& out;
  std::span<std::byte> workspace;
};

using Kernel = Status (*)(const KernelArgs&);

// One reference kernel per op, generated from ops.def (a missing one fails to link): ref::<Id>,
// except for the fusable elementwise ops (Unary and Binary rows), whose reference is one
// template over their math in ir/scalar_math.h (ref_elementwise.cpp).
namespace ref {
#define VOLTA_OP(Id, name, min_in, max_in, category, ...) VOLTA_UNLESS_FUSABLE(category, Status Id(const KernelArgs& a);)
#include "volta/ops.def"
#undef VOLTA_OP
template <ir::Op op>
Status elementwise(const KernelArgs& a);
}  // namespace ref

// The reference kernel table, indexed by op.
inline constexpr std::array<Kernel, ir::kNumOps> kReferenceKernels = {
#define VOLTA_OP(Id, name, min_in, max_in, category, ...) VOLTA_FUSABLE_PICK(category, &ref::elementwise<ir::Op::Id>, &ref::Id),
#include "volta/ops.def"
#undef VOLTA_OP
};

Kernel reference_kernel(ir::Op op);
// Workspace bytes the reference kernel of `node` needs (0 for most ops).
size_t reference_workspace_bytes(const ir::Graph& g, const ir::Node& node);

// One entry of the CPU backend's kernel table: the kernel, its name in plan reports ("cpu" for
// the backend's own, "reference"), the determinism level it meets and its role in a walk by
// every thread at once (a reference kernel uses one thread: Solo; one of the backend's own that
// keeps parallel.h's team rules: Shared; any other forks its own threads: Forks).
struct KernelEntry {
  Kernel run = nullptr;
  const char* variant = "";
  Determinism level = Determinism::Strict;
  StepRole role = StepRole::Forks;
};
// The kernel the CPU backend runs for `op` by default: its own where it has one, the reference
// kernel otherwise (the table is in kernels.cpp). Every default is strict.
KernelEntry cpu_kernel(ir::Op op);

// The kernel for `node` that planning chooses: the fastest that meets `level`, which is the
// default unless the level allows one of the faster, less deterministic alternatives (kernels.cpp
// lists them) and it applies to the node. Its index goes back into cpu_kernel_at at execute.
KernelInfo choose_cpu_kernel(const ir::Graph& g, const ir::Node& node, Determinism level);
// The kernel of that index for `op` (0: the default); an empty entry for an unknown index.
KernelEntry cpu_kernel_at(ir::Op op, int index);
// The role of `node`'s kernel in a walk: its entry's, except that a matmul of more rows than a
// batched decode step's forks (it packs into one thread's buffers for all its tasks; inside a
// team it would run on one thread).
StepRole cpu_step_role(const ir::Node& node, const KernelInfo& kernel);
// Runs kernel k on one rank of a team (parallel.h's run_alone), as a Shared kernel runs a path
// that writes outside its tasks (a reference kernel it falls back to); outside a team: k(a).
Status run_alone(Kernel k, const KernelArgs& a);

// The CPU backend's own kernels, one file per op family, mirroring the reference kernels
// (ref_<family>.cpp) and the CUDA backend (cuda/<family>.cu). Each is checked against the
// reference by the op-test harness and falls back to it outside its fast layouts. Files other
// than ref_*.cpp are compiled with -O3 and FMA contraction; their 16-lane row kernels are in
// <family>_vec.cpp (vec_kernels.h lists them), built once per ISA level with the same bits on
// AVX-512 and AVX2.

// elementwise.cpp: the Unary ops and add / sub / mul / div (nullptr for any other op), and
// fused_elementwise with the bits of the unfused chain.
Kernel elementwise_kernel(ir::Op op);
Status fused_elementwise(const KernelArgs& a);
// elementwise.cpp: y[i] = op(x[i]) over n f32 values for the Unary ops the CPU computes on vectors
// (exp, log, tanh, sigmoid, silu, erf with vec_math.h's math; sqrt, neg, abs exactly), nullptr for
// the others (relu and sign keep the reference's scalar math). Both kernels above use it.
using UnaryMap = void (*)(const float* x, float* y, int64_t n);
UnaryMap vector_unary(ir::Op op);

// activation.cpp; vec_kernels.h's gelu_erf(x, y, n) is gelu with approximate="none" on n floats
// (the matmul epilogue's), gelu_erf_grad(x, dy, out, n) its gradient (out may be dy),
// gelu_erf_and_grad(x, y, d, n) both gelu and gelu' (the bits of the two above, dy = 1).
Status gelu(const KernelArgs& a);
Status gelu_grad(const KernelArgs& a);
Status gelu_and_grad(const KernelArgs& a);
Status silu_grad(const KernelArgs& a);
Status swiglu(const KernelArgs& a);
Status swiglu_grad(const KernelArgs& a);

// softmax.cpp. Its rows (vec_kernels.h's softmax_rows and softmax_grad_rows, rows ld apart):
// softmax / log_softmax of scale * x (+ add, with scale 1; add may be nullptr, its rows add_ld
// apart) over the first valid + i * valid_step of row i's C entries (the rest 0 / -inf; false
// when a row held an inf or nan), and the softmax gradient dx = scale * y * (dy - sum(dy y)).
Status softmax(const KernelArgs& a);
Status log_softmax(const KernelArgs& a);
Status softmax_grad(const KernelArgs& a);

// norm.cpp
Status layer_norm(const KernelArgs& a);
Status rms_norm(const KernelArgs& a);
Status layer_norm_grad(const KernelArgs& a);
Status norm_param_grad(const KernelArgs& a);
size_t norm_param_grad_workspace_bytes(const ir::Graph& g, const ir::Node& node);
// Bytes of thread-local scratch an attention kernel of `node` holds per thread (its score rows),
// beside the plan: 0 for other ops.
size_t attention_scratch_bytes(const ir::Graph& g, const ir::Node& node);
Status rms_norm_grad(const KernelArgs& a);

// loss.cpp
Status cross_entropy(const KernelArgs& a);
Status cross_entropy_grad(const KernelArgs& a);

// reduce.cpp. The sums and scans other families share are vec_kernels.h's: column_sums of a
// [rows, n] block with row stride ld; row_sum; all_finite_rows (rows of cols floats, rs apart,
// hold no inf or nan); all_zero (x[0, n) holds only zeros of either sign).
Status reduce_sum(const KernelArgs& a);

// layout.cpp
Status transpose(const KernelArgs& a);
Status slice(const KernelArgs& a);
Status pad(const KernelArgs& a);
Status concat(const KernelArgs& a);
Status embedding(const KernelArgs& a);
Status embedding_grad(const KernelArgs& a);

// attention.cpp: the same bits as the unfused matmul -> softmax -> matmul and its backward;
// checked against ref::Attention, ref::AttentionGrad and those compositions. rope on the threads.
Status attention(const KernelArgs& a);
Status cache_attention(const KernelArgs& a);
Status attention_grad(const KernelArgs& a);
Status rope(const KernelArgs& a);

// matmul.cpp, checked against ref::Matmul.
Status matmul(const KernelArgs& a);
size_t matmul_workspace_bytes(const ir::Graph& g, const ir::Node& node);
// The bias and activation of a matmul node, applied to its output rows of N.
Status matmul_epilogue(const KernelArgs& a, int64_t N);
// Which inputs of matmul node n feed its epilogue (ops.def: a, b, then the bias or gelu_grad's
// x, then with residual = 1 r last), -1 where there is none; a gelu_grad without its x is an
// error. The one place both the kernel and the reference read that layout from.
struct MatmulEpilogueInputs {
  int bias = -1, pre = -1, residual = -1;
};
inline Result<MatmulEpilogueInputs> matmul_epilogue_inputs(const ir::Node& n, const ir::attrs::Matmul& at, size_t inputs) {
  MatmulEpilogueInputs e;
  const std::string_view act = at.activation;
  const bool with_x = act == "gelu_grad" || act == "mul";
  if (at.residual) e.residual = static_cast<int>(--inputs);
  if (inputs > 2) (with_x ? e.pre : e.bias) = 2;
  if (with_x && e.pre < 0) return internal_error("[matmul] the " + at.activation + " epilogue needs its x input " + ir::node_ref(n));
  return e;
}
// The same as a MatmulEpilogue (matmul.h), for the paths whose tasks apply it to their own blocks.
struct MatmulEpilogue;
Result<MatmulEpilogue> matmul_epilogue_of(const KernelArgs& a, int64_t N);
Result<MatmulEpilogue> matmul_epilogue_of(const KernelArgs& a, const ir::attrs::Matmul& at, int64_t N);
// matmul_half.cpp: bf16 / f16 weights (the right operand), widened to f32 as they are read: the
// bits of the f32 kernel on the widened weights. Workspace: the widened weights, where the
// product is not a decode shape (those widen per task into per-thread scratch).
Status matmul_half_weights(const KernelArgs& a);
size_t matmul_half_workspace_bytes(const ir::Graph& g, const ir::Node& node);
// matmul_split_k.cpp: a run-to-run alternative for weight gradients (see there).
bool split_k_applies(const ir::Graph& g, const ir::Node& node);
Status matmul_split_k(const KernelArgs& a);

// optim.cpp: float, vectorised. fast_grad_norm is grad_norm_node over fast_sum_of_squares, with
// the chunks of all its inputs in one parallel pass.
double fast_sum_of_squares(const TensorRef& t);
Status fast_grad_norm(const KernelArgs& a);
Status fast_optimizer_update(const optim::UpdateStep& step, const TensorRef& param, const TensorRef& grad,
                             std::span<const TensorRef> state);

// Reference optimizer kernels (src/backends/cpu/ref_optim.cpp); element math in double.
double sum_of_squares(const TensorRef& t);
Status optimizer_update(const optim::UpdateStep& step, const TensorRef& param, const TensorRef& grad,
                        std::span<const TensorRef> state);

// The training step's grad_norm and optimizer_update nodes around a sum-of-squares and an
// update function (the reference ones or the fast ones): the same scalar arithmetic either way.
using SumOfSquaresFn = double (*)(const TensorRef&);
using OptimizerUpdateFn = Status (*)(const optim::UpdateStep&, const TensorRef&, const TensorRef&, std::span<const TensorRef>);
Status grad_norm_node(const KernelArgs& a, SumOfSquaresFn sum_of_squares);
Status optimizer_update_node(const KernelArgs& a, OptimizerUpdateFn update);

// Evaluates one node on host tensors with the reference kernel (used by constant folding).
Result<Tensor> evaluate_reference(const ir::Node& node, std::span<const Tensor> inputs);

}  // namespace volta::cpu
