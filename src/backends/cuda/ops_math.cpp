// The CUDA backend's arithmetic ops: elementwise, activations, norms, softmax, reductions,
// matmul (its own strict kernel) and attention; shapes and attributes read on the host, plain
// numbers handed to the launchers of kernels.h, the work queued on the stream.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/host_checks.h"
#include "backends/cuda/ops.h"
#include "volta/optim.h"

namespace volta::cuda::ops {

Status gelu(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Gelu>(n));
  const bool tanh_form = at->approximate == "tanh";
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  return launched(launch_gelu(in[0].as<const float>(), out.as<float>(), out.numel(), tanh_form, stream), n);
}

// layer_norm (center) or rms_norm over the last axis.
Status norm(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool center, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const double eps, (ir::field_of<Op::LayerNorm, Op::RmsNorm>(n, [](const auto& a) { return a.eps; })));
  const Shape& sh = in[0].shape();
  const int64_t D = sh.empty() ? 0 : sh.back();
  const int64_t rows = D == 0 ? 0 : in[0].numel() / D;
  const float* beta = center && in.size() > 2 ? in[2].as<const float>() : nullptr;
  return launched(launch_norm(in[0].as<const float>(), in[1].as<const float>(), beta, out.as<float>(), rows, D, eps,
                              center, stream),
                  n);
}

Status causal_mask(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::CausalMask>(n));
  const int64_t offset = at->offset;
  const double fill = at->value;
  const Shape& sh = in[0].shape();
  if (sh.size() < 2) return internal_error(prefix(n) + "input must have rank >= 2 " + ir::node_ref(n));
  const int64_t R = sh[sh.size() - 2], C = sh.back();
  return launched(launch_causal_mask(in[0].as<const float>(), out.as<float>(), product(sh, 0, sh.size() - 2), R, C, offset,
                                     static_cast<float>(fill), stream),
                  n);
}

Status relu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  return launched(
      launch_relu_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(), stream), n);
}

Status silu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  return launched(launch_silu_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(), stream), n);
}

Status gelu_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GeluGrad>(n));
  return launched(launch_gelu_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(),
                                   at->approximate == "tanh", stream),
                  n);
}

Status softmax_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::SoftmaxGrad>(n));
  const double scale = at->scale;
  const Shape& sh = in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, at->axis, sh.size()));
  return launched(launch_softmax_grad(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(),
                                      product(sh, 0, axis), sh[axis], product(sh, axis + 1, sh.size()), scale,
                                      stream),
                  n);
}

// dx of layer_norm (center) or rms_norm.
Status norm_grad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool center, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const double eps,
                         (ir::field_of<Op::LayerNormGrad, Op::RmsNormGrad>(n, [](const auto& a) { return a.eps; })));
  const Shape& sh = in[0].shape();
  const int64_t D = sh.empty() ? 0 : sh.back();
  const int64_t rows = D == 0 ? 0 : in[0].numel() / D;
  return launched(launch_norm_grad(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                                   out.as<float>(), rows, D, eps, center, stream),
                  n);
}

// x [..., T, D] rotated by rows 0.. (or position..) of the tables. The position stays on the
// device: out of range, the output is nan (the CPU reports it by name).
Status rope(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  const Shape& x = in[0].shape();
  const int64_t D = x.back(), T = x[x.size() - 2];
  return launched(launch_rope(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                              in.size() == 4 ? in[3].as<const int32_t>() : nullptr, out.as<float>(), D == 0 ? 0 : in[0].numel() / D,
                              T, D / 2, in[1].shape()[0], stream),
                  n);
}

