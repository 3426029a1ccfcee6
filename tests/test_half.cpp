// bf16 and f16 weights: the conversions against independent references, and the CPU matmul with
// half weights against the f32 matmul on the widened weights, bit for bit, on every path (decode
// shapes, packed shapes, transposes, batches), every ISA and 1 and 2 threads.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/matmul.h"
#include "ir/packed_weight.h"
#include "test_util.h"
#include "volta/backend.h"
#include "volta/builder.h"
#include "volta/rng.h"

namespace volta {
namespace {

// The nearest of the two neighbours in double, ties to the even one: an oracle that shares no
// code with the bit tricks of f32_to_bf16 / f32_to_f16.
template <typename Widen>
uint16_t nearest(float x, uint16_t lo, uint16_t hi, Widen widen) {
  const double dl = std::fabs(static_cast<double>(x) - widen(lo)), dh = std::fabs(static_cast<double>(widen(hi)) - x);
  if (dl != dh) return dl < dh ? lo : hi;
  return (lo & 1) == 0 ? lo : hi;
}

std::vector<float> probe_values() {
  std::vector<float> v = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 70000.0f, 6.1035156e-05f, 5.9604645e-08f,
                          2.9802322e-08f, 2.98023259e-08f, 1e-10f, 3.0e38f, std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), 1.00390625f, 1.01171875f};
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 200000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const auto b = static_cast<uint32_t>(s >> 32);
    if ((b & 0x7f800000u) != 0x7f800000u) v.push_back(std::bit_cast<float>(b));  // finite
  }
  return v;
}

TEST(HalfDtypes, Bf16RoundsToNearestEvenAndWidensExactly) {
  for (float x : probe_values()) {
    const uint32_t b = std::bit_cast<uint32_t>(x);
    const auto lo = static_cast<uint16_t>(b >> 16);  // truncation toward zero
    const uint16_t got = f32_to_bf16(x);
    if ((lo & 0x7fffu) == 0x7f7fu && (b & 0xffffu) >= 0x8000u) {  // past the largest finite: infinity or it
      EXPECT_TRUE(got == lo || got == static_cast<uint16_t>((lo & 0x8000u) | 0x7f80u)) << x;
      continue;
    }
    EXPECT_EQ(got, nearest(x, lo, static_cast<uint16_t>(lo + 1), bf16_to_f32)) << x;
    EXPECT_EQ(std::bit_cast<uint32_t>(bf16_to_f32(got)) & 0xffffu, 0u);
  }
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80u);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));  // a NaN whose payload is all dropped bits
}

TEST(HalfDtypes, F16RoundTripsEveryValueAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) {
      EXPECT_TRUE(std::isnan(f));
      EXPECT_TRUE(f16_to_f32(f32_to_f16(f)) != f16_to_f32(f32_to_f16(f)));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
  for (float x : probe_values()) {
    const float ax = std::fabs(x);
    const uint16_t got = f32_to_f16(x);
    if (ax >= 65520.0f) {
      EXPECT_EQ(got & 0x7fffu, 0x7c00u) << x;
      continue;
    }
    // The largest f16 magnitude at or below |x|, found by search, and the next one up.
    uint16_t lo = 0;
    for (int bit = 14; bit >= 0; --bit) {
      const auto t = static_cast<uint16_t>(lo | (1u << bit));
      if (f16_to_f32(t) <= ax) lo = t;
    }
    const uint16_t sign = std::signbit(x) ? 0x8000u : 0u;
    const uint16_t want = nearest(ax, lo, static_cast<uint16_t>(lo + 1), f16_to_f32);
    EXPECT_EQ(got, static_cast<uint16_t>(sign | want)) << x;
  }
}

