// The CPU backend's layout kernels, in fixed tasks over the output:
// - transpose: permutations that keep the last axis copy whole rows; others go to the reference;
// - slice, pad and concat along one axis: each output row of the [outer, axis, inner] view is a
//   list of byte segments (a copy from an input, or zeros), written once each;
// - embedding (rows gathered in tasks of positions) and embedding_grad (tasks of columns, each
//   summing its columns over the positions in order in double, as the reference): the ids are
//   checked first, in order, so a bad one is named as the reference names it.
#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

// Transposes that keep the last axis in place copy whole rows.
Status transpose(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Transpose>(a.node));
  const std::vector<int64_t>& perm = at->perm;
  const Shape& s = a.in[0].shape();
  const size_t r = s.size();
  if (r < 2 || perm.back() != static_cast<int64_t>(r) - 1) return run_alone(ref::Transpose, a);
  const size_t es = dtype_size(a.out.type.dtype);
  const int64_t inner = s.back();
  const Shape& os = a.out.shape();
  const Shape outer(os.begin(), os.end() - 1);
  const ref::Strides in_st = ref::contiguous_strides(s);
  ref::Strides st(outer.size());
  for (size_t d = 0; d < outer.size(); ++d) st[d] = in_st[static_cast<size_t>(perm[d])];
  const int64_t rows = ref::count(outer);
  const std::byte* x = a.in[0].data;
  std::byte* y = a.out.data;
  const size_t row_bytes = static_cast<size_t>(inner) * es;
  parallel_for((rows + 255) / 256, [&](int64_t t) {
    // The source offset of the task's first row, then an odometer over the outer dims.
    const int64_t r0 = t * 256, r1 = std::min(rows, r0 + 256);
    std::vector<int64_t> idx(outer.size());
    int64_t rem = r0, off = 0;
    for (size_t d = outer.size(); d-- > 0;) {
      idx[d] = rem % outer[d];
      off += idx[d] * st[d];
      rem /= outer[d];
    }
    for (int64_t row = r0; row < r1; ++row) {
      std::memcpy(y + static_cast<size_t>(row) * row_bytes, x + static_cast<size_t>(off) * es, row_bytes);
      for (size_t d = outer.size(); d-- > 0;) {
        off += st[d];
        if (++idx[d] < outer[d]) break;
        off -= st[d] * outer[d];
        idx[d] = 0;
      }
    }
  });
  return Status::ok();
}

namespace {

// One piece of an output row: `bytes` copied from src + row * src_row (src == nullptr: zeros).
struct Segment {
  const std::byte* src;
  size_t src_row, bytes;
};

// Writes `outer` rows, each the concatenation of `segs`, in tasks of about kTaskElements floats'
// bytes of output cut at fixed byte offsets (so a few huge rows still spread over the threads).
void write_rows(std::byte* out, int64_t outer, std::span<const Segment> segs) {
  size_t row_bytes = 0;
  for (const Segment& s : segs) row_bytes += s.bytes;
  const auto total = static_cast<int64_t>(row_bytes) * outer;
  if (total == 0) return;
  parallel_chunks(total, kTaskElements * static_cast<int64_t>(sizeof(float)), [&](int64_t b, int64_t e) {
    int64_t row = b / static_cast<int64_t>(row_bytes);
    auto at = static_cast<size_t>(b % static_cast<int64_t>(row_bytes));  // offset in the row
    for (int64_t pos = b; pos < e; ++row, at = 0) {
      size_t seg_start = 0;
      for (const Segment& s : segs) {
        const size_t seg_end = seg_start + s.bytes;
        if (at < seg_end && pos < e) {
          const size_t off = at - seg_start, n = std::min(seg_end - at, static_cast<size_t>(e - pos));
          std::byte* dst = out + pos;
          if (s.src) std::memcpy(dst, s.src + static_cast<size_t>(row) * s.src_row + off, n);
          else std::memset(dst, 0, n);
          pos += static_cast<int64_t>(n);
          at += n;
        }
        seg_start = seg_end;
      }
    }
  });
}

}  // namespace

