// The CPU backend's own kernels for the ops that dominate training time, beside the reference
// kernels they are tested against (the op-test harness, tests/ops/). Each has a fast path for the
// common layouts and falls back to the reference kernel otherwise. Work is split into tasks by
// the shape alone and every reduction keeps a fixed order, so results do not depend on the
// thread count.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <utility>

#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "ir/scalar_math.h"

namespace volta::cpu {

namespace {

constexpr int64_t kChunk = 16384;  // elements per task of elementwise loops

// Runs f(begin, end) over [0, n) in fixed chunks.
template <typename F>
void chunks(int64_t n, F&& f) {
  parallel_chunks(n, kChunk, f);
}

// Runs f(row) for rows [0, n) of `len` elements each, in tasks of about kChunk elements.
template <typename F>
void chunk_rows(int64_t n, int64_t len, F&& f) {
  parallel_rows(n, len, kChunk, f);
}

// reduce_sum whose reduced axes form one contiguous range: x viewed as [outer, R, inner].
// Each output is summed over r in index order (in 16-lane groups of outputs, or in lanes along
// a contiguous row when inner is 1); tasks are fixed by the shape.
Status reduce_sum(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::ReduceSum>(a.node));
  const std::vector<int64_t>& axes = at->axes;
  if (a.in[0].type.dtype != DType::f32) return ref::ReduceSum(a);
  const Shape& s = a.in[0].shape();
  std::vector<bool> red(s.size(), false);
  for (int64_t ax : axes) red[static_cast<size_t>(ax < 0 ? ax + static_cast<int64_t>(s.size()) : ax)] = true;
  size_t first = s.size(), last = 0;
  for (size_t d = 0; d < s.size(); ++d)
    if (red[d]) first = std::min(first, d), last = d;
  if (first == s.size()) return ref::ReduceSum(a);  // nothing reduced: a copy
  for (size_t d = first; d <= last; ++d)
    if (!red[d]) return ref::ReduceSum(a);  // not one contiguous range
  const int64_t outer = ref::dims_product(s, 0, first), R = ref::dims_product(s, first, last + 1),
                inner = ref::dims_product(s, last + 1, s.size());
  const float* x = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  if (inner == 1) {
    chunk_rows(outer, R, [&](int64_t o) { out[o] = row_sum(x + o * R, R); });
    return Status::ok();
  }
  constexpr int64_t kCols = 256;  // output columns per task
  const int64_t col_tasks = (inner + kCols - 1) / kCols;
  parallel_for(outer * col_tasks, [&](int64_t t) {
    const int64_t o = t / col_tasks, j0 = (t % col_tasks) * kCols;
    column_sums(x + o * R * inner + j0, inner, R, out + o * inner + j0, std::min(kCols, inner - j0));
  });
  return Status::ok();
}

// softmax / log_softmax over the last axis, one row at a time (vec_math.cpp), with the
// optional scale and causal mask of a fused attention softmax.
Status softmax(const KernelArgs& a, bool as_log, int64_t axis, double scale, std::optional<int64_t> causal_offset) {
  const bool causal = causal_offset.has_value();
  const Shape& s = a.in[0].shape();
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return as_log ? ref::LogSoftmax(a) : ref::Softmax(a);
  VOLTA_ASSIGN_OR_RETURN(const int64_t offset, ref::softmax_offset(a, s.back(), causal_offset));
  const int64_t C = s.back(), rows = C == 0 ? 0 : a.in[0].numel() / C, R = causal ? s[s.size() - 2] : 1;
  const float* x = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  chunk_rows(rows, C, [&](int64_t r) {
    softmax_row(x + r * C, out + r * C, C, causal ? r % R + offset + 1 : C, static_cast<float>(scale), as_log);
  });
  return Status::ok();
}

Status softmax_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::SoftmaxGrad>(a.node));
  const int64_t axis = at->axis;
  const double scale = at->scale;
  const Shape& s = a.in[0].shape();
  if (axis != -1 && axis != static_cast<int64_t>(s.size()) - 1) return ref::SoftmaxGrad(a);
  const int64_t C = s.back(), rows = C == 0 ? 0 : a.in[0].numel() / C;
  const float* y = a.in[0].as<const float>();
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  chunk_rows(rows, C, [&](int64_t r) { softmax_grad_row(y + r * C, dy + r * C, out + r * C, C, static_cast<float>(scale)); });
  return Status::ok();
}

