// The CPU backend's matmul against the reference kernel, over edge shapes, transposes and
// broadcast batches; and its determinism contract, bit for bit: every element is the chain of
// fused multiply-adds in k order, whatever the blocking, ISA, tile, task split or thread count.
#include <cmath>
#include <cstring>
#include <memory>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "ir/packed_weight.h"
#include "test_util.h"
#include "volta/backend.h"
#include "volta/rng.h"

namespace volta {
namespace {

struct MatmulCase {
  Shape a, b;
  bool ta, tb;
};

void compare(const MatmulCase& c, uint64_t seed) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  if (c.ta) n.attrs.set("transpose_a", int64_t{1});
  if (c.tb) n.attrs.set("transpose_b", int64_t{1});
  Tensor a = Tensor::zeros(DType::f32, c.a), b = Tensor::zeros(DType::f32, c.b);
  fill_normal(a, seed, 1, 0.0f, 1.0f);
  fill_normal(b, seed, 2, 0.0f, 1.0f);
  auto type = ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a.type(), b.type()}, n.attrs);
  ASSERT_OK(type);
  n.type = *type;
  auto expected = cpu::evaluate_reference(n, std::vector<Tensor>{a, b});
  ASSERT_OK(expected);
  ir::Graph g;
  g.nodes = {ir::Node{0, "a", ir::Op::Input, {}, {}, a.type(), {}}, ir::Node{1, "b", ir::Op::Input, {}, {}, b.type(), {}}};
  n.id = 2;
  n.inputs = {0, 1};
  std::vector<std::byte> ws(cpu::matmul_workspace_bytes(g, n));
  const int64_t K = c.ta ? c.a[c.a.size() - 2] : c.a.back();
  for (int rep = 0; rep < 2; ++rep) {
    Tensor out = Tensor::zeros(DType::f32, n.type.shape);
    TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
    TensorRef o{out.raw(), out.type()};
    ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, o, ws}));
    double max_err = 0.0;
    for (int64_t i = 0; i < out.numel(); ++i)
      max_err = std::max(max_err, std::fabs(double(out.data<float>()[i]) - expected->data<float>()[i]));
    // f32 accumulation of K unit-variance products vs the double-accumulated oracle.
    EXPECT_LE(max_err, 1e-6 * (4.0 + static_cast<double>(K))) << shape_to_string(c.a) << " @ " << shape_to_string(c.b)
                                                               << " ta=" << c.ta << " tb=" << c.tb;
  }
}

TEST(CpuMatmul, MatchesReferenceOnEdgeShapes) {
  for (int64_t m : {1, 2, 5, 6, 7, 13, 17})
    for (int64_t n : {1, 3, 15, 16, 17, 33})
      for (int64_t k : {1, 2, 7, 16})
        for (int t = 0; t < 4; ++t) {
          bool ta = t & 1, tb = t & 2;
          compare({ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}, ta, tb}, static_cast<uint64_t>(m * 100 + n + k));
        }
}

TEST(CpuMatmul, MatchesReferenceOnModelShapes) {
  compare({{64, 128}, {128, 384}, false, false}, 1);
  compare({{128, 64}, {128, 257}, true, false}, 2);
  compare({{96, 129}, {65, 129}, false, true}, 3);
  compare({{2, 4, 16, 8}, {2, 4, 16, 8}, false, true}, 4);   // attention scores
  compare({{2, 1, 6, 5}, {3, 5, 7}, false, false}, 5);       // broadcast batch
  compare({{3, 9, 4}, {4, 18}, false, false}, 6);            // batched @ shared matrix
}

TEST(CpuMatmul, IsDeterministic) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  n.type = {DType::f32, {37, 45}};
  Tensor a = Tensor::zeros(DType::f32, {37, 131}), b = Tensor::zeros(DType::f32, {131, 45});
  fill_normal(a, 9, 1, 0.0f, 1.0f);
  fill_normal(b, 9, 2, 0.0f, 1.0f);
  Tensor o1 = Tensor::zeros(DType::f32, {37, 45}), o2 = Tensor::zeros(DType::f32, {37, 45});
  TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
  TensorRef r1{o1.raw(), o1.type()}, r2{o2.raw(), o2.type()};
  ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, r1, {}}));
  ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, r2, {}}));
  EXPECT_TRUE(o1.bitwise_equal(o2));
}

