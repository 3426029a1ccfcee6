// The CPU backend's elementwise kernels, each element with the reference's bits, in fixed chunks
// of the output split by its size only:
// - every Unary op of ops.def, and add / sub / mul / div with a full, row or scalar b;
// - fused_elementwise: the program's steps over blocks of 256 elements held in per-thread
//   buffers, so the chain's intermediate values never reach memory as whole tensors. Each step
//   computes its elements as the unfused op's kernel does (vector_unary's math, f32 + - * /, or
//   the reference's double evaluation rounded once for the rest, ref_scalar.h), so the result
//   has the bits of the unfused chain.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_scalar.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

constexpr int64_t kBlock = 256;  // elements per step evaluation (buffers stay in L1)

// dst[0, m) = the elements start.. of src seen through `st` (broadcast strides to `shape`).
void gather(const float* src, const ref::Strides& st, const Shape& shape, int64_t start, int64_t m, float* dst) {
  const size_t rank = shape.size();
  // The innermost dims as runs: read in order (a row broadcast) or not at all (a column one).
  int64_t run = 1;
  size_t outer = rank;
  const bool repeat = rank > 0 && st[rank - 1] == 0;
  for (int64_t step = 1; outer > 0 && st[outer - 1] == (repeat ? 0 : step); --outer) {
    run *= shape[outer - 1];
    step *= shape[outer - 1];
  }
  if (run >= 16) {
    for (int64_t i = 0; i < m;) {
      int64_t o = (start + i) / run, off = 0;
      const int64_t in = (start + i) % run, len = std::min(run - in, m - i);
      for (size_t d = outer; d-- > 0; o /= shape[d]) off += (o % shape[d]) * st[d];
      if (repeat) std::fill_n(dst + i, len, src[off]);
      else std::memcpy(dst + i, src + off + in, static_cast<size_t>(len) * sizeof(float));
      i += len;
    }
    return;
  }
  std::vector<int64_t> idx(rank);
  int64_t off = 0, rem = start;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % shape[d];
    rem /= shape[d];
    off += idx[d] * st[d];
  }
  for (int64_t i = 0; i < m; ++i) {
    dst[i] = src[off];
    for (size_t d = rank; d-- > 0;) {  // odometer
      off += st[d];
      if (++idx[d] < shape[d]) break;
      off -= st[d] * shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

UnaryMap vector_unary(ir::Op op) {
  switch (op) {
    case ir::Op::Exp: return map_exp;
    case ir::Op::Log: return map_log;
    case ir::Op::Tanh: return map_tanh;
    case ir::Op::Sigmoid: return map_sigmoid;
    case ir::Op::Silu: return map_silu;
    case ir::Op::Erf: return map_erf;
    case ir::Op::Sqrt: return map_sqrt;
    case ir::Op::Neg: return map_neg;
    case ir::Op::Abs: return map_abs;
    default: return nullptr;
  }
}

Status fused_elementwise(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const ir::ElementwiseProgram p, ref::elementwise_program(a));
  const Shape& shape = a.out.shape();
  const int64_t n = a.out.numel();
  const auto inputs = static_cast<int64_t>(a.in.size()), steps = static_cast<int64_t>(p.steps.size());
  std::vector<ref::Strides> strides;
  for (const TensorRef& in : a.in) strides.push_back(ref::broadcast_strides(in.shape(), shape));
  float* out = a.out.as<float>();
  chunks(n, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> buf;
    thread_local std::vector<const float*> val;
    if (buf.size() < static_cast<size_t>((inputs + steps) * kBlock)) buf.resize(static_cast<size_t>((inputs + steps) * kBlock));
    val.resize(static_cast<size_t>(inputs + steps));
    for (int64_t s = b; s < e; s += kBlock) {
      const int64_t m = std::min(kBlock, e - s);
      for (int64_t i = 0; i < inputs; ++i) {
        const TensorRef& in = a.in[static_cast<size_t>(i)];
        float* slot = buf.data() + i * kBlock;
        if (in.numel() == n) val[static_cast<size_t>(i)] = in.as<const float>() + s;  // full size: read in place
        else if (in.numel() == 1) std::fill_n(slot, m, in.as<const float>()[0]), val[static_cast<size_t>(i)] = slot;
        else gather(in.as<const float>(), strides[static_cast<size_t>(i)], shape, s, m, slot), val[static_cast<size_t>(i)] = slot;
      }
      for (int64_t j = 0; j < steps; ++j) {
        const ir::ElementwiseStep& st = p.steps[static_cast<size_t>(j)];
        float* o = j + 1 == steps ? out + s : buf.data() + (inputs + j) * kBlock;
        const float* x = val[static_cast<size_t>(st.a)];
        const float* y = st.b >= 0 ? val[static_cast<size_t>(st.b)] : nullptr;
        ref::with_elementwise_op(st.op, [&]<ir::Op op>() {
          // + - * / in f32 are the correctly rounded results the double evaluation rounds to.
          if (const UnaryMap f = vector_unary(op)) f(x, o, m);
          else if constexpr (op == ir::Op::Add) for (int64_t k = 0; k < m; ++k) o[k] = x[k] + y[k];
          else if constexpr (op == ir::Op::Sub) for (int64_t k = 0; k < m; ++k) o[k] = x[k] - y[k];
          else if constexpr (op == ir::Op::Mul) for (int64_t k = 0; k < m; ++k) o[k] = x[k] * y[k];
          else if constexpr (op == ir::Op::Div) for (int64_t k = 0; k < m; ++k) o[k] = x[k] / y[k];
          else if constexpr (ref::scalar_binary_op(op))
            for (int64_t k = 0; k < m; ++k) o[k] = static_cast<float>(ref::scalar_binary<op>(x[k], y[k]));
          else
            for (int64_t k = 0; k < m; ++k) o[k] = static_cast<float>(ref::scalar_unary<op>(x[k]));
        });
        val[static_cast<size_t>(inputs + j)] = o;
      }
    }
  });
  return Status::ok();
}