// layer_norm / rms_norm and their gradients over the last axis, one row at a time.
Status norm(const KernelArgs& a, bool center, bool grad) {
  VOLTA_ASSIGN_OR_RETURN(const double eps,
                         (ir::field_of<ir::Op::LayerNorm, ir::Op::RmsNorm, ir::Op::LayerNormGrad, ir::Op::RmsNormGrad>(
                             a.node, [](const auto& at) { return at.eps; })));
  const int64_t D = a.in[0].shape().back(), rows = ref::last_axis_rows(a);
  const float* x = a.in[0].as<const float>();
  const float* gamma = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  const auto e = static_cast<float>(eps);
  if (grad) {
    const float* dy = a.in[2].as<const float>();
    chunk_rows(rows, D, [&](int64_t r) { norm_grad_row(x + r * D, gamma, dy + r * D, out + r * D, D, e, center); });
    return Status::ok();
  }
  const float* beta = a.in.size() > 2 ? a.in[2].as<const float>() : nullptr;
  chunk_rows(rows, D, [&](int64_t r) { norm_row(x + r * D, gamma, beta, out + r * D, D, e, center); });
  return Status::ok();
}

// Cross-entropy over rows of logits [..., C]: the per-row losses are kept and summed in row
// order, so the mean does not depend on the split; rows of out-of-range targets are an error.
Result<int64_t> count_targets(const KernelArgs& a, std::optional<int64_t> ignore_index) {
  const bool has_ignore = ignore_index.has_value();
  const int64_t ignore = ignore_index.value_or(0);
  const int64_t C = a.in[0].shape().back(), rows = a.in[1].numel();
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = ref::read_index(a.in[1], r);
    if (has_ignore && t == ignore) continue;
    if (t < 0 || t >= C)
      return invalid_argument(ref::op_prefix(a.node) + "target " + std::to_string(t) + " at flat position " +
                              std::to_string(r) + " is outside [0, " + std::to_string(C) + ") " + ir::node_ref(a.node));
    ++counted;
  }
  return counted;
}

Status cross_entropy(const KernelArgs& a, bool grad) {
  VOLTA_ASSIGN_OR_RETURN(const std::optional<int64_t> ignore_index,
                         (ir::field_of<ir::Op::CrossEntropy, ir::Op::CrossEntropyGrad>(
                             a.node, [](const auto& at) { return at.ignore_index; })));
  if (a.in[0].type.dtype != DType::f32 || a.in[0].shape().empty() || !is_integer(a.in[1].type.dtype))
    return grad ? ref::CrossEntropyGrad(a) : ref::CrossEntropy(a);
  VOLTA_ASSIGN_OR_RETURN(const int64_t counted, count_targets(a, ignore_index));
  const bool has_ignore = ignore_index.has_value();
  const int64_t ignore = ignore_index.value_or(0);
  const int64_t C = a.in[0].shape().back(), rows = a.in[1].numel();
  const float* x = a.in[0].as<const float>();
  auto target = [&](int64_t r) { return ref::read_index(a.in[1], r); };
  if (!grad) {
    std::vector<float> loss(static_cast<size_t>(rows), 0.0f);
    chunk_rows(rows, C, [&](int64_t r) {
      const int64_t t = target(r);
      if (has_ignore && t == ignore) return;
      thread_local std::vector<float> row;  // -log_softmax(x)[t] via one log-softmax row
      row.resize(static_cast<size_t>(C));
      softmax_row(x + r * C, row.data(), C, C, 1.0f, true);
      loss[static_cast<size_t>(r)] = -row[static_cast<size_t>(t)];
    });
    double total = 0.0;
    for (float l : loss) total += l;
    a.out.as<float>()[0] = static_cast<float>(total / static_cast<double>(counted));  // 0/0 = nan: nothing counted
    return Status::ok();
  }
  const double dloss = a.in[2].as<const float>()[0];
  const auto scale = static_cast<float>(counted ? dloss / static_cast<double>(counted) : 0.0);
  float* out = a.out.as<float>();
  chunk_rows(rows, C, [&](int64_t r) {
    float* gr = out + r * C;
    const int64_t t = target(r);
    if (has_ignore && t == ignore) {
      std::fill_n(gr, C, 0.0f);
      return;
    }
    softmax_row(x + r * C, gr, C, C, 1.0f, false);
    gr[t] -= 1.0f;
    for (int64_t c = 0; c < C; ++c) gr[c] *= scale;
  });
  return Status::ok();
}

constexpr float kSqrt2OverPi = 0.7978845608f;

