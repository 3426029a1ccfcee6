// The CPU backend's attention kernels.
//
// attention: per (batch, head) group. With many query rows and one block of keys, the scores of
// the whole group come from one GEMM, each row from the fused softmax row kernel (softmax.cpp),
// and the output from a second GEMM. Otherwise (a decode step: one query row, its cache and new
// position as two key blocks) each query row gets its scores from key_scores (blocks of keys
// transposed in registers, each score the matmul's chain) and its weighted sum from the matmul
// microkernels, the chain over the keys continued from k into k2.
//
// attention_grad: per group, the probabilities are recomputed as above (or read, when the
// forward stored them: store_probs), then dp = dy vᵀ, the softmax gradient rows (in place), and
// dq = ds k, dk = dsᵀ q, dv = pᵀ dy, each a GEMM. The stored probabilities are the rows the
// recomputation would give (whole rows, the same products and row kernel), so the gradients
// have the same bits either way.
//
// A group's products are small (TinyLM: 16 rows by 32 columns over up to 64 keys): where the
// kernels can read the operands as they lie (kᵀ and vᵀ packed once per group, through
// gemm_packed_b) they run straight through the register tiles (gemm_tiles), without gemm's task
// list and blocking, which cost a tenth of the training step's attention.
//
// Every element is therefore the FMA chain (or row kernel) the unfused graph would compute, so
// the results have the same bits as matmul -> softmax(scale, causal) -> matmul and its backward,
// without the score and probability matrices in memory. An additive mask (imported attention)
// is added to each scaled score row before its softmax, as mul and add would round them. Groups
// are the tasks (a decode step's heads a share per thread, their scores computed together); a
// group's bits depend on neither the split nor the thread count.
//
// Causal blocks skip what the mask makes exactly zero, in blocks of query rows: the scores a
// block never reads, and the terms of a chain whose probability (or ds) is an exact zero. A
// chain starts at +0 and so never holds -0, so adding fma(±0, x, acc) leaves it unchanged when
// x is finite: the skipped terms change no bit. Each group checks that (its operands finite,
// its masked ds entries zero) and computes every term when it does not hold.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <vector>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/ref_util.h"
#include "backends/cpu/vec.h"