TEST(CpuMatmul, SameBitsForAnyThreadCount) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  n.type = {DType::f32, {3, 200, 70}};
  n.attrs.set("transpose_b", int64_t{1});
  Tensor a = Tensor::zeros(DType::f32, {3, 200, 90}), b = Tensor::zeros(DType::f32, {70, 90});
  fill_normal(a, 4, 1, 0.0f, 1.0f);
  fill_normal(b, 4, 2, 0.0f, 1.0f);
  std::vector<Tensor> outs;
  for (int threads : {1, 2, 3}) {
    set_cpu_threads(threads);
    Tensor o = Tensor::zeros(DType::f32, {3, 200, 70});
    std::vector<std::byte> ws(70 * 90 * 4);
    TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
    TensorRef r{o.raw(), o.type()};
    ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, r, ws}));
    outs.push_back(o);
  }
  set_cpu_threads(0);
  EXPECT_TRUE(outs[0].bitwise_equal(outs[1]));
  EXPECT_TRUE(outs[0].bitwise_equal(outs[2]));
}

// ---- The determinism contract, bit for bit ----------------------------------------------------

// C = A @ B as the contract defines it: per element, std::fma in k order from +0.
std::vector<float> fma_chain(cpu::MatView A, cpu::MatView B, int64_t M, int64_t N, int64_t K) {
  std::vector<float> c(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc = std::fma(A.data[m * A.rs + k * A.cs], B.data[k * B.rs + n * B.cs], acc);
      c[static_cast<size_t>(m * N + n)] = acc;
    }
  return c;
}

std::vector<float> normal(int64_t n, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::f32, {n});
  fill_normal(t, seed, 3, 0.0f, 1.0f);
  return {t.data<float>(), t.data<float>() + n};
}

// Operands of one product stored row-major or transposed, starting `offset` floats into their
// buffers (offset 1: no vector alignment).
struct Problem {
  int64_t M, N, K;
  bool ta, tb;
  int64_t offset = 0;
  std::vector<float> a, b;
  Problem(int64_t m, int64_t n, int64_t k, bool ta_, bool tb_, int64_t off = 0, uint64_t seed = 1)
      : M(m), N(n), K(k), ta(ta_), tb(tb_), offset(off), a(normal(off + m * k, seed)), b(normal(off + k * n, seed + 7)) {}
  cpu::MatView A() const { return ta ? cpu::MatView{a.data() + offset, 1, M} : cpu::MatView{a.data() + offset, K, 1}; }
  cpu::MatView B() const { return tb ? cpu::MatView{b.data() + offset, 1, K} : cpu::MatView{b.data() + offset, N, 1}; }
  std::vector<float> run(cpu::MatmulIsa isa, const cpu::MatmulBlocking& bl) const {
    std::vector<float> c(static_cast<size_t>(offset + M * N), -1.0f);
    cpu::gemm(isa, bl, A(), B(), c.data() + offset, N, M, N, K);
    return {c.begin() + offset, c.end()};
  }
};

std::string describe(const Problem& p, cpu::MatmulIsa isa, const cpu::MatmulBlocking& bl) {
  return std::to_string(p.M) + "x" + std::to_string(p.N) + "x" + std::to_string(p.K) + " ta=" + std::to_string(p.ta) +
         " tb=" + std::to_string(p.tb) + " offset=" + std::to_string(p.offset) + " isa=" + std::string(cpu::matmul_isa_name(isa)) +
         " kc=" + std::to_string(bl.kc) + " mc=" + std::to_string(bl.mc) + " nc=" + std::to_string(bl.nc);
}

std::vector<cpu::MatmulIsa> supported_isas() {
  std::vector<cpu::MatmulIsa> out;
  for (auto isa : {cpu::MatmulIsa::kScalar, cpu::MatmulIsa::kAvx2, cpu::MatmulIsa::kAvx512})
    if (cpu::matmul_isa_supported(isa)) out.push_back(isa);
  return out;
}