Status gelu(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Gelu>(a.node));
  const bool tanh_form = at->approximate == "tanh";
  const float* x = a.in[0].as<const float>();
  float* y = a.out.as<float>();
  if (!tanh_form) {
    chunks(a.out.numel(), [&](int64_t b, int64_t e) { gelu_erf(x + b, y + b, e - b); });
    return Status::ok();
  }
  chunks(a.out.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = x[i];
      y[i] = tanh_form ? 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)))
                       : 0.5f * v * (1.0f + std::erf(v * static_cast<float>(std::numbers::sqrt2 / 2)));
    }
  });
  return Status::ok();
}

Status gelu_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::GeluGrad>(a.node));
  const bool tanh_form = at->approximate == "tanh";
  const float* x = a.in[0].as<const float>();
  const float* dy = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  if (!tanh_form) {
    chunks(a.out.numel(), [&](int64_t b, int64_t e) { gelu_erf_grad(x + b, dy + b, out + b, e - b); });
    return Status::ok();
  }
  const auto inv_sqrt_2pi = static_cast<float>(1.0 / std::sqrt(2.0 * std::numbers::pi));
  chunks(a.out.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = x[i];
      float d;
      if (tanh_form) {
        const float t = std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v));
        d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * v * v);
      } else {
        d = 0.5f * (1.0f + std::erf(v * static_cast<float>(std::numbers::sqrt2 / 2))) + v * inv_sqrt_2pi * std::exp(-0.5f * v * v);
      }
      out[i] = d * dy[i];
    }
  });
  return Status::ok();
}

// Transposes that keep the last axis in place copy whole rows.
Status transpose(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Transpose>(a.node));
  const std::vector<int64_t>& perm = at->perm;
  const Shape& s = a.in[0].shape();
  const size_t r = s.size();
  if (r < 2 || perm.back() != static_cast<int64_t>(r) - 1) return ref::Transpose(a);
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
  parallel_for((rows + 255) / 256, [&](int64_t t) {
    for (int64_t row = t * 256; row < std::min(rows, (t + 1) * 256); ++row) {
      int64_t rem = row, off = 0;
      for (size_t d = outer.size(); d-- > 0;) {
        off += (rem % outer[d]) * st[d];
        rem /= outer[d];
      }
      std::memcpy(y + static_cast<size_t>(row * inner) * es, x + static_cast<size_t>(off) * es, static_cast<size_t>(inner) * es);
    }
  });
  return Status::ok();
}

// add / sub / mul / div where b has a's shape, or a's trailing dims (a row broadcast), or is a
// scalar; other broadcasts go to the reference kernel.
template <typename Op>
Status binary(const KernelArgs& a, Status (*fallback)(const KernelArgs&), Op op) {
  const Shape& as = a.in[0].shape();
  const Shape& bs = a.in[1].shape();
  const Shape& os = a.out.shape();
  const int64_t n = a.out.numel(), bn = a.in[1].numel();
  const bool a_full = as == os;
  const bool b_trailing = bs.size() <= os.size() && std::equal(bs.rbegin(), bs.rend(), os.rbegin());
  if (!a_full || !b_trailing || bn == 0) return fallback(a);
  const float* x = a.in[0].as<const float>();
  const float* y = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  if (bn == n || bn == 1) {
    chunks(n, [&](int64_t b, int64_t e) {
      if (bn == 1) {
        const float v = y[0];
        for (int64_t i = b; i < e; ++i) out[i] = op(x[i], v);
      } else {
        for (int64_t i = b; i < e; ++i) out[i] = op(x[i], y[i]);
      }
    });
    return Status::ok();
  }
  // b repeats along the rows of a: [rows, bn] blocks of rows per task.
  const int64_t rows = n / bn, rows_per_task = std::max<int64_t>(1, kChunk / bn);
  parallel_for((rows + rows_per_task - 1) / rows_per_task, [&](int64_t t) {
    for (int64_t r = t * rows_per_task; r < std::min(rows, (t + 1) * rows_per_task); ++r) {
      const float* xr = x + r * bn;
      float* yr = out + r * bn;
      for (int64_t j = 0; j < bn; ++j) yr[j] = op(xr[j], y[j]);
    }
  });
  return Status::ok();
}

// swiglu (or its gradient, `grad`) on rows of 2F, in tasks of whole rows.
Status swiglu(const KernelArgs& a, bool grad) {
  const Shape& x = a.in[0].shape();
  const int64_t F = x.empty() ? 0 : x.back() / 2, rows = F == 0 ? 0 : a.in[0].numel() / (2 * F);
  const float* in = a.in[0].as<const float>();
  const float* dy = grad ? a.in[1].as<const float>() : nullptr;
  float* out = a.out.as<float>();
  const int64_t per = std::max<int64_t>(1, kChunk / std::max<int64_t>(1, 2 * F));
  parallel_for((rows + per - 1) / per, [&](int64_t t) {
    const int64_t r0 = t * per, r1 = std::min(rows, r0 + per);
    swiglu_rows(in + r0 * 2 * F, dy ? dy + r0 * F : nullptr, out + r0 * (grad ? 2 * F : F), r1 - r0, F);
  });
  return Status::ok();
}

