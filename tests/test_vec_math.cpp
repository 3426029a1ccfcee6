// The CPU's vector math for the unary ops (cpu::vector_unary, vec_math.h) against the ops'
// definition, libm in double rounded once to f32 (ir/scalar_math.h): the largest error in ulp
// over every 4099th f32 bit pattern (both signs, every binade) and a dense sweep of [-20, 20],
// within each op's stated bound; zeros (with their sign), infinities and nan exactly; and the
// special values named one by one. VOLTA_VEC_MATH_STRIDE=1 sweeps all 2^32 patterns instead.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "ir/scalar_math.h"

namespace volta {
namespace {

using ir::Op;

// Distance in representable floats between two finite values (+0 and -0 are one point).
int64_t ulps(float a, float b) {
  auto key = [](float f) {
    const auto i = std::bit_cast<int32_t>(f);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}

template <Op op>
float reference(float x) {
  return static_cast<float>(ir::scalar_unary<op>(static_cast<double>(x)));
}

struct Sweep {
  int64_t worst = 0;
  float worst_x = 0;
  std::string first_bad;  // a special value that differs
};

// Runs the op's map over xs (in one call, as the kernels do) and scores every lane.
template <Op op>
void score(const std::vector<float>& xs, Sweep* s) {
  const cpu::UnaryMap f = cpu::vector_unary(op);
  ASSERT_NE(f, nullptr);
  std::vector<float> got(xs.size());
  f(xs.data(), got.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = reference<op>(xs[i]), g = got[i];
    const bool special = std::isnan(want) || std::isinf(want) || want == 0.0f;
    if (special || std::isnan(g) || std::isinf(g)) {
      const bool same = std::isnan(want) ? std::isnan(g) : std::bit_cast<uint32_t>(want) == std::bit_cast<uint32_t>(g);
      if (!same && s->first_bad.empty())
        s->first_bad = "x = " + std::to_string(xs[i]) + " (bits " + std::to_string(std::bit_cast<uint32_t>(xs[i])) +
                       "): got " + std::to_string(g) + ", want " + std::to_string(want);
      continue;
    }
    const int64_t d = ulps(g, want);
    if (d > s->worst) s->worst = d, s->worst_x = xs[i];
  }
}

std::vector<float> special_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), FLT_MIN, -FLT_MIN,
                          FLT_TRUE_MIN, -FLT_TRUE_MIN, FLT_MAX, -FLT_MAX, 1.0f, -1.0f, 0.5f, 2.0f, 4.0f, -4.0f};
  // Around the thresholds of the implementations and of f32's range: exp's overflow (88.72) and
  // subnormal results (-87.34 to -103.97), the silu tail (-80), tanh's and erf's range switches (1)
  // and erf's rounding to 1 (about 3.92).
  for (float c : {88.7228394f, -87.3365479f, -103.972077f, -103.278931f, -80.0f, 1.0f, 3.9192059f, 9.01f, 89.0f,
                  -104.0f, 0x1p-126f, 1.41421356f, 0.70710678f}) {
    float lo = c, hi = c;
    for (int k = 0; k < 16; ++k) {
      lo = std::nextafter(lo, -inf);
      hi = std::nextafter(hi, inf);
      v.insert(v.end(), {lo, hi, -lo, -hi});
    }
    v.insert(v.end(), {c, -c});
  }
  return v;
}

template <Op op>
void check(int64_t bound) {
  const char* env = std::getenv("VOLTA_VEC_MATH_STRIDE");
  const uint64_t stride = env ? std::max<uint64_t>(1, std::strtoull(env, nullptr, 10)) : 4099;
  Sweep s;
  std::vector<float> xs;
  const size_t batch = 1 << 16;
  auto flush = [&] {
    score<op>(xs, &s);
    xs.clear();
  };
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += stride) {
    xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
    if (xs.size() == batch) flush();
  }
  for (int i = 0; i <= 1'000'000; ++i) xs.push_back(-20.0f + 40.0f * static_cast<float>(i) / 1e6f);
  for (float x : special_values()) xs.push_back(x);
  // Odd lengths: the maps' partial last vector.
  flush();
  for (size_t n : {1, 7, 15, 17, 33}) {
    xs.assign(n, 0.3f);
    flush();
  }
  EXPECT_EQ(s.first_bad, "") << ir::op_name(op);
  EXPECT_LE(s.worst, bound) << ir::op_name(op) << " at x = " << s.worst_x;
  std::printf("%-8s max error %lld ulp (at %.9g)\n", std::string(ir::op_name(op)).c_str(),
              static_cast<long long>(s.worst), static_cast<double>(s.worst_x));
}

TEST(VecMath, ExpWithinOneUlp) { check<Op::Exp>(1); }
TEST(VecMath, LogWithinOneUlp) { check<Op::Log>(1); }
TEST(VecMath, TanhWithinOneUlp) { check<Op::Tanh>(1); }
TEST(VecMath, SigmoidWithinTwoUlp) { check<Op::Sigmoid>(2); }
TEST(VecMath, SiluWithinThreeUlp) { check<Op::Silu>(3); }
TEST(VecMath, ErfWithinOneUlp) { check<Op::Erf>(1); }
TEST(VecMath, SqrtNegAbsExact) {
  check<Op::Sqrt>(0);
  check<Op::Neg>(0);
  check<Op::Abs>(0);
}

TEST(VecMath, OnlyTheOpsWithVectorMath) {
  EXPECT_EQ(cpu::vector_unary(Op::Relu), nullptr);
  EXPECT_EQ(cpu::vector_unary(Op::Sign), nullptr);
  EXPECT_EQ(cpu::vector_unary(Op::Add), nullptr);
}

}  // namespace
}  // namespace volta