// Blockings that cut the problems above in different places: tiny blocks (many K blocks, edge
// tiles everywhere), odd sizes, and the defaults.
std::vector<cpu::MatmulBlocking> blockings(cpu::MatmulIsa isa) {
  return {cpu::matmul_default_blocking(isa), {1, 1, 1}, {7, 13, 17}, {64, 48, 128}, {100, 30, 70}, {384, 500, 2048}};
}

void expect_bits(const Problem& p, cpu::MatmulIsa isa, const cpu::MatmulBlocking& bl, const std::vector<float>& want) {
  const std::vector<float> got = p.run(isa, bl);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0) << describe(p, isa, bl);
}

TEST(CpuMatmulBits, EdgeShapesEqualTheFmaChainForEveryIsaAndBlocking) {
  const std::vector<int64_t> sizes = {1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 17, 31, 33, 65};
  int cases = 0;
  for (int64_t m : sizes)
    for (int64_t n : sizes)
      for (int64_t k : {1, 3, 16, 17, 31}) {
        const int t = static_cast<int>((m + 3 * n + 5 * k) % 4);  // all four transposes, spread over the shapes
        const Problem p(m, n, k, t & 1, t & 2, (m + n) % 2, static_cast<uint64_t>(m * 1000 + n * 10 + k));
        const std::vector<float> want = fma_chain(p.A(), p.B(), m, n, k);
        for (cpu::MatmulIsa isa : supported_isas()) {
          expect_bits(p, isa, cpu::matmul_default_blocking(isa), want);
          expect_bits(p, isa, {5, 7, 9}, want);
        }
        ++cases;
      }
  EXPECT_EQ(cases, 14 * 14 * 5);
}

// Attention's decode scores: q against key rows read in place (stride > D), every block and tail
// of keys and of d, with the matmul's chain bits for every ISA.
TEST(CpuMatmulBits, KeyScoresEqualTheFmaChainForEveryIsa) {
  for (int64_t D : {1, 5, 8, 16, 21, 32, 37, 72, 133})
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 24, 32, 33, 40, 49, 63, 64, 65, 97, 127}) {
      const int64_t rs = D + 3;
      const std::vector<float> q = normal(D, static_cast<uint64_t>(D)), k = normal(n * rs, static_cast<uint64_t>(100 + n));
      const std::vector<float> want = fma_chain({k.data(), rs, 1}, {q.data(), 1, 1}, n, 1, D);
      for (cpu::MatmulIsa isa : supported_isas()) {
        std::vector<float> got(static_cast<size_t>(n) + 1, -7.0f);
        std::vector<const float*> rows;
        for (int64_t j = 0; j < n; ++j) rows.push_back(k.data() + j * rs);
        cpu::key_scores(isa, q.data(), D, rows.data(), n, got.data());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << "D=" << D << " n=" << n << " isa=" << cpu::matmul_isa_name(isa);
        EXPECT_EQ(got[static_cast<size_t>(n)], -7.0f) << "wrote past n";
      }
    }
}

// Several query rows' scores at once (a decode step's heads, their blocks interleaved): each
// row's scores have the bits key_scores gives it alone, for rows of every length side by side.
TEST(CpuMatmulBits, KeyScoresOfSeveralRowsEqualEachRowAlone) {
  const std::vector<int64_t> lengths = {1, 7, 8, 9, 16, 17, 40, 63, 0, 64, 65, 3};
  for (int64_t D : {5, 8, 32, 37})
    for (cpu::MatmulIsa isa : supported_isas()) {
      const int64_t rs = D + 1;
      std::vector<std::vector<float>> qs, keys, got;
      std::vector<std::vector<const float*>> rows(lengths.size());
      std::vector<cpu::KeyScoreRow> list;
      for (size_t r = 0; r < lengths.size(); ++r) {
        const int64_t n = lengths[r];
        qs.push_back(normal(D, 7 + r));
        keys.push_back(normal(std::max<int64_t>(1, n) * rs, 70 + r));
        for (int64_t j = 0; j < n; ++j) rows[r].push_back(keys[r].data() + j * rs);
        got.emplace_back(static_cast<size_t>(n) + 1, -7.0f);
      }
      for (size_t r = 0; r < lengths.size(); ++r) list.push_back({qs[r].data(), rows[r].data(), lengths[r], got[r].data()});
      cpu::key_scores_rows(isa, D, list);
      for (size_t r = 0; r < lengths.size(); ++r) {
        const int64_t n = lengths[r];
        std::vector<float> alone(static_cast<size_t>(n) + 1, -7.0f);
        cpu::key_scores(isa, qs[r].data(), D, rows[r].data(), n, alone.data());
        EXPECT_EQ(std::memcmp(got[r].data(), alone.data(), alone.size() * sizeof(float)), 0)
            << "D=" << D << " row " << r << " n=" << n << " isa=" << cpu::matmul_isa_name(isa);
      }
    }
}