Status slice(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Slice>(a.node));
  const Shape& s = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, ref::normalize_axis(a.node, at->axis, s.size()));
  const int64_t dim = s[axis];
  const int64_t start = std::clamp<int64_t>(at->start < 0 ? at->start + dim : at->start, 0, dim);
  // The output's extent is the rule's [start, end) length; trusting it keeps copies in bounds.
  const int64_t len = std::min(a.out.shape()[axis], dim - start);
  const size_t inner = static_cast<size_t>(ref::dims_product(s, axis + 1, s.size())) * dtype_size(a.out.type.dtype);
  // Segments on the stack: a batched decode step slices every token.
  const std::array<Segment, 1> seg{{{a.in[0].data + static_cast<size_t>(start) * inner, static_cast<size_t>(dim) * inner,
                                     static_cast<size_t>(len) * inner}}};
  write_rows(a.out.data, ref::dims_product(s, 0, axis), seg);
  return Status::ok();
}

Status pad(const KernelArgs& a) {
  if (a.out.type.dtype != DType::f32) return run_alone(ref::Pad, a);
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Pad>(a.node));
  const Shape& xs = a.in[0].shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, ref::normalize_axis(a.node, at->axis, xs.size()));
  const size_t inner = static_cast<size_t>(ref::dims_product(xs, axis + 1, xs.size())) * sizeof(float);
  const auto in_len = static_cast<size_t>(xs[axis]), out_len = static_cast<size_t>(a.out.shape()[axis]);
  const auto before = static_cast<size_t>(at->before);
  if (before + in_len > out_len) return run_alone(ref::Pad, a);  // the rule fixes out_len; stay on the checked path otherwise
  const std::array<Segment, 3> segs{{{nullptr, 0, before * inner},
                                      {a.in[0].data, in_len * inner, in_len * inner},
                                      {nullptr, 0, (out_len - before - in_len) * inner}}};
  write_rows(a.out.data, ref::dims_product(xs, 0, axis), segs);
  return Status::ok();
}

Status concat(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Concat>(a.node));
  const Shape& os = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const size_t axis, ref::normalize_axis(a.node, at->axis, os.size()));
  const size_t inner = static_cast<size_t>(ref::dims_product(os, axis + 1, os.size())) * dtype_size(a.out.type.dtype);
  std::vector<Segment> segs;
  for (const TensorRef& x : a.in) {
    const size_t chunk = static_cast<size_t>(x.shape()[axis]) * inner;
    segs.push_back({x.data, chunk, chunk});
  }
  write_rows(a.out.data, ref::dims_product(os, 0, axis), segs);
  return Status::ok();
}

Status embedding(const KernelArgs& a) {
  const TensorRef& table = a.in[0];
  const TensorRef& ids = a.in[1];
  if (table.shape().size() != 2 || !is_integer(ids.type.dtype)) return run_alone(ref::Embedding, a);
  VOLTA_RETURN_IF_ERROR(read_outside_tasks(&ids, [&] { return ref::check_ids(a, ids, table.shape()[0]); }));
  const size_t row = static_cast<size_t>(table.shape()[1]) * dtype_size(table.type.dtype);
  if (row == 0) return Status::ok();
  parallel_rows(ids.numel(), table.shape()[1], kTaskElements, [&](int64_t p) {
    std::memcpy(a.out.data + static_cast<size_t>(p) * row, table.data + static_cast<size_t>(ref::read_index(ids, p)) * row, row);
  });
  return Status::ok();
}

Status embedding_grad(const KernelArgs& a) {
  const TensorRef& ids = a.in[0];
  const int64_t rows = a.out.shape()[0], D = a.out.shape()[1];
  if (a.workspace.size() < static_cast<size_t>(rows * D) * sizeof(double) || a.in[1].type.dtype != DType::f32)
    return ref::EmbeddingGrad(a);
  VOLTA_RETURN_IF_ERROR(ref::check_ids(a, ids, rows));
  auto* acc = reinterpret_cast<double*>(a.workspace.data());
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  constexpr int64_t kCols = 32;  // columns per task: each sums them over all positions in order
  parallel_for((D + kCols - 1) / kCols, [&](int64_t t) {
    const int64_t d0 = t * kCols, d1 = std::min(D, d0 + kCols);
    for (int64_t r = 0; r < rows; ++r) std::fill(acc + r * D + d0, acc + r * D + d1, 0.0);
    for (int64_t p = 0; p < ids.numel(); ++p) {
      double* ar = acc + ref::read_index(ids, p) * D;
      const float* g = dy + p * D;
      for (int64_t d = d0; d < d1; ++d) ar[d] += g[d];
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t d = d0; d < d1; ++d) out[r * D + d] = static_cast<float>(acc[r * D + d]);
  });
  return Status::ok();
}

}  // namespace volta::cpu
