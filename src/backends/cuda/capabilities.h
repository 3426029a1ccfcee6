// What the CUDA backend can run. Plain host code, built with or without the toolkit, so
// planning checks (does TinyLM need an op without a kernel?) are testable on any machine.
#pragma once

#include "volta/backend.h"

namespace volta::cuda {

// Ops with a CUDA kernel (src/backends/cuda/*.cu); planning refuses every other op by name.
// Determinism is Bitwise: every kernel reduces in a fixed order (no atomics, fixed block
// sizes independent of the device), so two runs on the same GPU give identical bytes.
Capabilities capabilities();

// Workspace bytes the CUDA kernel of `n` needs (Backend::workspace_bytes): planning, and so the
// planned device peak, is computable without a device.
size_t workspace_bytes(const ir::Graph& g, const ir::Node& n);

}  // namespace volta::cuda
