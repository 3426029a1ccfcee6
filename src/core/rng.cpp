#include "volta/rng.h"

#include <cmath>

namespace volta {

// Philox 4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t stream, uint64_t index) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

namespace {
// 24 random bits -> a float in [0, 1), exactly representable.
float to_unit(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
}  // namespace

float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  return to_unit(philox4x32(seed, stream, index)[0]);
}

float standard_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  auto r = philox4x32(seed, stream, index);
  double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967296.0;  // (0, 1]: log is finite
  double u2 = static_cast<double>(r[1]) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

uint64_t stream_for(std::string_view name) { return fnv1a64(name); }

void fill_uniform(Tensor& t, uint64_t seed, uint64_t stream, float low, float high) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = low + (high - low) * uniform01(seed, stream, static_cast<uint64_t>(i));
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, float mean, float std) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = mean + std * standard_normal(seed, stream, static_cast<uint64_t>(i));
}

void fill_uniform_int(Tensor& t, uint64_t seed, uint64_t stream, int64_t low, int64_t high) {
  uint64_t range = static_cast<uint64_t>(high - low);
  for (int64_t i = 0; i < t.numel(); ++i) {
    auto r = philox4x32(seed, stream, static_cast<uint64_t>(i));
    uint64_t bits = (static_cast<uint64_t>(r[0]) << 32) | r[1];
    int64_t v = low + static_cast<int64_t>(range ? bits % range : 0);
    if (t.dtype() == DType::i32) t.data<int32_t>()[i] = static_cast<int32_t>(v);
    else t.data<int64_t>()[i] = v;
  }
}

}  // namespace volta
