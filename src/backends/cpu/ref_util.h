// Helpers shared by the reference kernels (ref_*.cpp): strides, strided index walks,
// axis normalisation and small guards. Internal to the CPU backend.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "ir/elementwise_program.h"
#include "volta/ir.h"
#include "volta/op_attrs.h"
#include "volta/tensor.h"

namespace volta::cpu::ref {

using Strides = std::vector<int64_t>;

inline int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major contiguous strides (in elements) of `s`, scaled by `unit`.
inline Strides contiguous_strides(const Shape& s, int64_t unit = 1) {
  Strides st(s.size(), 0);
  int64_t acc = unit;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

// Strides of `in` seen through numpy broadcasting to `out` (right-aligned): a dim that is
// missing or of size 1 gets stride 0 so every output index along it reads the same element.
inline Strides broadcast_strides(const Shape& in, const Shape& out, int64_t unit = 1) {
  const Strides own = contiguous_strides(in, unit);
  Strides st(out.size(), 0);
  const size_t lead = out.size() - in.size();  // type rules guarantee in.rank <= out.rank
  for (size_t d = 0; d < in.size(); ++d) st[lead + d] = in[d] == 1 ? 0 : own[d];
  return st;
}

// Walks every index of `shape` in row-major order, keeping one running offset per strided
// operand; calls f(flat_index, offsets). Odometer increments keep it O(1) amortised per step.
template <size_t N, typename F>
void for_each_index(const Shape& shape, const std::array<Strides, N>& st, F&& f) {
  const int64_t total = count(shape);
  if (total == 0) return;
  const size_t rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t n = 0; n < total; ++n) {
    f(n, off);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < N; ++k) off[k] += st[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k) off[k] -= st[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Product of dims [begin, end) of `s`.
inline int64_t dims_product(const Shape& s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= s[d];
  return n;
}

// Message prefix "[op] " for errors raised by a kernel.
inline std::string op_prefix(const ir::Node& node) { return std::string("[") + ir::op_name(node.op) + "] "; }

// Normalises a possibly negative axis; a bad axis means the type rule was bypassed.
inline Result<size_t> normalize_axis(const ir::Node& node, int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  const int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) {
    return internal_error(op_prefix(node) + "axis " + std::to_string(axis) + " out of range for rank " +
                          std::to_string(rank) + " " + ir::node_ref(node));
  }
  return static_cast<size_t>(a);
}

// The arithmetic kernels take f32 only; anything else means the type rule was bypassed.
inline Status require_f32(const KernelArgs& a) {
  if (a.out.type.dtype != DType::f32) {
    return internal_error(op_prefix(a.node) + "reference kernel computes f32 only, output is " +
                          dtype_name(a.out.type.dtype) + " " + ir::node_ref(a.node));
  }
  for (const TensorRef& t : a.in) {
    if (t.type.dtype != DType::f32) {
      return internal_error(op_prefix(a.node) + "reference kernel computes f32 only, input is " +
                            dtype_name(t.type.dtype) + " " + ir::node_ref(a.node));
    }
  }
  return Status::ok();
}

// A run-time position input (i32, one element) checked to lie in [0, max]: a value the caller
// uploaded, so out of range is an error naming the node, never an out-of-bounds access.
inline Result<int64_t> position_input(const KernelArgs& a, size_t i, int64_t max) {
  const int64_t p = a.in[i].as<const int32_t>()[0];
  if (p < 0 || p > max)
    return invalid_argument(op_prefix(a.node) + "position " + std::to_string(p) + " is outside [0, " + std::to_string(max) +
                            "] " + ir::node_ref(a.node));
  return p;
}

// A causal offset moved by a run-time position p in [0, n] over rows of n keys: the attribute is
// saturated first (beyond ±n every row keeps all or nothing), so the sum cannot overflow.
inline int64_t offset_at(int64_t offset, int64_t n, int64_t p) { return std::clamp<int64_t>(offset, -n - 1, n) + p; }

// The causal offset of a softmax: its attribute plus, with a second input, the run-time position
// (at most the row length n, past which nothing more is masked).
inline Result<int64_t> softmax_offset(const KernelArgs& a, int64_t n, std::optional<int64_t> attr) {
  const int64_t offset = attr.value_or(0);
  if (a.in.size() < 2) return offset;
  VOLTA_ASSIGN_OR_RETURN(const int64_t p, position_input(a, 1, n));
  return offset_at(offset, n, p);
}

inline const float* in_f32(const KernelArgs& a, size_t i) { return a.in[i].as<const float>(); }
inline float* out_f32(const KernelArgs& a) { return a.out.as<float>(); }

// Reads an integer id/target of dtype i32 or i64 as int64.
inline int64_t read_index(const TensorRef& t, int64_t i) {
  return t.type.dtype == DType::i32 ? static_cast<int64_t>(t.as<const int32_t>()[i]) : t.as<const int64_t>()[i];
}

// The first id of `ids` outside [0, rows), in position order, as an error naming it, its position
// and the node (embedding and its gradient, reference and CPU kernels alike).
Status check_ids(const KernelArgs& a, const TensorRef& ids, int64_t rows);

// Row-range forms of the row-wise reference kernels over the last axis: rows [r0, r1). The
// CPU backend runs disjoint ranges on different threads; every row's arithmetic is the same as
// in the whole-tensor kernel, so the bits are too.
int64_t last_axis_rows(const KernelArgs& a);

// out[i] = f(double(x[i])) rounded once to f32, over the whole f32 input 0.
template <typename F>
Status map_unary(const KernelArgs& a, F f) {
  VOLTA_RETURN_IF_ERROR(require_f32(a));
  const float* x = in_f32(a, 0);
  float* out = out_f32(a);
  const int64_t n = a.out.numel();
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(f(static_cast<double>(x[i])));
  return Status::ok();
}

// An attention node's attributes and geometry (ref_attention.cpp; attention.cpp uses it too):
// q [groups..., T, D]; keys and values in up to two blocks per group: block 0 (k, v) holds
// cap[0] rows of which the first used[0] are read (`prefix`), block 1 (k2, v2) cap[1] = used[1]
// rows (0 when absent). With grouped queries k and v have G / rep groups, and query group g
// reads key group g / rep. An additive mask (the 4-input f32 form) broadcasts to the scores
// [groups..., T, S]: mask_row gives the S entries added to query row i of group g.
struct AttentionArgs {
  double scale = 1.0;
  bool causal = false, zero_nan = false;
  int64_t offset = 0;
  int64_t G = 0, T = 0, D = 0, E = 0, rep = 1;
  int64_t cap[2] = {0, 0}, used[2] = {0, 0};
  const float* mask = nullptr;
  // store_probs: the probabilities [G, T, S] follow the output in the result; attention_grad's
  // stored probabilities (its fifth input), read instead of recomputed.
  bool store = false;
  const float* probs = nullptr;
  int64_t probs_off(int64_t g, int64_t i) const { return G * T * E + (g * T + i) * keys(); }
  std::vector<int64_t> groups, mask_group_stride;  // q's group dims, and the mask's stride along each (0: broadcast)
  int64_t mask_row_stride = 0;
  // Where group g's rows of q, k, v (block 0), the output (dy) and attention_grad's dq, dk, dv
  // start, as element offsets, and their row strides. Plain: [.., T, D] per group, the gradients
  // stacked [3, ..]. packed_heads H (`heads`): group g is head g % H of batch g / H, its columns
  // h D.. of q's, k's and v's thirds of the packed [.., T, 3 H D] rows, and of the output's
  // [.., T, H D]; the gradients lie as q, k and v do.
  // k_ds: the stride between a key's values (1; a transposed key cache's keys are columns, k_rs
  // 1 and k_ds its capacity).
  int64_t heads = 0;
  int64_t q_rs = 0, k_rs = 0, v_rs = 0, o_rs = 0, k_ds = 1;
  int64_t keys() const { return used[0] + used[1]; }
  int64_t kv(int64_t g) const { return g / rep; }
  int64_t packed_row(int64_t g) const { return g / heads * T * 3 * heads * D + g % heads * D; }
  int64_t q_off(int64_t g) const { return heads ? packed_row(g) : g * T * D; }
  int64_t k_off(int64_t g) const { return heads ? packed_row(g) + heads * D : kv(g) * cap[0] * D; }
  int64_t v_off(int64_t g) const { return heads ? packed_row(g) + 2 * heads * D : kv(g) * cap[0] * E; }
  int64_t o_off(int64_t g) const { return heads ? g / heads * T * heads * D + g % heads * D : g * T * E; }
  int64_t grad_off(int64_t part, int64_t g) const {  // part 0, 1, 2: dq, dk, dv
    return heads ? packed_row(g) + part * heads * D : (part * G + g) * T * D;
  }
  int64_t grad_rs() const { return heads ? 3 * heads * D : D; }
  // Fills the layout fields above for the plain form (heads == 0) or packed_heads `h`.
  void set_layout(int64_t h, bool keys_transposed = false) {
    heads = h;
    q_rs = k_rs = h ? 3 * h * D : D;
    k_ds = 1;
    if (keys_transposed) k_rs = 1, k_ds = cap[0];
    v_rs = h ? 3 * h * D : E;
    o_rs = h ? h * D : E;
  }
  const float* mask_row(int64_t g, int64_t i) const {
    int64_t off = i * mask_row_stride;
    for (size_t d = groups.size(); d-- > 0;) {
      off += g % groups[d] * mask_group_stride[d];
      g /= groups[d];
    }
    return mask + off;
  }
};
Result<AttentionArgs> attention_args(const KernelArgs& a);
// cache_attention's: q [.., T, D], the caches (block 0: their first `position` rows, cap[0] rows a
// group), then the new rows k, v (block 1: T rows a group).
Result<AttentionArgs> cache_attention_args(const KernelArgs& a);
// cache_attention's write: key head kv's new rows (inputs 3, 4) into the caches (inputs 1, 2) at
// rows position.. (the reference's loop, and the CPU kernel's task that takes its first query head).
void write_new_rows(const KernelArgs& a, const AttentionArgs& at, int64_t kv);
// attention_grad's: q, k, v, dy of self-attention ([.., T, D], k and v with G / rep groups).
Result<AttentionArgs> attention_grad_args(const KernelArgs& a);
// rope's first position (0, or its position input checked against the tables) and rows [r0, r1)
// of x as [rows, D] (ref_attention.cpp; the CPU backend runs ranges on threads).
Result<int64_t> rope_position(const KernelArgs& a);
void rope_rows(const KernelArgs& a, int64_t position, int64_t r0, int64_t r1);
// The rows of cross_entropy(_grad) whose target is not ignore_index, after checking every other
// target is in [0, C) (an error names the first that is not, and the node).
Result<int64_t> count_targets(const KernelArgs& a, std::optional<int64_t> ignore_index);
// The node's parsed `program` (fused_elementwise); an error names the node.
Result<ir::ElementwiseProgram> elementwise_program(const KernelArgs& a);
Status layer_norm_rows(const KernelArgs& a, double eps, int64_t r0, int64_t r1);
Status rms_norm_rows(const KernelArgs& a, double eps, int64_t r0, int64_t r1);
Status norm_grad_rows(const KernelArgs& a, bool center, double eps, int64_t r0, int64_t r1);  // layer_norm_grad, rms_norm_grad

}  // namespace volta::cpu::ref
