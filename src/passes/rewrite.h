// Shared by the passes: rebuild a graph after dropping or merging nodes.
#pragma once

#include <vector>

#include "volta/ir.h"

namespace volta::passes {

// `replace[i]` is the id that stands for node i afterwards: i itself to keep it, another
// node's id to merge it into that node, or -1 to drop it (nothing may still read it).
// Kept nodes stay in their order and are renumbered 0..n-1.
Result<ir::Graph> rebuild(const ir::Graph& g, const std::vector<int32_t>& replace);

// How many times each node is read by the nodes the outputs depend on (a graph output counts as
// a read). Autograd leaves dead gradients of constants behind until dead-code elimination runs,
// so a fusion asks about live readers only.
Result<std::vector<int>> live_readers(const ir::Graph& g);

}  // namespace volta::passes