namespace {

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
  if (!a_full || !b_trailing || bn == 0 || a.out.type.dtype != DType::f32) return run_alone(fallback, a);
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
  const int64_t rows = n / bn, rows_per_task = std::max<int64_t>(1, kTaskElements / bn);
  parallel_for((rows + rows_per_task - 1) / rows_per_task, [&](int64_t t) {
    for (int64_t r = t * rows_per_task; r < std::min(rows, (t + 1) * rows_per_task); ++r) {
      const float* xr = x + r * bn;
      float* yr = out + r * bn;
      for (int64_t j = 0; j < bn; ++j) yr[j] = op(xr[j], y[j]);
    }
  });
  return Status::ok();
}

// A Unary op of ops.def in fixed chunks over the threads: vector_unary's math where it has the
// op, else the reference's (each element in double, rounded once); fused_elementwise's steps
// compute the same.
template <ir::Op op>
Status unary(const KernelArgs& a) {
  if (a.in[0].type.dtype != DType::f32 || a.out.type.dtype != DType::f32) return run_alone(kReferenceKernels[static_cast<size_t>(op)], a);
  const float* x = a.in[0].as<const float>();
  float* y = a.out.as<float>();
  const UnaryMap f = vector_unary(op);
  chunks(a.out.numel(), [&](int64_t b, int64_t e) {
    if (f) return f(x + b, y + b, e - b);
    for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>(ir::scalar_unary<op>(static_cast<double>(x[i])));
  });
  return Status::ok();
}

template <size_t... I>
constexpr std::array<Kernel, ir::kNumOps> make_table(std::index_sequence<I...>) {
  std::array<Kernel, ir::kNumOps> t{};
  auto one = [&]<size_t i>() {
    constexpr auto op = static_cast<ir::Op>(i);
    if constexpr (ir::op_category(op) == ir::OpCategory::Unary) t[i] = unary<op>;
  };
  (one.template operator()<I>(), ...);
  using ir::Op;
  t[static_cast<size_t>(Op::Add)] = [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Add>, [](float x, float y) { return x + y; }); };
  t[static_cast<size_t>(Op::Sub)] = [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Sub>, [](float x, float y) { return x - y; }); };
  t[static_cast<size_t>(Op::Mul)] = [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Mul>, [](float x, float y) { return x * y; }); };
  t[static_cast<size_t>(Op::Div)] = [](const KernelArgs& a) { return binary(a, ref::elementwise<Op::Div>, [](float x, float y) { return x / y; }); };
  return t;
}
constexpr std::array<Kernel, ir::kNumOps> kElementwiseKernels = make_table(std::make_index_sequence<ir::kNumOps>{});

}  // namespace

Kernel elementwise_kernel(ir::Op op) {
  const auto i = static_cast<size_t>(op);
  return i < kElementwiseKernels.size() ? kElementwiseKernels[i] : nullptr;
}

}  // namespace volta::cpu