// Scores against keys stored as columns (a transposed key cache, ld apart): the chain bits of the
// same keys as rows, for every ISA, rows of every length side by side; nothing written past n,
// the columns past n (nan here) never reaching a score, and no read past the buffer of D rows of
// ld columns (it ends the allocation: ASan reports a read beyond it).
TEST(CpuMatmulBits, KeyScoresOfColumnsEqualTheFmaChainForEveryIsa) {
  const std::vector<int64_t> lengths = {1, 7, 8, 9, 15, 16, 17, 40, 63, 0, 64, 65, 3};
  for (int64_t D : {1, 5, 8, 32, 37})
    for (cpu::MatmulIsa isa : supported_isas()) {
      std::vector<std::unique_ptr<float[]>> columns;
      std::vector<std::vector<float>> qs, got, want;
      std::vector<cpu::KeyColumnRow> list;
      for (size_t r = 0; r < lengths.size(); ++r) {
        const int64_t n = lengths[r], ld = n + static_cast<int64_t>(r % 3);  // padded columns past n, or none
        const std::vector<float> k = normal(std::max<int64_t>(1, n) * D, 90 + r);  // key j: row j
        columns.push_back(std::make_unique<float[]>(static_cast<size_t>(std::max<int64_t>(1, D * ld))));
        for (int64_t j = 0; j < ld; ++j)
          for (int64_t d = 0; d < D; ++d)
            columns.back()[static_cast<size_t>(d * ld + j)] = j < n ? k[static_cast<size_t>(j * D + d)] : std::nanf("");
        qs.push_back(normal(D, 9 + r));
        want.push_back(fma_chain({k.data(), D, 1}, {qs.back().data(), 1, 1}, n, 1, D));
        want.back().push_back(-7.0f);
        got.emplace_back(static_cast<size_t>(n) + 1, -7.0f);
      }
      for (size_t r = 0; r < lengths.size(); ++r)
        list.push_back({qs[r].data(), columns[r].get(), lengths[r] + static_cast<int64_t>(r % 3), lengths[r], got[r].data()});
      cpu::key_scores_columns(isa, D, list);
      for (size_t r = 0; r < lengths.size(); ++r)
        EXPECT_EQ(std::memcmp(got[r].data(), want[r].data(), want[r].size() * sizeof(float)), 0)
            << "D=" << D << " row " << r << " n=" << lengths[r] << " isa=" << cpu::matmul_isa_name(isa);
    }
}

// The packing transpose: every count of live and padding rows (AVX2's 8-row blocks and a last
// block of 1..7, its tile's 6-row panels among them; AVX-512's 16-row blocks and a masked last
// one, its tile's 12-row panels and B's 32-column ones among them) and of k (8- and 16-value
// blocks and single values), each value moved exactly, the padding zero and nothing written
// outside the panel.
TEST(CpuMatmul, TransposeCopyMovesEveryValueForEveryIsa) {
  for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 31, 32})
    for (int64_t pad : {0, 1, 2, 3})
      for (int64_t k : {1, 7, 8, 9, 15, 16, 21, 32, 35}) {
        const int64_t rows_out = rows + pad, src_rs = k + 2, dst_rs = rows_out + 1;
        const std::vector<float> src = normal(rows * src_rs, static_cast<uint64_t>(rows * 100 + k));
        for (cpu::MatmulIsa isa : supported_isas()) {
          std::vector<float> dst(static_cast<size_t>(k * dst_rs), -7.0f);
          cpu::transpose_copy(isa, src.data(), src_rs, rows, k, dst.data(), dst_rs, rows_out);
          for (int64_t p = 0; p < k; ++p)
            for (int64_t r = 0; r < dst_rs; ++r) {
              const float want = r >= rows_out ? -7.0f : r < rows ? src[static_cast<size_t>(r * src_rs + p)] : 0.0f;
              ASSERT_EQ(dst[static_cast<size_t>(p * dst_rs + r)], want)
                  << "rows=" << rows << " out=" << rows_out << " k=" << k << " p=" << p << " r=" << r
                  << " isa=" << cpu::matmul_isa_name(isa);
            }
        }
      }
}

