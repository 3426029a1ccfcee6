#include "backends/cuda/capabilities.h"

#include "backends/cuda/kernel_list.h"
#include "backends/cuda/workspace.h"

namespace volta::cuda {

Capabilities capabilities() {
  Capabilities caps;
  // Every op of the Unary and Binary categories (one kernel template over ir/scalar_math.h),
  // then the ops of the kernel list (the kernel table of cuda_backend.cpp holds exactly these).
  for (int i = 0; i < ir::kNumOps; ++i)
    if (ir::elementwise_arity(static_cast<ir::Op>(i)) > 0) caps.ops.push_back(static_cast<ir::Op>(i));
#define VOLTA_CUDA_KERNEL(Id) caps.ops.push_back(ir::Op::Id);
  VOLTA_CUDA_KERNELS(VOLTA_CUDA_KERNEL)
#undef VOLTA_CUDA_KERNEL
  caps.dtypes = {DType::f32, DType::i32, DType::i64, DType::f64};
  return caps;
}

// Every CUDA kernel is Volta's own, with launch shapes fixed by the problem's shape and fixed
// reduction orders: strict.
KernelInfo kernel_info(const ir::Node& /*n*/) { return {"cuda", Determinism::Strict}; }

// Cross-entropy keeps the count of its rows kept and (forward) one double per row for its
// fixed-order mean; grad_norm the chunk sums of each gradient and one sum per gradient;
// attention a flag per query group, its gradient also each query row's softmax statistics.
size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) {
  if (n.op == ir::Op::Attention || n.op == ir::Op::AttentionGrad) {
    const Shape& q = g.node(n.inputs[0]).type.shape;
    if (q.size() < 2) return 0;
    int64_t groups = 1;
    for (size_t i = 0; i + 2 < q.size(); ++i) groups *= q[i];
    return static_cast<size_t>(attention_workspace_bytes(groups, q[q.size() - 2], n.op == ir::Op::AttentionGrad));
  }
  if (n.op == ir::Op::CrossEntropy && n.inputs.size() == 2)  // the count of rows kept, each row's loss
    return sizeof(int64_t) + static_cast<size_t>(g.node(n.inputs[1]).type.numel()) * sizeof(double);
  if (n.op == ir::Op::CrossEntropyGrad) return sizeof(int64_t);
  if (n.op == ir::Op::GradNorm) {
    size_t words = n.inputs.size();
    for (int32_t in : n.inputs) words += static_cast<size_t>(squares_partials(g.node(in).type.numel()));
    return words * sizeof(double);
  }
  return 0;
}

}  // namespace volta::cuda
