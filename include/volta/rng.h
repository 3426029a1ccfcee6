// Counter-based RNG (Philox 4x32-10): the value at (seed, stream, index) depends on nothing
// else, so random fills are identical for any thread count or fill order.
#pragma once

#include <array>
#include <cstdint>

#include "volta/tensor.h"

namespace volta {

std::array<uint32_t, 4> philox4x32(uint64_t seed, uint64_t stream, uint64_t index);

// Uniform in [0, 1) from the first word of philox4x32(seed, stream, index).
float uniform01(uint64_t seed, uint64_t stream, uint64_t index);
// Standard normal (Box-Muller on two words of the same counter).
float standard_normal(uint64_t seed, uint64_t stream, uint64_t index);

// A stream id derived from a name, so each parameter gets its own stream regardless of order.
uint64_t stream_for(std::string_view name);

void fill_uniform(Tensor& t, uint64_t seed, uint64_t stream, float low, float high);
void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, float mean, float std);
// Integers uniform in [low, high).
void fill_uniform_int(Tensor& t, uint64_t seed, uint64_t stream, int64_t low, int64_t high);

}  // namespace volta