// A Unary op of ops.def: the reference's scalar math (each element in double, rounded once, so
// the bits are the reference's and fused_elementwise's) in fixed chunks over the threads.
template <ir::Op op>
Status unary(const KernelArgs& a) {
  if (a.in[0].type.dtype != DType::f32 || a.out.type.dtype != DType::f32) return kReferenceKernels[static_cast<size_t>(op)](a);
  const float* x = a.in[0].as<const float>();
  float* y = a.out.as<float>();
  chunks(a.out.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>(ir::scalar_unary<op>(static_cast<double>(x[i])));
  });
  return Status::ok();
}

template <size_t... I>
constexpr void set_unary(std::array<Kernel, ir::kNumOps>& t, std::index_sequence<I...>) {
  auto one = [&]<size_t i>() {
    constexpr auto op = static_cast<ir::Op>(i);
    if constexpr (ir::op_category(op) == ir::OpCategory::Unary) t[i] = unary<op>;
  };
  (one.template operator()<I>(), ...);
}

}  // namespace

namespace {

// The CPU backend's kernel table: the reference kernels (kReferenceKernels), then the
// backend's own where it has one.
constexpr std::array<Kernel, ir::kNumOps> kFastKernels = [] {
  std::array<Kernel, ir::kNumOps> t = kReferenceKernels;
  set_unary(t, std::make_index_sequence<ir::kNumOps>{});
  auto set = [&](ir::Op op, Kernel k) { t[static_cast<size_t>(op)] = k; };
  using ir::Op;
  set(Op::Matmul, matmul);
  set(Op::Attention, attention);
  set(Op::AttentionGrad, attention_grad);
  set(Op::Rope, rope);
  set(Op::FusedElementwise, fused_elementwise);
  set(Op::ReduceSum, reduce_sum);
  set(Op::Softmax, [](const KernelArgs& a) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Softmax>(a.node));
    return softmax(a, false, at->axis, at->scale, at->causal_offset);
  });
  set(Op::LogSoftmax, [](const KernelArgs& a) {
    VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::LogSoftmax>(a.node));
    return softmax(a, true, at->axis, 1.0, std::nullopt);
  });
  set(Op::SoftmaxGrad, softmax_grad);
  set(Op::Gelu, gelu);
  set(Op::GeluGrad, gelu_grad);
  set(Op::Swiglu, [](const KernelArgs& a) { return swiglu(a, false); });
  set(Op::SwigluGrad, [](const KernelArgs& a) { return swiglu(a, true); });
  set(Op::SiluGrad, [](const KernelArgs& a) {
    const float *x = a.in[0].as<const float>(), *dy = a.in[1].as<const float>();
    float* out = a.out.as<float>();
    chunks(a.out.numel(), [&](int64_t b, int64_t e) { silu_grad(x + b, dy + b, out + b, e - b); });
    return Status::ok();
  });
  set(Op::Transpose, transpose);
  set(Op::LayerNorm, [](const KernelArgs& a) { return norm(a, true, false); });
  set(Op::RmsNorm, [](const KernelArgs& a) { return norm(a, false, false); });
  set(Op::LayerNormGrad, [](const KernelArgs& a) { return norm(a, true, true); });
  set(Op::RmsNormGrad, [](const KernelArgs& a) { return norm(a, false, true); });
  set(Op::CrossEntropy, [](const KernelArgs& a) { return cross_entropy(a, false); });
  set(Op::CrossEntropyGrad, [](const KernelArgs& a) { return cross_entropy(a, true); });
  set(Op::Add, [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Add>, [](float x, float y) { return x + y; }); });
  set(Op::Sub, [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Sub>, [](float x, float y) { return x - y; }); });
  set(Op::Mul, [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Mul>, [](float x, float y) { return x * y; }); });
  set(Op::Div, [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Div>, [](float x, float y) { return x / y; }); });
  set(Op::GradNorm, [](const KernelArgs& a) { return grad_norm_node(a, fast_sum_of_squares); });
  set(Op::OptimizerUpdate, [](const KernelArgs& a) { return optimizer_update_node(a, fast_optimizer_update); });
  return t;
}();

}  // namespace

Kernel fast_kernel(ir::Op op) {
  const auto i = static_cast<size_t>(op);
  return i < kFastKernels.size() ? kFastKernels[i] : nullptr;
}

}  // namespace volta::cpu
