// The tiny TinyLM configs the generation and batch-invariance tests share.
#pragma once

#include "model/tinylm.h"

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

}  // namespace volta::test