// attention (q, k, v[, k2, v2 | position]) and attention_grad (q, k, v, dy): shapes as
// ref_attention.cpp reads them; the position stays on the device (out of range: nan output,
// which TinyLM's position embedding reports by name first, as for rope).
Status attention(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace, cudaStream_t stream,
                 bool tensor_cores) {
  const bool grad = n.op == Op::AttentionGrad;
  const bool position = !grad && in.size() == 4 && in[3].type.dtype == DType::i32;
  if (!grad && in.size() == 4 && !position)
    return unimplemented(prefix(n) + "an additive mask input has no CUDA kernel yet " + ir::node_ref(n));
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].type.dtype != DType::f32 && !(position && i == 3))
      return internal_error(prefix(n) + "CUDA kernel computes f32 only " + ir::node_ref(n));
  if (out.type.dtype != DType::f32) return internal_error(prefix(n) + "CUDA kernel computes f32 only " + ir::node_ref(n));
  AttentionDesc d;
  std::optional<int64_t> causal_offset, prefix_rows, packed_heads;
  if (grad) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::AttentionGrad>(n));
    d.scale = at->scale, causal_offset = at->causal_offset, packed_heads = at->packed_heads;
  } else {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Attention>(n));
    d.scale = at->scale, causal_offset = at->causal_offset, prefix_rows = at->prefix, packed_heads = at->packed_heads;
    if (at->zero_nan_probs != 0) return unimplemented(prefix(n) + "zero_nan_probs has no CUDA kernel yet " + ir::node_ref(n));
  }
  d.causal = causal_offset.has_value();
  d.offset = causal_offset.value_or(0);
  const Shape& qs = in[0].shape();
  const size_t r = qs.size();
  if (r < 2 || in[1].shape().size() != r || in[2].shape().size() != r)
    return internal_error(prefix(n) + "expects q, k, v of one rank >= 2 " + ir::node_ref(n));
  d.G = product(qs, 0, r - 2), d.T = qs[r - 2], d.D = qs[r - 1], d.E = in[2].shape()[r - 1];
  const int64_t kv_groups = product(in[1].shape(), 0, r - 2);
  d.rep = kv_groups == 0 ? 1 : d.G / kv_groups;
  if (packed_heads) {  // q, k, v [.., T, 3 H D] (the shape rule checked them): G = batch * H, rep 1
    if (*packed_heads <= 0 || qs[r - 1] % (3 * *packed_heads) != 0)
      return internal_error(prefix(n) + "packed_heads does not divide the packed rows " + ir::node_ref(n));
    d.heads = *packed_heads;
    d.G *= d.heads, d.D = d.E = qs[r - 1] / (3 * d.heads), d.rep = 1;
  }
  d.cap = in[1].shape()[r - 2];
  d.S1 = prefix_rows.value_or(d.cap);
  d.S2 = in.size() == 5 ? in[3].shape()[r - 2] : 0;
  if (position) d.position = in[3].as<const int32_t>();
  if (d.D > kAttentionMaxDim || d.E > kAttentionMaxDim)
    return unimplemented(prefix(n) + "the CUDA kernel takes head dims up to " + std::to_string(kAttentionMaxDim) + ", not " +
                         std::to_string(std::max(d.D, d.E)) + " " + ir::node_ref(n));
  const size_t need = static_cast<size_t>(attention_workspace_bytes(d.G, d.T, grad));
  if (workspace.size() < need) return internal_error(prefix(n) + "workspace too small " + ir::node_ref(n));
  int* finite = reinterpret_cast<int*>(workspace.data());
  if (grad) {
    auto* stats = reinterpret_cast<double*>(workspace.data() + attention_flags_bytes(d.G));
    float* probs = attention_stored_probs_bytes(d.G, d.T) == 0
                       ? nullptr
                       : reinterpret_cast<float*>(workspace.data() + attention_flags_bytes(d.G) + attention_stats_bytes(d.G, d.T));
    auto* launch = tensor_cores ? launch_attention_grad_run_to_run : launch_attention_grad;
    return launched(launch(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(), in[3].as<const float>(),
                           out.as<float>(), d, finite, stats, probs, stream),
                    n);
  }
  const float* k2 = in.size() == 5 ? in[3].as<const float>() : nullptr;
  const float* v2 = in.size() == 5 ? in[4].as<const float>() : nullptr;
  auto* launch = tensor_cores ? launch_attention_run_to_run : launch_attention;
  return launched(launch(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(), k2, v2, out.as<float>(), d, finite, stream),
                  n);
}