TEST(HalfDtypes, EveryIsaWidensEveryBitPatternAsTheScalarCode) {
  std::vector<uint16_t> all(0x10000);
  for (uint32_t h = 0; h < 0x10000u; ++h) all[h] = static_cast<uint16_t>(h);
  for (cpu::MatmulIsa isa : {cpu::MatmulIsa::kScalar, cpu::MatmulIsa::kAvx2, cpu::MatmulIsa::kAvx512}) {
    if (!cpu::matmul_isa_supported(isa)) continue;
    for (bool bf : {true, false}) {
      std::vector<float> got(all.size() + 3);
      cpu::widen_half(isa, bf, all.data() + 3, got.data(), static_cast<int64_t>(all.size()) - 3);  // unaligned, a tail
      for (size_t i = 3; i < all.size(); ++i) {
        const float want = bf ? bf16_to_f32(all[i]) : f16_to_f32(all[i]);
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i - 3]), std::bit_cast<uint32_t>(want)) << cpu::matmul_isa_name(isa) << (bf ? " bf16 " : " f16 ") << i;
      }
    }
  }
}

struct Case {
  Shape a, b;
  bool ta, tb;
};

// The CPU matmul with half weights against the CPU matmul on the widened weights (bitwise) and
// the reference kernel with half weights (bitwise against its own f32 run on the widened values).
void check(const Case& c, DType half) {
  ir::Node n;
  n.op = ir::Op::Matmul;
  n.name = "mm";
  if (c.ta) n.attrs.set("transpose_a", int64_t{1});
  if (c.tb) n.attrs.set("transpose_b", int64_t{1});
  Tensor a = Tensor::zeros(DType::f32, c.a), b32 = Tensor::zeros(DType::f32, c.b);
  fill_normal(a, 7, 1, 0.0f, 1.0f);
  fill_normal(b32, 7, 2, 0.0f, 1.0f);
  const Tensor bh = narrow_to(b32, half), wide = widen_to_f32(bh);
  auto type = ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{a.type(), bh.type()}, n.attrs);
  ASSERT_OK(type);
  n.type = *type;
  ir::Graph g;
  g.nodes = {ir::Node{0, "a", ir::Op::Input, {}, {}, a.type(), {}}, ir::Node{1, "b", ir::Op::Input, {}, {}, bh.type(), {}}};
  n.id = 2;
  n.inputs = {0, 1};
  auto run = [&](const Tensor& b) {
    g.nodes[1].type = b.type();
    std::vector<std::byte> ws(cpu::matmul_workspace_bytes(g, n));
    Tensor out = Tensor::zeros(DType::f32, n.type.shape);
    TensorRef in[2] = {{const_cast<std::byte*>(a.raw()), a.type()}, {const_cast<std::byte*>(b.raw()), b.type()}};
    TensorRef o{out.raw(), out.type()};
    const Status st = cpu::matmul(cpu::KernelArgs{n, in, o, ws});
    EXPECT_TRUE(st.is_ok()) << st.message();
    return out;
  };
  const std::string what = shape_to_string(c.a) + " @ " + dtype_name(half) + shape_to_string(c.b) +
                           " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb);
  EXPECT_TRUE(run(bh).bitwise_equal(run(wide))) << what;
  auto ref_half = cpu::evaluate_reference(n, std::vector<Tensor>{a, bh});
  auto ref_wide = cpu::evaluate_reference(n, std::vector<Tensor>{a, wide});
  ASSERT_OK(ref_half);
  ASSERT_OK(ref_wide);
  EXPECT_TRUE(ref_half->bitwise_equal(*ref_wide)) << what;
}

