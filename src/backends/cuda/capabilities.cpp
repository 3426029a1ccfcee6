#include "backends/cuda/capabilities.h"

#include "backends/cuda/kernel_list.h"
#include "volta/op_attrs.h"
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
  caps.features = {"attention.packed_heads"};
  return caps;
}

Status check_node(const ir::Graph& g, const ir::Node& n) {
  auto refuse = [&n](const std::string& what) {
    return unimplemented("[" + std::string(ir::op_name(n.op)) + "] backend 'cuda' " + what + " " + ir::node_ref(n));
  };
  if (ir::elementwise_arity(n.op) > 0) {
    bool f32 = n.type.dtype == DType::f32;
    for (int32_t in : n.inputs) f32 = f32 && g.node(in).type.dtype == DType::f32;
    if (!f32) return refuse("computes f32 only, not " + n.type.to_string());
  }
  if (n.op == ir::Op::Attention) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Attention>(n));
    if (n.inputs.size() == 4 && g.node(n.inputs[3]).type.dtype != DType::i32)
      return refuse("has no kernel for an additive mask input yet");
    if (at->zero_nan_probs != 0) return refuse("has no kernel for zero_nan_probs yet");
    if (at->store_probs != 0) return refuse("has no kernel for store_probs yet");
    if (at->keys_transposed != 0) return refuse("has no kernel for keys_transposed yet");
  }
  if (n.op == ir::Op::CacheWrite) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CacheWrite>(n));
    if (at->transposed != 0) return refuse("has no kernel for a transposed cache yet");
  }
  if (n.op == ir::Op::AttentionGrad && n.inputs.size() == 5) return refuse("has no kernel for stored probabilities yet");
  return Status::ok();
}

KernelInfo kernel_info(const ir::Node& /*n*/) { return {"cuda", Determinism::Strict}; }

namespace {

// The tensor-core kernels for a self-attention of q, k, v alone (tf32x3_attention_shape), and
// for its gradient (q, k, v, dy).
template <ir::Op Op>
bool tf32x3_attention(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() != (Op == ir::Op::Attention ? 3 : 4)) return false;
  const auto at = ir::typed_attrs<Op>(n);
  if (!at.is_ok()) return false;
  std::optional<int64_t> prefix;
  if constexpr (Op == ir::Op::Attention) {
    if ((*at)->zero_nan_probs != 0 || (*at)->store_probs != 0) return false;
    prefix = (*at)->prefix;
  }
  const Shape &q = g.node(n.inputs[0]).type.shape, &k = g.node(n.inputs[1]).type.shape, &v = g.node(n.inputs[2]).type.shape;
  const size_t r = q.size();
  if (r < 2 || k.size() != r || v.size() != r) return false;
  int64_t d = q[r - 1], e = v[r - 1];
  if ((*at)->packed_heads) {
    const int64_t h = *(*at)->packed_heads;
    if (h <= 0 || q[r - 1] % (3 * h) != 0) return false;
    d = e = q[r - 1] / (3 * h);
  }
  const int64_t keys = prefix.value_or(k[r - 2]);
  const bool causal = (*at)->causal_offset.has_value();
  return keys == k[r - 2] && tf32x3_attention_shape(q[r - 2], keys, d, e, causal, (*at)->causal_offset.value_or(0));
}

}  // namespace

KernelInfo kernel_info(const ir::Graph& g, const ir::Node& n, Determinism level) {
  if (level < Determinism::Strict && ((n.op == ir::Op::Attention && tf32x3_attention<ir::Op::Attention>(g, n)) ||
                                      (n.op == ir::Op::AttentionGrad && tf32x3_attention<ir::Op::AttentionGrad>(g, n))))
    return {"cuda.attention_tf32x3", Determinism::RunToRun, kTf32x3Attention};
  if (n.op != ir::Op::Matmul || level >= Determinism::Strict || n.inputs.size() != 2) return kernel_info(n);
  const auto ta = n.attrs.get_int("transpose_a", 0);
  const bool trans_a = ta.is_ok() && *ta != 0;
  if (!gemm_batch(g.node(n.inputs[0]).type.shape, g.node(n.inputs[1]).type.shape, n.type.shape, trans_a)) return kernel_info(n);
  return {"cuda.cublas", Determinism::RunToRun, kCublasMatmul};
}

std::optional<GemmBatch> gemm_batch(const Shape& a, const Shape& b, const Shape& out, bool trans_a) {
  if (a.size() < 2 || b.size() < 2 || out.size() < 2) return std::nullopt;
  const int64_t M = out[out.size() - 2], N = out.back(), K = trans_a ? a[a.size() - 2] : a.back();
  const Shape batch(out.begin(), out.end() - 2);
  GemmBatch gb;
  for (int64_t d : batch) gb.batch *= d;
  // An operand's batch dims (right-aligned against the output's): all equal to the output's, or
  // all 1 (or absent).
  auto stride = [&](const Shape& x, int64_t matrix) -> std::optional<int64_t> {
    const size_t xb = x.size() - 2;
    bool all = xb == batch.size(), none = true;
    for (size_t i = 0; i < xb; ++i) {
      const int64_t d = x[i], o = batch[batch.size() - xb + i];
      all = all && d == o;
      none = none && d == 1;
    }
    if (none) return int64_t{0};
    if (all) return matrix;
    return std::nullopt;
  };
  const auto sa = stride(a, M * K), sb = stride(b, K * N);
  if (!sa || !sb || !gemm_fits(M, N, K, gb.batch)) return std::nullopt;
  gb.stride_a = *sa, gb.stride_b = *sb;
  return gb;
}

// Cross-entropy keeps the count of its rows kept and (forward) one double per row for its
// fixed-order mean; grad_norm the chunk sums of each gradient and one sum per gradient;
// attention a flag per query group, its gradient also each query row's softmax statistics.
size_t workspace_bytes(const ir::Graph& g, const ir::Node& n) {
  if (n.op == ir::Op::Attention || n.op == ir::Op::AttentionGrad) {
    const Shape& q = g.node(n.inputs[0]).type.shape;
    if (q.size() < 2) return 0;
    const auto heads = ir::field_of<ir::Op::Attention, ir::Op::AttentionGrad>(n, [](const auto& a) { return a.packed_heads; });
    int64_t groups = heads.is_ok() && heads->value_or(0) > 0 ? **heads : 1;  // packed_heads: the batch times H
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