// gemm_tiles (attention's blocks): a row-major B in place and B in pack_b_once's panels, A
// row-major or transposed, rows past a tile and columns ending on a narrow vector, each element
// the FMA chain; nothing written past the product, and false for what it cannot read.
TEST(CpuMatmulBits, DirectTilesEqualTheFmaChainForEveryIsa) {
  for (cpu::MatmulIsa isa : supported_isas()) {
    const int64_t narrow = cpu::matmul_narrow_cols(isa), nr = cpu::matmul_tile(isa).cols;
    for (int64_t M : {1, 5, 6, 13, 16})
      for (int64_t N : {narrow, nr, nr + narrow, 2 * nr, int64_t{64}})
        for (int64_t K : {1, 7, 32, 64})
          for (bool ta : {false, true})
            for (bool packed : {false, true}) {
              const Problem p(M, N, K, ta, false);
              const std::vector<float> want = fma_chain(p.A(), p.B(), M, N, K);
              std::vector<float> panels(static_cast<size_t>(cpu::matmul_packed_b_floats(isa, N, K)));
              cpu::pack_b_once(isa, {K, 0, 0}, p.B(), N, K, panels.data());
              const int64_t ldc = N + 3;
              std::vector<float> c(static_cast<size_t>(M * ldc), -7.0f);
              ASSERT_TRUE(packed ? cpu::gemm_tiles(isa, p.A(), panels.data(), K, nr, c.data(), ldc, M, N, K)
                                 : cpu::gemm_tiles(isa, p.A(), p.B().data, 1, N, c.data(), ldc, M, N, K));
              for (int64_t m = 0; m < M; ++m) {
                EXPECT_EQ(std::memcmp(c.data() + m * ldc, want.data() + m * N, static_cast<size_t>(N) * sizeof(float)), 0)
                    << M << "x" << N << "x" << K << " ta=" << ta << " packed=" << packed << " isa=" << cpu::matmul_isa_name(isa);
                for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(c[static_cast<size_t>(m * ldc + j)], -7.0f) << "wrote past N";
              }
            }
    const Problem odd(4, narrow + 1, 8, false, false);
    std::vector<float> c(64 * 64);
    EXPECT_FALSE(cpu::gemm_tiles(isa, odd.A(), odd.B().data, 1, odd.N, c.data(), odd.N, 4, odd.N, 8));
    EXPECT_FALSE(cpu::gemm_tiles(isa, odd.A(), odd.B().data, 1, odd.N, c.data(), odd.N, 4, narrow, 0));
  }
}