TEST(HalfWeights, CpuMatmulHasTheBitsOfTheF32KernelOnTheWidenedWeights) {
  std::vector<cpu::MatmulIsa> isas;
  for (cpu::MatmulIsa isa : {cpu::MatmulIsa::kScalar, cpu::MatmulIsa::kAvx2, cpu::MatmulIsa::kAvx512})
    if (cpu::matmul_isa_supported(isa)) isas.push_back(isa);
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    for (cpu::MatmulIsa isa : isas) {
      cpu::set_matmul_isa_override(isa);
      for (DType half : {DType::bf16, DType::f16}) {
        for (int64_t m : {1, 2, 3, 5, 8, 9, 16, 17, 40})  // decode shapes up to 16 rows, the packed path past them
          for (int64_t nn : {1, 17, 65, 128, 200})
            for (int64_t k : {1, 16, 67}) check({{m, k}, {k, nn}, false, false}, half);
        check({{3, 4, 32}, {32, 130}, false, false}, half);      // rows of a batch: one decode product
        check({{2, 3, 32}, {2, 32, 20}, false, false}, half);    // a batch of weights
        check({{5, 24}, {33, 24}, false, true}, half);           // x @ w^T
        check({{24, 70}, {24, 9}, true, false}, half);           // a^T @ w
      }
    }
  }
  cpu::set_matmul_isa_override(std::nullopt);
  set_cpu_threads(0);
}

// A half weight stored packed (b_packed [kc, nr]): the CPU matmul reads it in place (decode
// rows, over several K blocks; wide tiles, half-width ones and single panels) or widens it in
// its layout (more rows), with the bits of the same weight unpacked; so does the reference. Every
// ISA (a layout made for another ISA's panels is unpacked first), 1 and 2 threads.
TEST(HalfWeights, PackedHalfWeightsHaveTheBitsOfThePlainOnes) {
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    for (cpu::MatmulIsa isa : {cpu::MatmulIsa::kScalar, cpu::MatmulIsa::kAvx2, cpu::MatmulIsa::kAvx512}) {
      if (!cpu::matmul_isa_supported(isa)) continue;
      cpu::set_matmul_isa_override(isa);
      for (DType half : {DType::bf16, DType::f16})
        for (int64_t nr : {int64_t{16}, int64_t{32}})
          for (int64_t kc : {int64_t{7}, int64_t{64}})
            for (int64_t m : {1, 2, 3, 8, 12, 16, 17})  // batched decode's row groups: 3, 4 + 4, 6 + 6, 6 + 5 + 5
              for (int64_t panels : {1, 2, 3, 4, 9}) {
                const int64_t K = 70, N = panels * nr;
                Tensor a = Tensor::zeros(DType::f32, {m, K}), b32 = Tensor::zeros(DType::f32, {K, N});
                fill_normal(a, 3, 1, 0.0f, 1.0f);
                fill_normal(b32, 3, 2, 0.0f, 1.0f);
                const Tensor plain = narrow_to(b32, half);
                Tensor packed = Tensor::empty(half, {K, N});
                ir::repack_weight(plain.data<uint16_t>(), packed.data<uint16_t>(), K, N, kc, nr, true);
                ir::Node n;
                n.op = ir::Op::Matmul, n.name = "mm", n.id = 2, n.inputs = {0, 1};
                n.type = {DType::f32, {m, N}};
                ir::Graph g;
                g.nodes = {ir::Node{0, "a", ir::Op::Input, {}, {}, a.type(), {}}, ir::Node{1, "b", ir::Op::Input, {}, {}, plain.type(), {}}};
                auto run = [&](const Tensor& b, bool is_packed) {
                  ir::Node node = n;
                  if (is_packed) node.attrs.set("b_packed", std::vector<int64_t>{kc, nr});
                  std::vector<std::byte> ws(cpu::matmul_workspace_bytes(g, node));
                  Tensor out = Tensor::zeros(DType::f32, n.type.shape);
                  TensorRef in[2] = {{const_cast<std::byte*>(a.raw()), a.type()}, {const_cast<std::byte*>(b.raw()), b.type()}};
                  TensorRef o{out.raw(), out.type()};
                  const Status st = cpu::matmul(cpu::KernelArgs{node, in, o, ws});
                  EXPECT_TRUE(st.is_ok()) << st.message();
                  auto ref = cpu::evaluate_reference(node, std::vector<Tensor>{a, b});
                  EXPECT_TRUE(ref.is_ok());
                  return std::pair{out, ref.is_ok() ? *ref : Tensor()};
                };
                const auto [want, want_ref] = run(plain, false);
                const auto [got, got_ref] = run(packed, true);
                const std::string what = std::string(cpu::matmul_isa_name(isa)) + " " + dtype_name(half) + " " + std::to_string(m) +
                                         "x" + std::to_string(N) + "x" + std::to_string(K) + " kc " + std::to_string(kc) +
                                         " nr " + std::to_string(nr) + " threads " + std::to_string(threads);
                EXPECT_TRUE(got.bitwise_equal(want)) << what;
                EXPECT_TRUE(got_ref.bitwise_equal(want_ref)) << what;
              }
    }
  }
  cpu::set_matmul_isa_override(std::nullopt);
  set_cpu_threads(0);
}

