// The CPU backend's matmul: a register-blocked f32 kernel (6 x 16 tiles of C held in vector
// registers). Every output element is accumulated in k order, one multiply-add per k, so the
// result does not depend on the blocking, on how the work is split, or on the thread count.
// Compiled for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and baseline x86-64 (GCC
// target_clones; the loader picks the clone the CPU supports). GCC contracts the multiply-adds
// into FMA on the v4 and v3 clones, which therefore agree bit for bit; the baseline clone rounds
// twice and may differ in the last bit.
#include <cstring>

#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define VOLTA_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define VOLTA_ISA_CLONES
#endif

namespace volta::cpu {

namespace {

constexpr int64_t kRows = 6;   // rows of C per micro-tile: 6 accumulators fit AVX2's 16 registers
constexpr int64_t kCols = 16;  // columns of C per micro-tile: one vector of 16 floats

// 16 floats as one GCC vector: one zmm register on AVX-512, two ymm on AVX2, four xmm on
// baseline x86-64. Lanes are independent, so every clone computes the same bits.
typedef float Vec16 __attribute__((vector_size(64)));

// C[M, N] (row stride ldc) = A[M, K] (element strides am, ak) @ B[K, N] (row stride ldb), or
// C += that product when `accumulate`: a K-block continues each element's multiply-add chain
// exactly where the previous block stopped, so splitting K does not change a bit.
VOLTA_ISA_CLONES
void gemm_block(const float* A, int64_t am, int64_t ak, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t M,
                int64_t N, int64_t K, bool accumulate) {
  int64_t m = 0;
  for (; m + kRows <= M; m += kRows) {
    int64_t n = 0;
    for (; n + kCols <= N; n += kCols) {
      Vec16 acc[kRows] = {};
      if (accumulate)
        for (int64_t r = 0; r < kRows; ++r) std::memcpy(&acc[r], C + (m + r) * ldc + n, sizeof acc[r]);
      for (int64_t k = 0; k < K; ++k) {
        Vec16 b;
        std::memcpy(&b, B + k * ldb + n, sizeof b);  // unaligned load
        for (int64_t r = 0; r < kRows; ++r) acc[r] += A[(m + r) * am + k * ak] * b;
      }
      for (int64_t r = 0; r < kRows; ++r) std::memcpy(C + (m + r) * ldc + n, &acc[r], sizeof acc[r]);
    }
    for (; n < N; ++n)
      for (int64_t r = 0; r < kRows; ++r) {
        float acc = accumulate ? C[(m + r) * ldc + n] : 0.0f;
        for (int64_t k = 0; k < K; ++k) acc += A[(m + r) * am + k * ak] * B[k * ldb + n];
        C[(m + r) * ldc + n] = acc;
      }
  }
  for (; m < M; ++m) {  // leftover rows: one row of C at a time, same k order
    float* c = C + m * ldc;
    if (!accumulate) std::fill_n(c, N, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[m * am + k * ak];
      const float* b = B + k * ldb;
      for (int64_t n = 0; n < N; ++n) c[n] += a * b[n];
    }
  }
}

// Cache blocking: a kKBlock x kNBlock panel of B (256 KiB) stays in L2 while the rows of A
// stream past it.
constexpr int64_t kKBlock = 256;
constexpr int64_t kNBlock = 256;

// C[M, N] = A[M, K] (element strides am, ak) @ B[K, N] (row-major, contiguous).
void gemm(const float* A, int64_t am, int64_t ak, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (K == 0) {
    for (int64_t m = 0; m < M; ++m) std::fill_n(C + m * N, N, 0.0f);
    return;
  }
  for (int64_t n0 = 0; n0 < N; n0 += kNBlock)
    for (int64_t k0 = 0; k0 < K; k0 += kKBlock)
      gemm_block(A + k0 * ak, am, ak, B + k0 * N + n0, N, C + n0, N, M, std::min(kNBlock, N - n0), std::min(kKBlock, K - k0),
                 k0 > 0);
}

struct Dims {
  int64_t M, N, K;
  bool ta, tb;
};

Result<Dims> dims_of(const ir::Node& node, const Shape& as, const Shape& os) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t ta, node.attrs.get_int("transpose_a", 0));
  VOLTA_ASSIGN_OR_RETURN(const int64_t tb, node.attrs.get_int("transpose_b", 0));
  const int64_t M = os[os.size() - 2], N = os[os.size() - 1];
  const int64_t K = ta ? as[as.size() - 2] : as[as.size() - 1];
  return Dims{M, N, K, ta != 0, tb != 0};
}

}  // namespace