// Decode's products on a weight packed when the plan was made, read in place: every row count
// of the small-M path (the wide tile's, the half tile's, the row groups of batched decode, 3-row
// groups across panel pairs), columns of one to many panels and every K blocking, 1 and 2
// threads, each element the FMA chain and nothing written past N.
TEST(CpuMatmulBits, PackedWeightDecodeProductsEqualTheFmaChainForEveryIsa) {
  int cases = 0;
  for (cpu::MatmulIsa isa : supported_isas()) {
    if (isa == cpu::MatmulIsa::kScalar) continue;  // its tile reads no panels
    const int64_t nr = cpu::matmul_tile(isa).cols;
    for (int64_t M = 1; M <= 16; ++M)
      for (int64_t N : {nr, 3 * nr, int64_t{128}, int64_t{384}})
        for (const auto& [K, kc] : {std::pair<int64_t, int64_t>{7, 256}, {64, 256}, {300, 128}, {130, 5}}) {
          if (!cpu::matmul_reads_packed_b(isa, M, N, nr)) continue;
          const Problem p(M, N, K, false, false, 0, static_cast<uint64_t>(M * 100 + N + K));
          const std::vector<float> want = fma_chain(p.A(), p.B(), M, N, K);
          std::vector<float> packed(static_cast<size_t>(K * N)), plain(static_cast<size_t>(K * N));
          for (int64_t k = 0; k < K; ++k) std::memcpy(&plain[static_cast<size_t>(k * N)], p.B().data + k * N, N * sizeof(float));
          ir::repack_weight(plain.data(), packed.data(), K, N, kc, nr, true);
          cpu::MatmulBlocking bl = cpu::matmul_default_blocking(isa);
          bl.kc = kc;
          const int64_t ldc = N + 3;
          for (int threads : {1, 2}) {
            set_cpu_threads(threads);
            std::vector<float> c(static_cast<size_t>(M * ldc), -7.0f);
            cpu::gemm(isa, bl, p.A(), {plain.data(), N, 1}, c.data(), ldc, M, N, K, nullptr, packed.data());
            for (int64_t m = 0; m < M; ++m) {
              EXPECT_EQ(std::memcmp(c.data() + m * ldc, want.data() + m * N, static_cast<size_t>(N) * sizeof(float)), 0)
                  << M << "x" << N << "x" << K << " kc=" << kc << " threads=" << threads << " isa=" << cpu::matmul_isa_name(isa);
              for (int64_t j = N; j < ldc; ++j) ASSERT_EQ(c[static_cast<size_t>(m * ldc + j)], -7.0f) << "wrote past N";
            }
          }
          ++cases;
        }
  }
  set_cpu_threads(0);
  EXPECT_GT(cases, 0);
}

TEST(CpuMatmulBits, LargerShapesEqualTheFmaChainForEveryIsaAndBlocking) {
  struct S {
    int64_t m, n, k;
  };
  // Squares, odd K, K longer than any kc, N wider than nc, decode rows (M = 1..4, transposed B
  // included), narrow N, attention-sized products (a small row-major B of whole panels is read in
  // place), row blocks sharing one packed B (768 rows).
  const std::vector<S> shapes = {{64, 64, 64},  {65, 65, 65},  {128, 128, 128}, {31, 256, 129}, {1, 384, 128}, {1, 65, 128},
                                 {2, 129, 200}, {4, 96, 33},   {5, 70, 90},     {30, 2100, 40}, {17, 40, 900}, {200, 65, 300},
                                 {256, 256, 256}, {3, 1030, 7}, {64, 32, 64},   {64, 64, 32},   {24, 96, 40},  {768, 100, 70}};
  for (const S& s : shapes)
    for (int t = 0; t < 4; ++t) {
      const Problem p(s.m, s.n, s.k, t & 1, t & 2, t % 2, static_cast<uint64_t>(s.m + s.n + s.k + t));
      const std::vector<float> want = fma_chain(p.A(), p.B(), s.m, s.n, s.k);
      for (cpu::MatmulIsa isa : supported_isas())
        for (const cpu::MatmulBlocking& bl : blockings(isa)) {
          if (bl.kc == 1 && s.m * s.n * s.k > 200000) continue;  // kc = 1 is slow; the small shapes cover it
          expect_bits(p, isa, bl, want);
        }
    }
}

TEST(CpuMatmulBits, BigSquareMatchesAcrossBlockingsAndReference) {
  const Problem p(512, 512, 512, false, false);
  const cpu::MatmulIsa isa = cpu::matmul_best_isa();
  const std::vector<float> want = p.run(isa, cpu::matmul_default_blocking(isa));
  for (const cpu::MatmulBlocking& bl : std::vector<cpu::MatmulBlocking>{{64, 96, 256}, {384, 24, 1024}, {160, 288, 128}})
    expect_bits(p, isa, bl, want);
  // Spot-check against the contract's definition on a few rows.
  const std::vector<float> rows = fma_chain({p.a.data() + 100 * 512, 512, 1}, p.B(), 3, 512, 512);
  EXPECT_EQ(std::memcmp(rows.data(), want.data() + 100 * 512, rows.size() * sizeof(float)), 0);
}