Status swiglu(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  const int64_t F = in[0].shape().back() / 2;
  return launched(launch_swiglu(in[0].as<const float>(), in.size() == 2 ? in[1].as<const float>() : nullptr, out.as<float>(),
                                F == 0 ? 0 : in[0].numel() / (2 * F), F, stream),
                  n);
}

// An operand's period in the output (launch_binary): 0 when it is out-shaped, its element count
// when its dims past leading 1s are out's last dims (a bias), -1 otherwise.
static int64_t period(const Shape& s, const Shape& out) {
  if (s == out) return 0;
  size_t lead = 0;
  while (lead < s.size() && s[lead] == 1) ++lead;
  const size_t k = s.size() - lead;
  if (k > out.size() || !std::equal(s.begin() + static_cast<std::ptrdiff_t>(lead), s.end(), out.end() - static_cast<std::ptrdiff_t>(k)))
    return -1;
  const int64_t p = product(s, lead, s.size());
  return p > 0 ? p : -1;
}

Status binary(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  const Shape& os = out.shape();
  VOLTA_RETURN_IF_ERROR(check_rank(n, os.size()));
  StridedIndex idx;
  idx.rank = static_cast<int>(os.size());
  for (size_t d = 0; d < os.size(); ++d) idx.dims[d] = os[d];
  broadcast_strides(in[0].shape(), os, 1, idx.strides[0]);
  broadcast_strides(in[1].shape(), os, 1, idx.strides[1]);
  return launched(launch_binary(n.op, in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), out.numel(), idx,
                                period(in[0].shape(), os), period(in[1].shape(), os), stream),
                  n);
}

Status unary(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  return launched(launch_unary(n.op, in[0].as<const float>(), out.as<float>(), out.numel(), stream), n);
}

Status matmul(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(n));
  // This backend has no `matmul.epilogue` or `matmul.residual` feature (the passes that write
  // them are off for it); a hand-written bias, activation or residual is refused rather than dropped.
  if (in.size() > 2 || at->activation != "none" || at->residual)
    return unimplemented(prefix(n) + "a bias, activation or residual epilogue has no CUDA kernel (write the adds / "
                                     "activation as separate ops) " + ir::node_ref(n));
  if (at->a_perm || at->b_perm || at->out_perm)
    return unimplemented(prefix(n) + "operands or a result through a perm have no CUDA kernel (write the transposes "
                                     "as separate ops) " + ir::node_ref(n));
  if (at->b_packed) return unimplemented(prefix(n) + "a weight in the CPU's packed layout (b_packed) has no CUDA kernel " + ir::node_ref(n));
  const int64_t ta = at->transpose_a, tb = at->transpose_b;
  const Shape& as = in[0].shape();
  const Shape& bs = in[1].shape();
  const Shape& os = out.shape();
  if (as.size() < 2 || bs.size() < 2 || os.size() < 2)
    return internal_error(prefix(n) + "operands must have rank >= 2 " + ir::node_ref(n));
  VOLTA_RETURN_IF_ERROR(check_rank(n, os.size() - 2));
  MatmulDesc d;
  d.M = os[os.size() - 2];
  d.N = os.back();
  d.K = ta ? as[as.size() - 2] : as.back();
  d.a_m = ta ? 1 : d.K;
  d.a_k = ta ? d.M : 1;
  d.b_k = tb ? 1 : d.N;
  d.b_n = tb ? d.K : 1;
  const Shape batch(os.begin(), os.end() - 2);
  d.batch = product(batch, 0, batch.size());
  d.batch_index.rank = static_cast<int>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) d.batch_index.dims[i] = batch[i];
  broadcast_strides(Shape(as.begin(), as.end() - 2), batch, d.M * d.K, d.batch_index.strides[0]);
  broadcast_strides(Shape(bs.begin(), bs.end() - 2), batch, d.K * d.N, d.batch_index.strides[1]);
  return launched(launch_matmul(in[0].as<const float>(), in[1].as<const float>(), out.as<float>(), d, stream), n);
}

