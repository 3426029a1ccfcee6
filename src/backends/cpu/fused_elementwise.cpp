// The CPU backend's fused_elementwise kernel: the program's steps over blocks of 256 elements
// held in per-thread buffers, so the chain's intermediate values never reach memory as whole
// tensors. Each element of each step is the reference's double evaluation of that op rounded
// once to f32 (ref_scalar.h), as the unfused op stores it, so the result has the bits of the
// unfused chain. Tasks are fixed chunks of the output, split by its size only.
#include <algorithm>
#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_scalar.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

constexpr int64_t kChunk = 16384;  // output elements per task
constexpr int64_t kBlock = 256;    // elements per step evaluation (buffers stay in L1)

// dst[0, m) = the elements start.. of src seen through `st` (broadcast strides to `shape`).
void gather(const float* src, const ref::Strides& st, const Shape& shape, int64_t start, int64_t m, float* dst) {
  const size_t rank = shape.size();
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

Status fused_elementwise(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const ir::ElementwiseProgram p, ref::elementwise_program(a));
  const Shape& shape = a.out.shape();
  const int64_t n = a.out.numel();
  const auto inputs = static_cast<int64_t>(a.in.size()), steps = static_cast<int64_t>(p.steps.size());
  std::vector<ref::Strides> strides;
  for (const TensorRef& in : a.in) strides.push_back(ref::broadcast_strides(in.shape(), shape));
  float* out = a.out.as<float>();
  parallel_chunks(n, kChunk, [&](int64_t b, int64_t e) {
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
          if constexpr (op == ir::Op::Add) for (int64_t k = 0; k < m; ++k) o[k] = x[k] + y[k];
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

}  // namespace volta::cpu
