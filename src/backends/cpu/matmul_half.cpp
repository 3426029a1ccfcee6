// bf16 / f16 weights for the CPU matmul. Weights are read at half the bytes and widened to f32
// (exact) before the f32 microkernels see them, so every element of C has the bits the f32
// kernel gives on the widened weights: one FMA chain in k order, accumulated in f32. Decode
// shapes (M <= 16 against one [K, N] weight) read whole tiles of half weights and widen them in
// registers, right edges through per-thread scratch; other shapes widen the whole weight into
// the node's workspace once per run and take the f32 path. A weight stored in the packed layout
// (b_packed, ir/packed_weight.h) is read in place panel by panel, as the f32 decode path reads
// one: each task's columns one contiguous piece of every K block instead of a band of every row
// (bf16 GEMVs 2 KiB apart ran at about half the bandwidth of the packed f32 ones).
#include <algorithm>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "ir/packed_weight.h"

namespace volta::cpu {

namespace {

constexpr int64_t kTaskCols = 128;  // columns of C per decode task: the wide small tile's width (half past its rows)
// Rows the decode path takes: up to 16 (four passes of the half-width tile over the weights), where
// the f32 kernel packs past 8: widening the whole weight and packing it again cost more.
constexpr int64_t kHalfSmallM = 16;

struct Geometry {
  int64_t rows, N, K;  // C is [rows, N] against one [K, N] weight
  bool small;          // the decode path
};

Geometry geometry(const Shape& as, const Shape& bs, const Shape& os, const ir::AttrsOf<ir::Op::Matmul>& at) {
  Geometry g{1, os.back(), bs[bs.size() - 2], false};
  for (size_t i = 0; i + 1 < os.size(); ++i) g.rows *= os[i];
  g.small = bs.size() == 2 && !at.transpose_a && !at.transpose_b && as.size() >= 2 && g.rows <= kHalfSmallM;
  return g;
}

}  // namespace

size_t matmul_half_workspace_bytes(const ir::Graph& g, const ir::Node& node) {
  if (node.inputs.size() < 2 || !is_half(g.node(node.inputs[1]).type.dtype)) return 0;
  auto at = ir::typed_attrs<ir::Op::Matmul>(node);
  const TensorType& b = g.node(node.inputs[1]).type;
  if (!at.is_ok() || b.shape.size() < 2) return 0;
  if (geometry(g.node(node.inputs[0]).type.shape, b.shape, node.type.shape, **at).small) return 0;
  return static_cast<size_t>(b.numel()) * sizeof(float);
}

Status matmul_half_weights(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const auto at, ir::typed_attrs<ir::Op::Matmul>(a.node));
  const TensorRef& w = a.in[1];
  const bool bf16 = w.type.dtype == DType::bf16;
  const Geometry g = geometry(a.in[0].shape(), w.shape(), a.out.shape(), *at);
  const MatmulIsa isa = matmul_active_isa();
  const auto* src = w.as<const uint16_t>();
  if (!g.small) {  // widened whole, in its layout: a packed weight stays packed for the f32 kernel
    const size_t bytes = static_cast<size_t>(w.numel()) * sizeof(float);
    if (a.workspace.size() < bytes)
      return internal_error(ref::op_prefix(a.node) + "workspace of " + std::to_string(a.workspace.size()) + " bytes, " +
                            std::to_string(bytes) + " needed for the widened weights " + ir::node_ref(a.node));
    auto* wide = reinterpret_cast<float*>(a.workspace.data());
    chunks(w.numel(), [&](int64_t b, int64_t e) { widen_half(isa, bf16, src + b, wide + b, e - b); });
    std::vector<TensorRef> in(a.in.begin(), a.in.end());
    in[1] = {reinterpret_cast<std::byte*>(wide), {DType::f32, w.type.shape}};
    return matmul(KernelArgs{a.node, in, a.out, a.workspace.subspan(bytes)});
  }
  const float* A = a.in[0].as<const float>();
  float* C = a.out.as<float>();
  if (at->b_packed) {
    const int64_t kc = (*at->b_packed)[0], nr = (*at->b_packed)[1];
    if (nr == matmul_tile(isa).cols && matmul_has_half_tiles(isa)) {
      // Each task applies the epilogue to its own columns while they are in cache, as the f32
      // path does: a decode step's GELU and residual adds then split over the threads too,
      // instead of running on one after the product.
      VOLTA_ASSIGN_OR_RETURN(const MatmulEpilogue ep, matmul_epilogue_of(a, *at, g.N));
      gemm_small_packed_all(isa, w.type.dtype, {A, g.K, 1}, src, kc, C, g.N, g.rows, g.N, g.K, &ep);
      return Status::ok();
    }
    // Packed for another ISA's tiles (a test's override), or none reads half panels: row-major,
    // in this thread's scratch (in a team, on one rank: as in matmul_packed_weight).
    if (in_team()) return run_alone(matmul_half_weights, a);
    thread_local std::vector<uint16_t> plain;
    plain.resize(static_cast<size_t>(g.K * g.N));
    ir::repack_weight(src, plain.data(), g.K, g.N, kc, nr, false);
    src = plain.data();
  }
  const int64_t nw = matmul_narrow_cols(isa);
  // One or two rows: the wide tile; more: the half-width one, whose pass over B serves more rows,
  // and tasks as wide as it (so a 128-wide product spreads over two threads).
  const bool wide = g.rows <= matmul_small_rows(isa, true);
  const int64_t sc = matmul_small_cols(isa, wide), sr = matmul_small_rows(isa, wide);
  const int64_t task_cols = wide ? kTaskCols : kTaskCols / 2, tasks = (g.N + task_cols - 1) / task_cols;
  parallel_for_resident(src, task_cols * g.K * 2, tasks, [&](int64_t t) {
    int64_t n0 = t * task_cols;
    const int64_t end = std::min(g.N, n0 + task_cols);
    // Whole tiles widen in registers; a right edge narrower than a tile widens into scratch.
    for (bool fused = true; n0 + sc <= end && fused; n0 += fused ? sc : 0)
      for (int64_t i = 0; i < g.rows && fused; i += sr)
        fused = run_small_half_tile(isa, wide, bf16,
                                    {.rows = std::min(sr, g.rows - i), .k = g.K, .a = A + i * g.K, .a_rs = g.K, .a_cs = 1,
                                     .b = reinterpret_cast<const float*>(src + n0), .b_rs = g.N, .c = C + i * g.N + n0,
                                     .ldc = g.N, .accumulate = false});
    if (n0 == end) return;
    const int64_t cols = end - n0, ld = (cols + nw - 1) / nw * nw;  // rows padded with zeros to whole vectors
    float* b = half_weights_scratch(g.K * ld);
    for (int64_t k = 0; k < g.K; ++k) {
      widen_half(isa, bf16, src + k * g.N + n0, b + k * ld, cols);
      std::fill(b + k * ld + cols, b + (k + 1) * ld, 0.0f);
    }
    gemm_small(isa, {A, g.K, 1}, {b, ld, 1}, C + n0, g.N, g.rows, cols, g.K, /*padded=*/true);
  });
  return matmul_epilogue(a, g.N);
}

}  // namespace volta::cpu
