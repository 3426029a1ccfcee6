// The CPU backend's attention kernel: per (batch, head) group, the keys are transposed once into
// a zero-padded scratch panel, then each query row gets its scores from the matmul microkernels,
// its fused softmax row (vec_math.cpp), and its weighted sum of the values, again from the matmul
// microkernels with the chain over the keys continued from k into k2. Every score and output
// element is therefore the FMA chain the unfused matmul would compute, so the result has the same
// bits as matmul -> softmax(scale, causal) -> matmul, without the score matrix, the kᵀ pack or the
// cache concat. Groups are the tasks: the split depends on the shape only.
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"

namespace volta::cpu {

namespace {

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c[0, cols) (= or +=) a[0, k) @ B[k, cols], B row stride b_rs and readable over all cols
// (a multiple of the ISA's vector width).
void row_product(MatmulIsa isa, const float* a, int64_t k, const float* b, int64_t b_rs, float* c, int64_t cols,
                 bool accumulate) {
  const int64_t w = matmul_narrow_cols(isa), max_vecs = matmul_row_tile_vectors(isa);
  for (int64_t c0 = 0; c0 < cols;) {
    // a_rs != 1 selects the strided-A kernels: A(0, p) = a[p].
    const TileArgs t{1, k, a, 0, 1, b + c0, b_rs, c + c0, cols, accumulate};
    if (max_vecs > 0) {
      const int64_t vecs = std::min(max_vecs, (cols - c0) / w);
      run_row_tile(isa, vecs, t);
      c0 += vecs * w;
    } else {
      run_narrow_tile(isa, t);
      c0 += w;
    }
  }
}

struct Source {  // one block of keys and values of every group: the first S of cap rows per group
  const float* k;
  const float* v;
  int64_t S, cap;
};

}  // namespace

Status attention(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const ref::AttentionArgs at, ref::attention_args(a));
  const int64_t G = at.G, T = at.T, D = at.D, E = at.E, S = at.keys();
  std::vector<Source> src;
  for (size_t b = 0; 2 * b + 2 < a.in.size(); ++b)  // (k, v), then (k2, v2)
    src.push_back({a.in[2 * b + 1].as<const float>(), a.in[2 * b + 2].as<const float>(), at.used[b], at.cap[b]});
  const MatmulIsa isa = matmul_active_isa();
  const int64_t w = matmul_narrow_cols(isa), Sp = round_up(S, w), Ep = round_up(E, w);
  const bool copy_v = Ep != E;  // the value rows are read a whole vector at a time
  const float* q = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  parallel_for(G, [&](int64_t g) {
    // Scratch of this thread, reused across calls: kᵀ [D, Sp], scores and probabilities [Sp],
    // padded values [S, Ep] and an output row [Ep] when E is not a multiple of the width.
    thread_local std::vector<float> scratch;
    const size_t need = static_cast<size_t>(D * Sp + 2 * Sp + (copy_v ? S * Ep + Ep : 0));
    if (scratch.size() < need) scratch.resize(need);
    float* kt = scratch.data();
    float* scores = kt + D * Sp;
    float* probs = scores + Sp;
    float* vp = probs + Sp;
    float* orow = vp + (copy_v ? S * Ep : 0);
    int64_t j0 = 0;
    for (const Source& s : src) {  // key j of the group at column j of kᵀ, zeros after S
      transpose_copy(isa, s.k + g * s.cap * D, D, s.S, D, kt + j0, Sp, j0 + s.S == S ? Sp - j0 : s.S);
      if (copy_v)
        for (int64_t j = 0; j < s.S; ++j) {
          std::copy_n(s.v + (g * s.cap + j) * E, E, vp + (j0 + j) * Ep);
          std::fill(vp + (j0 + j) * Ep + E, vp + (j0 + j + 1) * Ep, 0.0f);
        }
      j0 += s.S;
    }
    for (int64_t i = 0; i < T; ++i) {
      row_product(isa, q + (g * T + i) * D, D, kt, Sp, scores, Sp, false);
      softmax_row(scores, probs, S, at.causal ? i + at.offset + 1 : S, static_cast<float>(at.scale), false);
      float* o = copy_v ? orow : out + (g * T + i) * E;
      bool started = false;
      j0 = 0;
      for (const Source& s : src) {
        if (s.S == 0) continue;
        const float* v = copy_v ? vp + j0 * Ep : s.v + g * s.cap * E;
        row_product(isa, probs + j0, s.S, v, Ep, o, Ep, started);
        started = true;
        j0 += s.S;
      }
      if (copy_v) std::copy_n(orow, E, out + (g * T + i) * E);
    }
  });
  return Status::ok();
}

}  // namespace volta::cpu