// An empty sum (K = 0) on a packed weight, f32 or half, at decode rows: the output is zeros,
// whatever the buffer held before (the decode path once left a half weight's output as it was).
TEST(HalfWeights, AnEmptySumOnAPackedWeightWritesZeros) {
  const int64_t nr = cpu::matmul_tile(cpu::matmul_best_isa()).cols, N = 2 * nr;
  for (int threads : {1, 2}) {
    set_cpu_threads(threads);
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      for (int64_t m : {1, 3}) {
        const Tensor a = Tensor::zeros(DType::f32, {m, 0}), b = Tensor::zeros(dtype, {0, N});
        ir::Node n;
        n.op = ir::Op::Matmul, n.name = "mm", n.id = 2, n.inputs = {0, 1};
        n.type = {DType::f32, {m, N}};
        n.attrs.set("b_packed", std::vector<int64_t>{64, nr});
        const std::vector<float> sevens(static_cast<size_t>(m * N), 7.0f);
        Tensor out = Tensor::from_f32({m, N}, sevens);
        TensorRef in[2] = {{const_cast<std::byte*>(a.raw()), a.type()}, {const_cast<std::byte*>(b.raw()), b.type()}};
        TensorRef o{out.raw(), out.type()};
        const Status st = cpu::matmul(cpu::KernelArgs{n, in, o, {}});
        ASSERT_TRUE(st.is_ok()) << st.message();
        EXPECT_TRUE(out.bitwise_equal(Tensor::zeros(DType::f32, {m, N}))) << dtype_name(dtype) << " m " << m << " threads " << threads;
      }
  }
  set_cpu_threads(0);
}

TEST(HalfWeights, OnlyAMatmulsRightOperandMayBeHalfAndHalfParamsAreFrozen) {
  const TensorType h{DType::bf16, {4, 4}}, f{DType::f32, {4, 4}};
  ir::Attrs none;
  ASSERT_OK(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{f, h}, none));
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Matmul, std::vector<TensorType>{h, f}, none),
                        "input 0 is bf16[4,4]: bf16 and f16 values are weights, read only as a matmul's right operand or a cast");
  ir::Attrs to_f32;
  to_f32.set("to", std::string("f32"));
  ASSERT_OK(ir::infer_type(ir::Op::Cast, std::vector<TensorType>{h}, to_f32));
  EXPECT_ERROR_CONTAINS(ir::infer_type(ir::Op::Add, std::vector<TensorType>{f, TensorType{DType::f16, {4, 4}}}, none),
                        "input 1 is f16[4,4]");
  // Half params are frozen weights: a trainable one is refused, a frozen one builds.
  for (bool trainable : {true, false}) {
    ModelBuilder b;
    Value x = b.input("x", f);
    ParamInit init;
    init.trainable = trainable;
    b.output(b.matmul(x, b.param("w", h, init), "y"));
    auto g = b.build();
    if (trainable) EXPECT_ERROR_CONTAINS(g, "[param] trainable params must be f32, got bf16[4,4] (node 'w')");
    else ASSERT_OK(g);
  }
}

}  // namespace
}  // namespace volta
