// One node run on its own, on a backend or with the CPU reference kernels: what the op-test
// harness and the CUDA tests compare.
#pragma once

#include <memory>
#include <vector>

#include "volta/backend.h"
#include "volta/ir.h"

namespace volta::test {

// A node of `op` over inputs of these types, its type inferred (and attributes checked).
Result<ir::Node> make_node(ir::Op op, const std::vector<TensorType>& inputs, const ir::Attrs& attrs,
                           const std::string& name = "case");

// The node's inputs as graph leaves, then the node (it reads leaves 0..n-1).
ir::Graph node_graph(const ir::Node& node, const std::vector<TensorType>& inputs);

// A host backend that runs every op with its reference kernel (cpu::reference_kernel): the
// oracle every backend is compared with.
std::unique_ptr<Backend> make_reference_backend();

// Host tensors copied into memory of `be`: the views, and the blocks that keep them alive.
struct Uploaded {
  std::vector<std::shared_ptr<std::byte>> blocks;
  std::vector<TensorRef> refs;
};
Result<Uploaded> upload(Backend& be, const std::vector<Tensor>& in);

// Runs `node` on `be`: inputs copied in, its workspace allocated, then every input copied back
// (state-updating nodes write some in place) followed by the output.
// The kernel is the one the backend chooses at `level`.
Result<std::vector<Tensor>> run_in_place(Backend& be, const ir::Node& node, const std::vector<Tensor>& in,
                                         Determinism level = Determinism::Strict);
// The output alone.
Result<Tensor> run_node(Backend& be, const ir::Node& node, const std::vector<Tensor>& in,
                        Determinism level = Determinism::Strict);

}  // namespace volta::test