namespace volta::cpu {

namespace {

// c[0, cols) (= or +=) a[0, k) @ B[k, cols], B row stride b_rs and readable over all cols
// (a multiple of the ISA's vector width).
void row_product(MatmulIsa isa, const float* a, int64_t k, const float* b, int64_t b_rs, float* c, int64_t cols,
                 bool accumulate) {
  const int64_t w = matmul_narrow_cols(isa), max_vecs = matmul_row_tile_vectors(isa);
  // a_rs != 1 selects the strided-A kernels: A(0, p) = a[p]. Made once, filled in the loop, and
  // field by field: a brace initializer zeroed the whole struct first (a `rep stos` per weighted sum).
  TileArgs t;
  t.rows = 1, t.k = k, t.a = a, t.a_rs = 0, t.a_cs = 1, t.b_rs = b_rs, t.ldc = cols, t.accumulate = accumulate;
  for (int64_t c0 = 0; c0 < cols;) {
    t.b = b + c0, t.c = c + c0;
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

// A batch's groups (its heads) read and write the same rows of a packed projection, each a
// narrow slice of them (a head's 32 values of a 1536-byte row), and those rows come from L3 or
// memory in a training step (written a layer, or a forward pass, before). Read so, slice by
// slice and row by row, they arrive slower than in one pass over the rows in order: the first
// group of a batch takes that pass, one load a line (stage_lines), and fetches the lines of its
// output rows for writing (prefetch_for_write), so the batch's groups then find them in L2.
void stage_lines(const float* p, int64_t floats) {
  float acc[4] = {};
  int64_t i = 0;
  for (; i + 64 <= floats; i += 64) acc[0] += p[i], acc[1] += p[i + 16], acc[2] += p[i + 32], acc[3] += p[i + 48];
  for (; i < floats; i += 16) acc[0] += p[i];
  asm volatile("" : : "g"(acc[0] + acc[1] + acc[2] + acc[3]));  // the loads are the point: keep them
}
void prefetch_for_write(float* p, int64_t floats) {
  for (int64_t i = 0; i < floats; i += 16) __builtin_prefetch(p + i, 1, 3);
}

// Per-thread scratch, grown on demand and reused across calls.
float* scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

constexpr int64_t kBlockRows = 8;    // query rows from which a group's products are GEMMs
constexpr int64_t kCausalRows = 16;  // query (or key) rows per block of a causal group's products
constexpr int64_t kGroupsTogether = 16;  // a decode step's groups (heads) one task takes at most

// The keys query rows [.., i1) see: for the rows of a causal block, all its nonzero
// probabilities lie before this. A negative offset (rows that see no key) turns skipping off.
bool skips(const ref::AttentionArgs& at) { return at.causal && at.offset >= 0; }
int64_t keys_seen(const ref::AttentionArgs& at, int64_t i1, int64_t S) {
  return skips(at) ? std::min(S, i1 + at.offset) : S;
}
// The first query row that sees key j0.
int64_t first_query(const ref::AttentionArgs& at, int64_t j0, int64_t T) {
  return skips(at) ? std::clamp<int64_t>(j0 - at.offset, 0, T) : 0;
}

// c[rows, N] = a[rows, K] @ b[K, N] (b row-major, read in place) straight through the tiles when
// its K fits one block, else through gemm: the same bits either way.
void product(MatmulIsa isa, const MatmulBlocking& bl, MatView a, MatView b, float* c, int64_t ldc, int64_t rows, int64_t N,
             int64_t K) {
  if (K <= bl.kc && b.cs == 1 && gemm_tiles(isa, a, b.data, 1, b.rs, c, ldc, rows, N, K)) return;
  gemm(isa, bl, a, b, c, ldc, rows, N, K);
}

// c[T, N] (row stride ldc) = a[T, K] @ b[K, N] over row blocks [i0, i1) each reading only the
// first keys_seen(i1) of K (`cut`: true) or all of K: the products whose A is probabilities or ds.
void rows_by_keys(MatmulIsa isa, const ref::AttentionArgs& at, bool cut, MatView a, MatView b, float* c, int64_t ldc,
                  int64_t T, int64_t N, int64_t K) {
  const MatmulBlocking bl = matmul_blocking_for(isa, T, N, K);
  if (!cut) return product(isa, bl, a, b, c, ldc, T, N, K);
  for (int64_t i0 = 0; i0 < T; i0 += kCausalRows) {
    const int64_t i1 = std::min(T, i0 + kCausalRows);
    product(isa, bl, {a.data + i0 * a.rs, a.rs, a.cs}, b, c + i0 * ldc, ldc, i1 - i0, N, keys_seen(at, i1, K));
  }
}

// c[S, N] (row stride ldc) = a[S, T] @ b[T, N] (row stride b_rs) where a is the transpose of
// probabilities or ds [T, S]: key row block [j0, j1) starts its chains at query first_query(j0)
// (`cut`) instead of 0.
void keys_by_rows(MatmulIsa isa, const ref::AttentionArgs& at, bool cut, const float* m, const float* b, int64_t b_rs,
                  float* c, int64_t ldc, int64_t S, int64_t N, int64_t T) {
  const MatmulBlocking bl = matmul_blocking_for(isa, S, N, T);
  if (!cut) return product(isa, bl, {m, 1, S}, {b, b_rs, 1}, c, ldc, S, N, T);
  for (int64_t j0 = 0; j0 < S; j0 += kCausalRows) {
    const int64_t j1 = std::min(S, j0 + kCausalRows), i0 = first_query(at, j0, T);
    product(isa, bl, {m + i0 * S + j0, 1, S}, {b + i0 * b_rs, b_rs, 1}, c + j0 * ldc, ldc, j1 - j0, N, T - i0);
  }
}

// Query rows [i0, i0 + rows) of group g, ld apart: their scores s[0, S) (valid + (i - i0) *
// valid_step of them read; S may be the keys padded to whole vectors) -> probabilities p[0, S):
// softmax(scale * s), or with a mask softmax(scale * s + mask row) (the rows scaled first, then
// softmax_rows adds the mask to x * 1), then nan -> 0 when asked (only a row that held an inf
// or nan can have one).
void probs_rows(const ref::AttentionArgs& at, int64_t g, int64_t i0, int64_t rows, float* s, float* p, int64_t ld, int64_t S,
                int64_t valid, int64_t valid_step) {
  float scale = static_cast<float>(at.scale);
  const float* mask = at.mask ? at.mask_row(g, i0) : nullptr;  // read over the valid keys only
  if (mask && scale != 1.0f) {
    for (int64_t i = 0; i < rows; ++i) scale_row(s + i * ld, std::clamp<int64_t>(valid + i * valid_step, 0, S), scale);
    scale = 1.0f;
  }
  if (!softmax_rows(s, p, ld, rows, S, valid, valid_step, scale, false, mask, at.mask_row_stride) && at.zero_nan)
    for (int64_t i = 0; i < rows; ++i)
      for (float* q = p + i * ld; q < p + i * ld + S; ++q) *q = std::isnan(*q) ? 0.0f : *q;
}

// One group's probabilities: p[T, S] = softmax(scale * q[T, D] kᵀ (+ mask)) with k [S, D] (rows
// at.q_rs and at.k_rs apart), causal rows leaving out keys past i + offset (whose scores are
// never computed).
// `trim`: a causal row block's rows are written up to its keys_seen only (all that the forward's
// cut second product reads of them; the backward reads whole rows).
void group_probs(MatmulIsa isa, const ref::AttentionArgs& at, int64_t g, const float* q, const float* k, int64_t S,
                 float* p, bool trim = false) {
  const int64_t T = at.T, D = at.D;
  const MatmulBlocking bl = matmul_blocking_for(isa, T, S, D);
  // kᵀ packed once for all row blocks (each reads its first keys_seen columns).
  thread_local std::vector<float> kt;
  kt.resize(static_cast<size_t>(matmul_packed_b_floats(isa, S, D)));
  pack_b_once(isa, bl, {k, at.k_ds, at.k_rs}, S, D, kt.data());
  for (int64_t i0 = 0; i0 < T; i0 += kCausalRows) {
    const int64_t i1 = std::min(T, i0 + kCausalRows);
    gemm_packed_b(isa, bl, {q + i0 * at.q_rs, at.q_rs, 1}, kt.data(), S, p + i0 * S, S, i1 - i0, keys_seen(at, i1, S), D);
  }
  for (int64_t i0 = 0; i0 < T; i0 += kCausalRows) {
    const int64_t i1 = std::min(T, i0 + kCausalRows), width = trim ? keys_seen(at, i1, S) : S;
    probs_rows(at, g, i0, i1 - i0, p + i0 * S, p + i0 * S, S, width, at.causal ? i0 + at.offset + 1 : S, at.causal ? 1 : 0);
  }
}

// dst[0, n) = src[0, width) then zeros, with non-temporal stores where the lines are whole
// (x86-64's baseline SSE2): a buffer written now and read back after the rest of the forward
// pass gains nothing from the caches. stream_done orders those stores before the kernel returns.
void stream_row(const float* src, int64_t width, float* dst, int64_t n) {
  int64_t j = 0;
#if defined(__SSE2__)
  for (; j < n && reinterpret_cast<uintptr_t>(dst + j) % 16 != 0; ++j) dst[j] = j < width ? src[j] : 0.0f;
  for (; j + 4 <= n; j += 4) {
    __m128 x = _mm_setzero_ps();
    if (j + 4 <= width) {
      x = _mm_loadu_ps(src + j);
    } else if (j < width) {  // the vector across the end of the row's values
      float part[4] = {};
      std::copy(src + j, src + width, part);
      x = _mm_loadu_ps(part);
    }
    _mm_stream_ps(dst + j, x);
  }
#endif
  for (; j < n; ++j) dst[j] = j < width ? src[j] : 0.0f;
}
void stream_done() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Whether every masked entry of the causal rows of m [T, S] is a zero.
bool masked_zero(const ref::AttentionArgs& at, const float* m, int64_t T, int64_t S) {
  for (int64_t i = 0; i < T; ++i) {
    const int64_t seen = std::min(S, i + at.offset + 1);
    if (!all_zero(m + i * S + seen, S - seen)) return false;
  }
  return true;
}

// dst[T, S] = the group's probabilities p (rows S apart), for attention_grad, which reads them
// long after: streamed past the caches (no read of the lines first). `trimmed`: each causal row
// block holds only its first keys_seen columns; the rest are masked entries, which the softmax
// rows make exactly +0 (every row keeps a key when the block skips), so zeros are written.
void store_probs(const ref::AttentionArgs& at, const float* p, float* dst, int64_t T, int64_t S, bool trimmed) {
  for (int64_t i0 = 0; i0 < T; i0 += kCausalRows) {
    const int64_t i1 = std::min(T, i0 + kCausalRows), width = trimmed ? keys_seen(at, i1, S) : S;
    for (int64_t i = i0; i < i1; ++i) stream_row(p + i * S, width, dst + i * S, S);
  }
  stream_done();
}

// attention, or with `cache` cache_attention (inputs q, the caches, the new rows k and v, the
// position): each task first writes the new rows of the key heads whose first query head it
// takes into the caches, rows the call does not read (it reads the cached rows before them and
// the new rows where they are), so the writes need no order among the tasks.
Status attend(const KernelArgs& a, const ref::AttentionArgs& at, bool cache) {
  const int64_t G = at.G, T = at.T, D = at.D, E = at.E, S = at.keys();
  // (k, v), then (k2, v2): a fixed array, as a decode step allocates nothing per token.
  std::array<Source, 2> blocks{};
  size_t n_blocks = 0;
  for (size_t b = 0; 2 * b + 2 < a.in.size() && b < blocks.size(); ++b)
    blocks[n_blocks++] = {a.in[2 * b + 1].as<const float>(), a.in[2 * b + 2].as<const float>(), at.used[b], at.cap[b]};
  const std::span<const Source> src(blocks.data(), n_blocks);
  const MatmulIsa isa = matmul_active_isa();
  const float* q = a.in[0].as<const float>();
  float* out = a.out.as<float>();
  if (T >= kBlockRows && src.size() == 1) {  // one block of keys (a prefill or training step)
    const Source& s = src[0];
    parallel_for(G, [&](int64_t g) {
      float* p = scratch(static_cast<size_t>(T * S));
      if (at.heads && g % at.heads == 0) {  // the batch's rows: q, k and v of all its heads
        stage_lines(q + at.q_off(g), T * at.q_rs);
        prefetch_for_write(out + at.o_off(g), T * at.o_rs);
      }
      const float* v = s.v + at.v_off(g);
      const bool cut = skips(at) && all_finite_rows(v, S, E, at.v_rs);  // then the rows past keys_seen are never read
      group_probs(isa, at, g, q + at.q_off(g), s.k + at.k_off(g), S, p, cut);
      rows_by_keys(isa, at, cut, {p, S, 1}, {v, at.v_rs, 1}, out + at.o_off(g), at.o_rs, T, E, S);
      if (at.store) store_probs(at, p, out + at.probs_off(g, 0), T, S, cut);
    });
    return Status::ok();
  }
  // Score rows padded to whole 16-lane groups: softmax_rows then loads no partial vector (its
  // masked lanes give the bits of a row of S).
  const int64_t w = matmul_narrow_cols(isa), Sp = round_up(S, 16), Ep = round_up(E, w);
  const bool copy_v = Ep != E;  // the value rows are read a whole vector at a time
  // Keys as columns (a key cache stored transposed): every score from key_scores_columns, the
  // cache's new keys first written into it by the task that takes all the groups of their key
  // head, so no task reads keys another one writes.
  const bool columns = at.k_ds != 1;
  // A decode step's groups (one query row each) in as many tasks as there are threads, each
  // task's groups a phase at a time: the scores of all its heads with their chains interleaved
  // (key_scores_rows), then each head's softmax and weighted sum. Head by head, each row of a
  // few dozen keys waited on its own chains' latency. Which groups share a task changes no bit.
  // As many tasks on every thread: 48 groups (batch 12) in tasks of 16 at 2 threads were one
  // task on one thread and two on the other.
  const int64_t threads = num_threads(), rounds = std::max<int64_t>(1, ceil_div(G, threads * kGroupsTogether));
  int64_t per = T == 1 && !copy_v ? std::clamp<int64_t>(ceil_div(G, threads * rounds), 1, kGroupsTogether) : 1;
  if (columns && cache) per = round_up(per, std::max<int64_t>(1, at.rep));
  parallel_for(ceil_div(G, per), [&](int64_t t) {
    const int64_t g0 = t * per, n = std::min(per, G - g0);
    // Scratch: per group scores and probabilities [Sp] each, and padded values [S, Ep] when E is
    // not a multiple of the width; then an output row [Ep].
    float* scores = scratch(static_cast<size_t>(2 * Sp * n + (copy_v ? n * S * Ep + Ep : 0)));
    float* vp = scores + 2 * Sp * n;
    float* orow = vp + (copy_v ? n * S * Ep : 0);
    thread_local std::vector<const float*> key_rows;  // key j of each group, from whichever block
    std::vector<const float*>& rows = key_rows;        // (the thread-local looked up once)
    if (!columns) rows.resize(static_cast<size_t>(S * n));
    thread_local std::vector<KeyColumnRow> column_rows;
    if (columns) column_rows.resize(static_cast<size_t>(n));
    std::array<KeyScoreRow, kGroupsTogether> score_rows;  // the first n set below (not zeroed first: a `rep stos`)
    for (int64_t gi = 0; gi < n; ++gi) {
      const int64_t g = g0 + gi;
      if (cache && g % at.rep == 0) ref::write_new_rows(a, at, at.kv(g));
      const float** grows = columns ? nullptr : rows.data() + gi * S;
      float* gvp = copy_v ? vp + gi * S * Ep : nullptr;
      int64_t first = 0;  // the block's first key in the group
      for (size_t b = 0; b < src.size(); ++b) {
        const Source& s = src[b];
        // Block 0 lies as the layout says (packed heads, or its cap rows per group), block 1 plainly.
        const float* k0 = b == 0 ? s.k + at.k_off(g) : s.k + at.kv(g) * s.cap * D;
        const float* v0 = b == 0 ? s.v + at.v_off(g) : s.v + at.kv(g) * s.cap * E;
        const int64_t k_rs = b == 0 ? at.k_rs : D, v_rs = b == 0 ? at.v_rs : E;
        for (int64_t j = 0; !columns && j < s.S; ++j) grows[first + j] = k0 + j * k_rs;
        for (int64_t j = 0; copy_v && j < s.S; ++j) {
          float* row = gvp + (first + j) * Ep;
          std::copy_n(v0 + j * v_rs, E, row);
          std::fill(row + E, row + Ep, 0.0f);
        }
        first += s.S;
      }
      float* sc = scores + 2 * Sp * gi;
      std::fill(sc + S, sc + Sp, 0.0f);  // key_scores writes [0, S) only
      // Columns: all S keys in the cache (the new ones written above).
      if (columns) column_rows[static_cast<size_t>(gi)] = {q + at.q_off(g), src[0].k + at.k_off(g), at.k_ds, S, sc};
      else score_rows[static_cast<size_t>(gi)] = {q + at.q_off(g), grows, S, sc};
    }
    if (T == 1 && columns) key_scores_columns(isa, D, std::span(column_rows.data(), static_cast<size_t>(n)));
    if (T == 1 && !columns) key_scores_rows(isa, D, std::span(score_rows.data(), static_cast<size_t>(n)));  // each score the matmul's chain
    for (int64_t gi = 0; gi < n; ++gi) {
      const int64_t g = g0 + gi;
      float* sc = scores + 2 * Sp * gi;
      float* probs = sc + Sp;
      for (int64_t i = 0; i < T; ++i) {
        const float* qi = q + at.q_off(g) + i * at.q_rs;
        if (T > 1 && columns) key_scores_columns(isa, D, std::array{KeyColumnRow{qi, src[0].k + at.k_off(g), at.k_ds, S, sc}});
        if (T > 1 && !columns) key_scores(isa, qi, D, rows.data() + gi * S, S, sc);
        probs_rows(at, g, i, 1, sc, probs, Sp, Sp, std::min(S, at.causal ? i + at.offset + 1 : S), 0);
        if (at.store) std::copy_n(probs, S, out + at.probs_off(g, i));
        float* o = copy_v ? orow : out + at.o_off(g) + i * at.o_rs;
        bool started = false;
        int64_t j0 = 0;
        for (size_t b = 0; b < src.size(); ++b) {
          const Source& s = src[b];
          if (s.S == 0) continue;
          const float* v = copy_v ? vp + gi * S * Ep + j0 * Ep : b == 0 ? s.v + at.v_off(g) : s.v + at.kv(g) * s.cap * E;
          row_product(isa, probs + j0, s.S, v, copy_v ? Ep : b == 0 ? at.v_rs : E, o, Ep, started);
          started = true;
          j0 += s.S;
        }
        if (copy_v) std::copy_n(orow, E, out + at.o_off(g) + i * at.o_rs);
      }
    }
  });
  return Status::ok();
}

}  // namespace

size_t attention_scratch_bytes(const ir::Graph& g, const ir::Node& node) {
  const bool fwd = node.op == ir::Op::Attention || node.op == ir::Op::CacheAttention, grad = node.op == ir::Op::AttentionGrad;
  if ((!fwd && !grad) || node.inputs.size() < 3) return 0;
  const Shape& q = g.node(node.inputs[0]).type.shape;
  const Shape& k = g.node(node.inputs[1]).type.shape;
  if (q.size() < 2 || k.size() < 2) return 0;
  // Bounds from the shapes: T query rows, at most S keys (a cache's capacity, either layout), D
  // the widest row (a packed projection's whole row).
  const auto T = static_cast<size_t>(q[q.size() - 2]), D = static_cast<size_t>(q.back());
  size_t S = node.attrs.has("packed_heads") ? T : static_cast<size_t>(std::max(k[k.size() - 1], k[k.size() - 2]));
  if (node.op == ir::Op::Attention && node.inputs.size() >= 5) {
    const Shape& k2 = g.node(node.inputs[3]).type.shape;
    if (k2.size() >= 2) S += static_cast<size_t>(k2[k2.size() - 2]);
  }
  const Shape& v = g.node(node.inputs[2]).type.shape;
  const size_t W = std::max(D, v.empty() ? size_t{0} : static_cast<size_t>(v.back())) + 16;  // a row, padded
  const auto sat = [](size_t a, size_t b) { return b != 0 && a > (size_t{1} << 60) / b ? size_t{1} << 60 : a * b; };
  const auto sum = [](size_t a, size_t b) { return std::min(a + b, size_t{1} << 60); };
  // kᵀ packed (group_probs; the gradient's recompute too) beside a group's probabilities (and
  // the gradient's ds); a decode step's (or a two-block step's) groups: scores and
  // probabilities, padded value rows and an output row each, and the key row pointers.
  const size_t packed = sum(sat(T, S), sat(S, W)), rows = sat(kGroupsTogether, sum(sum(4 * (S + 16), sat(S, W)), W));
  if (grad) return sat(sizeof(float), sum(sat(2 * T, T), sat(T, W)));
  return sat(sizeof(float), std::max(packed, rows));
}

Status attention(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const ref::AttentionArgs at, read_outside_tasks(a.in.size() == 4 ? &a.in[3] : nullptr, [&] { return ref::attention_args(a); }));
  return attend(a, at, false);
}

Status cache_attention(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const ref::AttentionArgs at, read_outside_tasks(&a.in[5], [&] { return ref::cache_attention_args(a); }));
  return attend(a, at, true);
}

Status attention_grad(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const ref::AttentionArgs at, ref::attention_grad_args(a));
  const int64_t G = at.G, T = at.T, D = at.D;
  const float *q = a.in[0].as<const float>(), *k = a.in[1].as<const float>(), *v = a.in[2].as<const float>(),
              *dy = a.in[3].as<const float>();
  float* out = a.out.as<float>();
  const MatmulIsa isa = matmul_active_isa();
  parallel_for(G, [&](int64_t g) {
    // k and v: key group g / rep; dy lies as attention's output.
    const float *qg = q + at.q_off(g), *kg = k + at.k_off(g), *vg = v + at.v_off(g), *dyg = dy + at.o_off(g);
    float* ds = scratch(static_cast<size_t>(2 * T * T));
    if (at.heads && g % at.heads == 0) {  // the batch's rows of q, k, v, dy and the gradient, its probabilities
      stage_lines(qg, T * at.q_rs);
      stage_lines(dyg, T * at.o_rs);
      if (at.probs) stage_lines(at.probs + g * T * T, at.heads * T * T);
      prefetch_for_write(out + at.grad_off(0, g), T * at.grad_rs());
    }
    const float* p = at.probs ? at.probs + g * T * T : ds + T * T;  // stored, or recomputed
    if (!at.probs) group_probs(isa, at, g, qg, kg, T, ds + T * T);
    // dp = dy vᵀ in full: a masked dp that overflowed would reach ds through the row sums.
    const MatmulBlocking bl = matmul_blocking_for(isa, T, T, D);
    thread_local std::vector<float> vt;  // vᵀ in panels, as group_probs packs kᵀ
    vt.resize(static_cast<size_t>(matmul_packed_b_floats(isa, T, D)));
    pack_b_once(isa, bl, {vg, 1, at.v_rs}, T, D, vt.data());
    gemm_packed_b(isa, bl, {dyg, at.o_rs, 1}, vt.data(), T, ds, T, T, T, D);
    softmax_grad_rows(p, ds, ds, T, T, T, static_cast<float>(at.scale));
    const bool ds_cut = skips(at) && masked_zero(at, ds, T, T);
    const int64_t ld = at.grad_rs();
    rows_by_keys(isa, at, ds_cut && all_finite_rows(kg, T, D, at.k_rs), {ds, T, 1}, {kg, at.k_rs, 1}, out + at.grad_off(0, g),
                 ld, T, D, T);  // dq = ds k
    keys_by_rows(isa, at, ds_cut && all_finite_rows(qg, T, D, at.q_rs), ds, qg, at.q_rs, out + at.grad_off(1, g), ld, T, D,
                 T);  // dk = dsᵀ q
    // Stored probabilities are an input: their masked entries are checked as ds's are.
    const bool p_cut = skips(at) && (!at.probs || masked_zero(at, p, T, T)) && all_finite_rows(dyg, T, D, at.o_rs);
    keys_by_rows(isa, at, p_cut, p, dyg, at.o_rs, out + at.grad_off(2, g), ld, T, D, T);  // dv = pᵀ dy
  });
  return Status::ok();
}

// rope: the reference rows (rope_rows), split into tasks of whole rows by the shape alone.
Status rope(const KernelArgs& a) {
  VOLTA_ASSIGN_OR_RETURN(const int64_t position, read_outside_tasks(a.in.size() >= 4 ? &a.in[3] : nullptr, [&] { return ref::rope_position(a); }));
  const int64_t D = std::max<int64_t>(1, a.in[0].shape().back()), rows = a.in[0].numel() / D;
  const int64_t per = std::max<int64_t>(1, 16384 / D);
  parallel_for((rows + per - 1) / per, [&](int64_t t) { ref::rope_rows(a, position, t * per, std::min(rows, (t + 1) * per)); });
  return Status::ok();
}

}  // namespace volta::cpu
