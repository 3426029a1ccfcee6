// The CUDA backend's state-updating ops: the KV cache write and the training step's tail
// (optim.cu's kernels), queued on the stream.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/host_checks.h"
#include "backends/cuda/ops.h"
#include "volta/optim.h"

namespace volta::cuda::ops {

// rows [..., T, D] into cache [..., S, D] at the run-time position, in place. The position
// stays on the device: the kernel writes nothing when it is outside [0, S - T] (a decode
// step's position embedding reports that case by name, see docs/cuda.md).
Status cache_write(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  const Shape& c = in[0].shape();
  const size_t r = c.size();
  if (r < 2 || in[2].type.dtype != DType::i32 || out.type.bytes() != in[0].type.bytes())
    return internal_error(prefix(n) + "expects a cache of rank >= 2 and an i32 position " + ir::node_ref(n));
  const int64_t S = c[r - 2], T = in[1].shape()[r - 2];
  const int64_t row_bytes = c[r - 1] * static_cast<int64_t>(dtype_size(in[0].type.dtype));
  if (row_bytes % 4 != 0) return internal_error(prefix(n) + "rows must be whole 4-byte words " + ir::node_ref(n));
  VOLTA_RETURN_IF_ERROR(launched(launch_cache_write(in[0].data, in[1].data, in[2].as<const int32_t>(), product(c, 0, r - 2),
                                                   S, T, row_bytes / 4, stream),
                                 n));
  // Plans alias the output to the cache; a node run on its own (the op-test harness) gets a copy.
  if (out.data == in[0].data || out.type.bytes() == 0) return Status::ok();
  return check(cudaMemcpyAsync(out.data, in[0].data, out.type.bytes(), cudaMemcpyDeviceToDevice, stream),
               prefix(n) + ir::node_ref(n));
}

// Each gradient's sum of squares over its fixed tree (kSquaresBatch gradients a launch pair),
// then their sum in input order.
Status grad_norm(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, std::span<std::byte> workspace, cudaStream_t stream) {
  size_t words = in.size();
  for (const TensorRef& g : in) words += static_cast<size_t>(squares_partials(g.numel()));
  if (workspace.size() < words * sizeof(double) || out.type.dtype != DType::f64)
    return internal_error(prefix(n) + "workspace too small or output not f64 " + ir::node_ref(n));
  auto* sums = reinterpret_cast<double*>(workspace.data());
  double* partials = sums + in.size();
  for (size_t i0 = 0; i0 < in.size(); i0 += kSquaresBatch) {
    SquaresBatch b;
    b.partials = partials, b.sums = sums + i0;
    for (size_t i = i0; i < in.size() && b.count < kSquaresBatch; ++i, ++b.count) {
      if (in[i].type.dtype != DType::f32) return internal_error(prefix(n) + "gradients must be f32 " + ir::node_ref(n));
      b.x[b.count] = in[i].as<const float>(), b.n[b.count] = in[i].numel();
      b.first[b.count + 1] = b.first[b.count] + squares_partials(in[i].numel());
    }
    VOLTA_RETURN_IF_ERROR(launched(launch_sums_of_squares(b, stream), n));
    partials += b.first[b.count];
  }
  return launched(launch_norm_of_sums(sums, static_cast<int64_t>(in.size()), out.as<double>(), stream), n);
}

// (param, grad, norm, lr, step[, slot0[, slot1]]): param and slots updated in place.
Status optimizer_update(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::OptimizerUpdate>(n));
  VOLTA_ASSIGN_OR_RETURN(const optim::Kind kind, optim::parse_kind(at->kind));
  OptimDesc d;
  d.kind = static_cast<int>(kind);  // optim::Kind's order: sgd, adam, adamw
  d.beta1 = at->beta1, d.beta2 = at->beta2, d.eps = at->eps, d.momentum = at->momentum, d.weight_decay = at->weight_decay;
  d.clip = at->clip;
  if (in.size() < 5 || in[0].type.dtype != DType::f32 || in[1].type != in[0].type || (d.kind != 0 && in.size() != 7))
    return internal_error(prefix(n) + "expects (param, grad, norm, lr, step, slots...) " + ir::node_ref(n));
  d.norm = in[2].as<const double>();
  d.lr = in[3].as<const double>();
  d.step = in[4].as<const int64_t>();
  float* s0 = in.size() > 5 ? in[5].as<float>() : nullptr;
  float* s1 = in.size() > 6 ? in[6].as<float>() : nullptr;
  VOLTA_RETURN_IF_ERROR(launched(
      launch_optimizer_update(d, in[0].as<float>(), in[1].as<const float>(), s0, s1, in[0].numel(), stream), n));
  // The f32[] token the increment waits for: 0, as on the CPU.
  return check(cudaMemsetAsync(out.data, 0, out.type.bytes(), stream), prefix(n) + ir::node_ref(n));
}

Status increment(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  return launched(launch_increment(in[0].as<int64_t>(), out.as<int64_t>(), stream), n);
}

}  // namespace volta::cuda::ops