size_t matmul_workspace_bytes(const ir::Graph& g, const ir::Node& node) {
  if (node.inputs.size() != 2) return 0;
  auto d = dims_of(node, g.node(node.inputs[0]).type.shape, node.type.shape);
  // A transposed right operand is packed to row-major [K, N] first.
  return d.is_ok() && d->tb ? static_cast<size_t>(d->K * d->N) * sizeof(float) : 0;
}

Status matmul(const KernelArgs& a) {
  const Shape& as = a.in[0].shape();
  const Shape& bs = a.in[1].shape();
  const Shape& os = a.out.shape();
  VOLTA_ASSIGN_OR_RETURN(const Dims d, dims_of(a.node, as, os));
  if (d.tb && a.workspace.size() < static_cast<size_t>(d.K * d.N) * sizeof(float))
    return internal_error("[matmul] workspace too small " + ir::node_ref(a.node));
  const Shape batch(os.begin(), os.end() - 2);
  const std::array<ref::Strides, 3> st = {ref::broadcast_strides(Shape(as.begin(), as.end() - 2), batch, d.M * d.K),
                                          ref::broadcast_strides(Shape(bs.begin(), bs.end() - 2), batch, d.K * d.N),
                                          ref::contiguous_strides(batch, d.M * d.N)};
  const float* A = a.in[0].as<const float>();
  const float* B = a.in[1].as<const float>();
  float* out = a.out.as<float>();
  auto* packed = reinterpret_cast<float*>(a.workspace.data());
  const int64_t am = d.ta ? 1 : d.K, ak = d.ta ? d.M : 1;
  // Offsets of every matrix of the batch, in batch order.
  std::vector<std::array<int64_t, 3>> mats;
  ref::for_each_index(batch, st, [&](int64_t, const std::array<int64_t, 3>& off) { mats.push_back(off); });
  // Tasks: (matrix, block of kRowsPerTask rows of C). The split depends on the shape only, and
  // every element of C is summed by one task in k order, so any thread count gives the same bits.
  constexpr int64_t kRowsPerTask = 8 * kRows;
  const int64_t blocks = (d.M + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t tasks = static_cast<int64_t>(mats.size()) * blocks;
  auto run = [&](int64_t t, const float* b) {
    const auto& off = mats[static_cast<size_t>(t / blocks)];
    const int64_t m0 = (t % blocks) * kRowsPerTask, rows = std::min(kRowsPerTask, d.M - m0);
    gemm(A + off[0] + m0 * am, am, ak, b, out + off[2] + m0 * d.N, rows, d.N, d.K);
  };
  if (!d.tb) {
    parallel_for(tasks, [&](int64_t t) { run(t, B + mats[static_cast<size_t>(t / blocks)][1]); });
    return Status::ok();
  }
  // A transposed right operand is packed to [K, N], once per distinct matrix (a broadcast
  // operand shared by the whole batch is packed once), then its row blocks run.
  int64_t packed_offset = -1;
  for (size_t i = 0; i < mats.size(); ++i) {
    if (mats[i][1] != packed_offset) {
      const float* b = B + mats[i][1];
      parallel_for(d.K, [&](int64_t k) {
        for (int64_t n = 0; n < d.N; ++n) packed[k * d.N + n] = b[n * d.K + k];
      });
      packed_offset = mats[i][1];
    }
    parallel_for(blocks, [&](int64_t blk) { run(static_cast<int64_t>(i) * blocks + blk, packed); });
  }
  return Status::ok();
}

}  // namespace volta::cpu
