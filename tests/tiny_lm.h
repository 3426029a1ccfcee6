// The tiny TinyLM configs the generation and batch-invariance tests share.
#pragma once

#include <gtest/gtest.h>

#include "model/tinylm.h"
#include "volta/runtime.h"

namespace volta::test {

// vocab 11, context 8, 2 layers, 2 heads, 16 channels, no biases.
inline model::TinyLMConfig tiny_gpt() { return {11, 8, 2, 2, 16, false}; }

// The llama variant: 4 query heads over 2 key/value heads, rope, SwiGLU.
inline model::TinyLMConfig tiny_llama() {
  model::TinyLMConfig c{11, 8, 2, 4, 16, false};
  c.arch = model::Arch::Llama;
  c.kv_heads = 2;
  c.ffn = 24;
  return c;
}

// Seeded params of `c`, its matrices scaled up so the logits are far from uniform.
inline Bindings tiny_params(const model::TinyLMConfig& c) {
  auto g = model::build_tinylm_loss(c, 1, c.context);
  EXPECT_TRUE(g.is_ok());
  auto p = init_params(*g, 5);
  for (auto& [name, t] : *p)
    if (t.shape().size() == 2)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= 25.0f;
  return *p;
}

}  // namespace volta::test
