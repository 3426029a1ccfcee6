// What the CUDA backend can run. Plain host code, built with or without the toolkit, so
// planning checks (does TinyLM need an op without a kernel?) are testable on any machine.
#pragma once

#include "volta/backend.h"

namespace volta::cuda {

// Ops with a CUDA kernel (src/backends/cuda/*.cu); planning refuses every other op by name.
Capabilities capabilities();
// The kernel of node n (Backend::kernel_info). Every kernel is strict: it reduces in a fixed
// order (no atomics, launch shapes fixed by the problem's shape, never by the device), so runs
// give identical bytes.
KernelInfo kernel_info(const ir::Node& n);

// Workspace bytes the CUDA kernel of `n` needs (Backend::workspace_bytes): planning, and so the
// planned device peak, is computable without a device.
size_t workspace_bytes(const ir::Graph& g, const ir::Node& n);

}  // namespace volta::cuda