// A task whose C is too big to stay cached runs each block of rows through all K blocks before
// the next (rows outer); a single K block cannot do that. Both give the bits of the chain.
TEST(CpuMatmulBits, RowsOuterOrderKeepsTheBits) {
  const Problem p(2400, 700, 300, false, false, 1, 5);  // 4 tasks of 1200 x 512: C past the cached size
  const std::vector<float> rows = fma_chain({p.a.data() + 1 + 1190 * 300, 300, 1}, p.B(), 20, 700, 300);
  for (cpu::MatmulIsa isa : supported_isas()) {
    if (isa == cpu::MatmulIsa::kScalar) continue;  // slow, and its tile has no other order
    const std::vector<float> want = p.run(isa, {512, 144, 512});  // K in one block
    expect_bits(p, isa, cpu::matmul_default_blocking(isa), want);
    expect_bits(p, isa, {100, 96, 512}, want);
    EXPECT_EQ(std::memcmp(rows.data(), want.data() + 1190 * 700, rows.size() * sizeof(float)), 0) << cpu::matmul_isa_name(isa);
  }
}

// The epilogue (a bias, a product by a stored operand as gelu_grad's, a residual) is applied to
// each block of rows of a task once its last K block is done, in either loop order (the first
// problem's tasks run rows outer, the second's K blocks outer): the bits of the product followed
// by the separate ops, for every ISA, blocking and thread count.
TEST(CpuMatmulBits, EpilogueOnEachRowBlockHasTheBitsOfTheSeparateOps) {
  for (const Problem& p : {Problem(2400, 700, 300, false, false, 0, 5), Problem(500, 70, 300, false, true, 0, 6)}) {
    const std::vector<float> bias = normal(p.N, 11), pre = normal(p.M * p.N, 12), res = normal(p.M * p.N, 13);
    for (cpu::MatmulIsa isa : supported_isas()) {
      if (isa == cpu::MatmulIsa::kScalar && p.M > 1000) continue;  // slow
      std::vector<float> want = p.run(isa, cpu::matmul_default_blocking(isa));
      for (size_t i = 0; i < want.size(); ++i) {
        float v = bias[i % static_cast<size_t>(p.N)] + want[i];
        v = pre[i] * v;
        want[i] = res[i] + v;
      }
      for (const cpu::MatmulBlocking& bl : {cpu::matmul_default_blocking(isa), cpu::MatmulBlocking{100, 96, 512}, cpu::MatmulBlocking{64, 48, 128}})
        for (int threads : {1, 2}) {
          std::vector<float> c(want.size(), -1.0f);
          cpu::MatmulEpilogue ep;
          ep.act = cpu::MatmulEpilogue::Act::kMul, ep.bias = bias.data(), ep.pre = pre.data(), ep.residual = res.data();
          ep.out = c.data(), ep.N = p.N;
          set_cpu_threads(threads);
          cpu::gemm(isa, bl, p.A(), p.B(), c.data(), p.N, p.M, p.N, p.K, &ep);
          set_cpu_threads(0);
          EXPECT_EQ(std::memcmp(c.data(), want.data(), want.size() * sizeof(float)), 0) << describe(p, isa, bl) << " threads " << threads;
        }
    }
  }
}

// The op kernel on a graph node: any batch layout, any thread count, any ISA gives the bits of
// a single-threaded default-blocking run.
std::vector<float> run_op(const MatmulCase& c, uint64_t seed, int threads, std::optional<cpu::MatmulIsa> isa) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  if (c.ta) n.attrs.set("transpose_a", int64_t{1});
  if (c.tb) n.attrs.set("transpose_b", int64_t{1});
  Tensor a = Tensor::zeros(DType::f32, c.a), b = Tensor::zeros(DType::f32, c.b);
  fill_normal(a, seed, 1, 0.0f, 1.0f);
  fill_normal(b, seed, 2, 0.0f, 1.0f);
  auto type = ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a.type(), b.type()}, n.attrs);
  EXPECT_TRUE(type.is_ok());
  n.type = *type;
  Tensor out = Tensor::zeros(DType::f32, n.type.shape);
  set_cpu_threads(threads);
  cpu::set_matmul_isa_override(isa);
  TensorRef in[2] = {{a.raw(), a.type()}, {b.raw(), b.type()}};
  TensorRef o{out.raw(), out.type()};
  EXPECT_TRUE(cpu::matmul(cpu::KernelArgs{n, in, o, {}}).is_ok());
  cpu::set_matmul_isa_override(std::nullopt);
  set_cpu_threads(0);
  return {out.data<float>(), out.data<float>() + out.numel()};
}

