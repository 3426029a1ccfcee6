// The CUDA backend's layout ops (layout.cu's kernels and pitched copies): shapes and attributes
// read on the host, the work queued on the stream.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/host_checks.h"
#include "backends/cuda/ops.h"
#include "volta/optim.h"

namespace volta::cuda::ops {

Status reshape(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  const size_t bytes = std::min(out.type.bytes(), in[0].type.bytes());
  if (bytes == 0) return Status::ok();
  return check(cudaMemcpyAsync(out.data, in[0].data, bytes, cudaMemcpyDeviceToDevice, stream),
               prefix(n) + ir::node_ref(n));
}

Status transpose(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Transpose>(n));
  const std::vector<int64_t>& perm = at->perm;
  const Shape& is = in[0].shape();
  const Shape& os = out.shape();
  if (perm.size() != is.size() || os.size() != is.size())
    return internal_error(prefix(n) + "perm does not match the input rank " + ir::node_ref(n));
  VOLTA_RETURN_IF_ERROR(check_rank(n, os.size()));
  int64_t in_st[kMaxRank];
  int64_t acc = 1;
  for (size_t d = is.size(); d-- > 0;) {
    in_st[d] = acc;
    acc *= is[d];
  }
  StridedIndex idx;
  idx.rank = static_cast<int>(os.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    VOLTA_ASSIGN_OR_RETURN(const size_t p, axis_of(n, perm[i], is.size()));
    idx.dims[i] = os[i];
    idx.strides[0][i] = in_st[p];
  }
  return launched(launch_permute(in[0].data, out.data, out.numel(), static_cast<int>(dtype_size(out.type.dtype)), idx,
                                 stream),
                  n);
}

// One pitched copy: `outer` rows of `chunk` bytes.
Status slice(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Slice>(n));
  const int64_t axis_attr = at->axis;
  int64_t start = at->start;
  const Shape& sh = in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, sh.size()));
  const int64_t dim = sh[axis];
  if (start < 0) start += dim;
  start = std::clamp<int64_t>(start, 0, dim);
  const int64_t len = std::min(out.shape()[axis], dim - start);  // the rule's extent keeps copies in bounds
  const int64_t outer = product(sh, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(product(sh, axis + 1, sh.size())) * dtype_size(out.type.dtype);
  const size_t chunk = static_cast<size_t>(len) * inner_bytes;
  if (chunk == 0 || outer == 0) return Status::ok();
  return check(cudaMemcpy2DAsync(out.data, chunk, in[0].data + static_cast<size_t>(start) * inner_bytes,
                                 static_cast<size_t>(dim) * inner_bytes, chunk, static_cast<size_t>(outer),
                                 cudaMemcpyDeviceToDevice, stream),
               prefix(n) + "cudaMemcpy2DAsync " + ir::node_ref(n));
}

// One pitched copy per input into its column band of the output rows.
Status concat(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Concat>(n));
  const int64_t axis_attr = at->axis;
  const Shape& os = out.shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, os.size()));
  const int64_t outer = product(os, 0, axis);
  const size_t inner_bytes = static_cast<size_t>(product(os, axis + 1, os.size())) * dtype_size(out.type.dtype);
  const size_t row = static_cast<size_t>(os[axis]) * inner_bytes;
  size_t col = 0;
  for (const TensorRef& x : in) {
    const size_t chunk = static_cast<size_t>(x.shape()[axis]) * inner_bytes;
    if (chunk && outer)
      VOLTA_RETURN_IF_ERROR(check(cudaMemcpy2DAsync(out.data + col, row, x.data, chunk, chunk, static_cast<size_t>(outer),
                                                    cudaMemcpyDeviceToDevice, stream),
                                  prefix(n) + "cudaMemcpy2DAsync " + ir::node_ref(n)));
    col += chunk;
  }
  return Status::ok();
}

// Zeros, then one pitched copy of the input rows into their band of the output rows.
Status pad(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  VOLTA_RETURN_IF_ERROR(require_f32(n, in, out));
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Pad>(n));
  const int64_t axis_attr = at->axis, before = at->before;
  const Shape& xs = in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, axis_of(n, axis_attr, xs.size()));
  const int64_t outer = product(xs, 0, axis), inner = product(xs, axis + 1, xs.size());
  const int64_t in_len = xs[axis], out_len = out.shape()[axis];
  if (before < 0 || before + in_len > out_len) return internal_error(prefix(n) + "pad band out of range " + ir::node_ref(n));
  if (out.type.bytes() == 0) return Status::ok();
  VOLTA_RETURN_IF_ERROR(check(cudaMemsetAsync(out.data, 0, out.type.bytes(), stream), prefix(n) + ir::node_ref(n)));
  const size_t width = static_cast<size_t>(in_len * inner) * sizeof(float);
  if (width == 0 || outer == 0) return Status::ok();
  return check(cudaMemcpy2DAsync(out.data + static_cast<size_t>(before * inner) * sizeof(float),
                                 static_cast<size_t>(out_len * inner) * sizeof(float), in[0].data, width, width,
                                 static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, stream),
               prefix(n) + "cudaMemcpy2DAsync " + ir::node_ref(n));
}

Status broadcast(const ir::Node& n, std::span<const TensorRef> in, const TensorRef& out, cudaStream_t stream) {
  const Shape& os = out.shape();
  VOLTA_RETURN_IF_ERROR(check_rank(n, os.size()));
  if (in[0].shape().size() > os.size()) return internal_error(prefix(n) + "input rank above the output's " + ir::node_ref(n));
  StridedIndex idx;
  idx.rank = static_cast<int>(os.size());
  for (size_t d = 0; d < os.size(); ++d) idx.dims[d] = os[d];
  broadcast_strides(in[0].shape(), os, 1, idx.strides[0]);
  return launched(launch_permute(in[0].data, out.data, out.numel(), static_cast<int>(dtype_size(out.type.dtype)), idx,
                                 stream),
                  n);
}

}  // namespace volta::cuda::ops
