// Split-K for the weight gradients of training: dW[M, N] = x^T @ dy with x stored [K, M], dy
// [K, N] and K = batch x tokens, much deeper than the weight is wide. The strict kernel cuts
// only C into tasks, so at 2 threads each core still streams all of K for its half of C, reading
// its operands' other halves too. Here each thread takes one slice of K for the whole of C, into
// its own partial C, and the partials are added in slice order.
//
// Determinism: run-to-run. One slice per thread, so the thread count moves the slice boundaries
// and with them the rounding of every element; with the same thread count the slices, each
// slice's chains (the strict GEMM's) and the order of the sum are the same every run. At one
// thread it is the strict kernel. Planning picks it only when the requested level allows it.
#include <algorithm>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"

namespace volta::cpu {

namespace {

// K per slice at least: below this a slice's product is over before its partial is added.
constexpr int64_t kMinSliceK = 128;
// Products smaller than this (flops) run as one strict GEMM anyway.
constexpr double kMinFlops = 1 << 20;

// Partial products of the slices after the first (the first writes C), kept by the calling
// thread from step to step so a training step allocates nothing.
thread_local std::vector<float> t_partials;

}  // namespace

bool split_k_applies(const ir::Graph& g, const ir::Node& node) {
  if (node.op != ir::Op::Matmul || node.inputs.size() != 2 || node.type.dtype != DType::f32 ||
      g.node(node.inputs[1]).type.dtype != DType::f32)
    return false;
  auto at = ir::typed_attrs<ir::Op::Matmul>(node);
  if (!at.is_ok() || !(*at)->transpose_a || (*at)->transpose_b || (*at)->activation != "none") return false;
  const Shape& as = g.node(node.inputs[0]).type.shape;
  const Shape& bs = g.node(node.inputs[1]).type.shape;
  if (as.size() != 2 || bs.size() != 2 || node.type.shape.size() != 2) return false;
  const int64_t K = as[0], M = as[1], N = bs[1];
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  // Measured at 2 threads (bench/README.md, "Split-K"): faster than the strict kernel on every
  // such shape tried, from 32 x 96 x 256 to 384 x 1152 x 4096, K 1.3 to 12 times the larger side.
  return K >= std::max(M, N) && K >= 2 * kMinSliceK && flops >= kMinFlops;
}

void gemm_split_k(MatmulIsa isa, const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K,
                  int64_t parts) {
  parts = std::clamp<int64_t>(parts, 1, std::max<int64_t>(K, 1));
  const int64_t mn = M * N;
  if (t_partials.size() < static_cast<size_t>((parts - 1) * mn)) t_partials.resize(static_cast<size_t>((parts - 1) * mn));
  float* partials = t_partials.data();
  // One task per slice: with a slice per thread, parallel_for gives each thread one. The GEMM
  // inside a task runs on that thread alone (nested parallel_for calls run inline).
  parallel_for(parts, [&](int64_t t) {
    const int64_t k0 = t * K / parts, k1 = (t + 1) * K / parts;
    float* c = t == 0 ? C : partials + (t - 1) * mn;
    gemm(isa, matmul_blocking_for(isa, M, N, k1 - k0), {A + k0 * M, 1, M}, {B + k0 * N, N, 1}, c, N, M, N, k1 - k0);
  });
  chunks(mn, [&](int64_t b0, int64_t b1) {
    for (int64_t t = 1; t < parts; ++t) {
      const float* p = partials + (t - 1) * mn;
      for (int64_t j = b0; j < b1; ++j) C[j] += p[j];
    }
  });
}

Status matmul_split_k(const KernelArgs& a) {
  const int64_t K = a.in[0].shape()[0], M = a.in[0].shape()[1], N = a.in[1].shape()[1];
  const int64_t parts = std::min<int64_t>(num_threads(), K / kMinSliceK);
  if (parts <= 1) return matmul(a);  // the strict kernel's bits
  gemm_split_k(matmul_active_isa(), a.in[0].as<const float>(), a.in[1].as<const float>(), a.out.as<float>(), M, N, K,
               parts);
  return Status::ok();
}

}  // namespace volta::cpu