TEST(CpuMatmulBits, BatchesThreadsAndIsasGiveIdenticalBits) {
  const std::vector<MatmulCase> cases = {
      {{4, 70, 33}, {4, 33, 90}, false, false},     // batched
      {{3, 50, 40}, {40, 65}, false, false},        // batch @ shared matrix (folded into M)
      {{3, 40, 50}, {65, 40}, true, true},          // both transposed, shared B
      {{2, 1, 30, 17}, {3, 17, 20}, false, false},  // broadcast batch
      {{2, 4, 1, 64}, {2, 4, 9, 64}, false, true},  // decode attention scores: M = 1, transposed B
      {{2, 4, 1, 9}, {2, 4, 9, 64}, false, false},  // decode attention @ V
      {{300, 200}, {200, 130}, false, false},
      {{3, 2, 64, 32}, {3, 2, 64, 32}, false, true},   // attention scores Q @ K^T
      {{3, 2, 64, 64}, {3, 2, 64, 32}, false, false},  // attention P @ V (B read in place)
      {{3, 2, 64, 64}, {3, 2, 64, 32}, true, false},   // its gradient P^T @ dO
      {{12, 64, 128}, {200, 128}, false, true},        // dX = dY @ W^T: row blocks share the packed B
      {{1, 1, 70}, {65, 70}, false, true},             // decode head x @ wte^T
      {{8, 1, 128}, {128, 300}, false, false},         // batch-8 decode: small-M blocks of 4 rows
      {{7, 128}, {65, 128}, false, true},              // and its head, B transposed
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<float> want = run_op(cases[i], i + 1, 1, std::nullopt);
    for (int threads : {2, 3})
      EXPECT_TRUE(run_op(cases[i], i + 1, threads, std::nullopt) == want) << "case " << i << " threads " << threads;
    for (cpu::MatmulIsa isa : supported_isas())
      EXPECT_TRUE(run_op(cases[i], i + 1, 2, isa) == want) << "case " << i << " isa " << cpu::matmul_isa_name(isa);
  }
}

TEST(CpuMatmul, UnalignedOperandsThroughTheOpKernel) {
  // Views one float into their buffers, as slices of a larger arena would be.
  const MatmulCase c{{37, 45}, {45, 29}, false, false};
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  n.type = {DType::f32, {37, 29}};
  std::vector<float> a = normal(1 + 37 * 45, 5), b = normal(1 + 45 * 29, 6), out(1 + 37 * 29, 0.0f);
  TensorRef in[2] = {{reinterpret_cast<std::byte*>(a.data() + 1), {DType::f32, c.a}},
                     {reinterpret_cast<std::byte*>(b.data() + 1), {DType::f32, c.b}}};
  TensorRef o{reinterpret_cast<std::byte*>(out.data() + 1), n.type};
  ASSERT_OK(cpu::matmul(cpu::KernelArgs{n, in, o, {}}));
  const std::vector<float> want = fma_chain({a.data() + 1, 45, 1}, {b.data() + 1, 29, 1}, 37, 29, 45);
  EXPECT_EQ(std::memcmp(out.data() + 1, want.data(), want.size() * sizeof(float)), 0);
  EXPECT_EQ(out[0], 0.0f);  // nothing written before the output
}

TEST(CpuMatmul, EmptyKGivesZeros) {
  const Problem p(5, 7, 0, false, false);
  std::vector<float> c(35, 3.0f);
  cpu::gemm(cpu::matmul_best_isa(), cpu::matmul_default_blocking(cpu::matmul_best_isa()), p.A(), p.B(), c.data(), 7, 5, 7, 0);
  for (float x : c) EXPECT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace volta