Status softmax(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, bool as_log, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in.subspan(0, 1), out));
  VOLTA_ASSIGN_OR_RETURN(const int64_t axis_attr, (ir::field_of<Op::Softmax, Op::LogSoftmax>(n, [](const auto& a) { return a.axis; })));
  const Shape& sh = in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, sh.size()));
  SoftmaxDesc d;
  d.outer = product(sh, 0, axis);
  d.n = sh[axis];
  d.inner = product(sh, axis + 1, sh.size());
  if (!as_log) {  // log_softmax has no scale or mask
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<Op::Softmax>(n));
    d.scale = at->scale;
    d.causal = at->causal_offset.has_value();
    d.offset = at->causal_offset.value_or(0);
  }
  if (d.causal && sh.size() < 2) return internal_error(prefix(n) + "a causal softmax needs rank >= 2 " + ir::node_ref(n));
  d.rows = d.causal ? sh[sh.size() - 2] : 1;
  d.as_log = as_log;
  if (in.size() == 2) {  // the run-time part of the causal offset, read on the device
    if (!d.causal || in[1].type.dtype != DType::i32)
      return internal_error(prefix(n) + "a position input needs causal_offset and i32 " + ir::node_ref(n));
    d.position = in[1].as<const int32_t>();
    d.offset = std::clamp<int64_t>(d.offset, -d.n - 1, d.n);  // as the CPU saturates it
  }
  return launched(launch_softmax(in[0].as<const float>(), out.as<float>(), d, stream), n);
}

Status reduce(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, ReduceOp op, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const std::vector<int64_t> axes, (ir::field_of<Op::ReduceSum, Op::ReduceMean, Op::ReduceMax>(
                                                              n, [](const auto& a) { return a.axes; })));
  const Shape& sh = in[0].shape();
  VOLTA_RETURN_IF_ERROR(check_rank(n, sh.size()));
  std::vector<bool> reduced(sh.size(), false);
  for (int64_t a : axes) {
    VOLTA_ASSIGN_OR_RETURN(const size_t d, axis_of(n, a, sh.size()));
    reduced[d] = true;
  }
  // The reduced dims as one band between kept ones (size-1 dims aside): [O, R, I].
  int64_t band[3] = {1, 1, 1};
  int part = 0;  // 0: kept dims before the band, 1: the band, 2: kept dims after it
  bool banded = true;
  for (size_t d = 0; d < sh.size() && banded; ++d) {
    if (sh[d] == 1) continue;
    if (sh[d] == 0) banded = false;
    if (reduced[d] && part == 2) banded = false;
    if (reduced[d]) part = 1;
    if (!reduced[d] && part == 1) part = 2;
    band[part] *= sh[d];
  }
  if (banded && part > 0)
    return launched(launch_reduce_band(op, in[0].as<const float>(), out.as<float>(), band[0], band[1], band[2], stream), n);
  StridedIndex kept, red;
  int64_t stride = 1, n_out = 1, n_red = 1;
  std::vector<int64_t> strides(sh.size());
  for (size_t d = sh.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sh[d];
  }
  for (size_t d = 0; d < sh.size(); ++d) {
    StridedIndex& idx = reduced[d] ? red : kept;
    idx.dims[idx.rank] = sh[d];
    idx.strides[0][idx.rank] = strides[d];
    ++idx.rank;
    (reduced[d] ? n_red : n_out) *= sh[d];
  }
  return launched(launch_reduce(op, in[0].as<const float>(), out.as<float>(), kept, n_out, red, n_red, stream), n);
}

}  // namespace volta::cuda::ops
