// What the CUDA backend can run. Plain host code, built with or without the toolkit, so
// planning checks (does TinyLM need an op without a kernel?) are testable on any machine.
#pragma once

#include "volta/backend.h"

namespace volta::cuda {

// Ops with a CUDA kernel (src/backends/cuda/*.cu); planning refuses every other op by name.
// Determinism is Bitwise: every kernel reduces in a fixed order (no atomics, fixed block
// sizes independent of the device), so two runs on the same GPU give identical bytes.
Capabilities capabilities();

}  // namespace volta::cuda
