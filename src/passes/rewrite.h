// Shared by the passes: rebuild a graph after dropping or merging nodes.
#pragma once

#include <string>
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
struct Readers {
  std::vector<int> count;  // by node id
  // A fusion may fold node `id` into its reader only when that reader is its one reader.
  bool one(int32_t id) const { return count[static_cast<size_t>(id)] == 1; }
};
Result<Readers> live_readers(const ir::Graph& g);

// Appends `n` to g as a new node named `base` (or base_1, base_2, ... when taken); its id.
int32_t append_node(ir::Graph& g, ir::Node n, const std::string& base);

// Turns node `id` into reshape(slice(src, start, end)) along the first axis, keeping its type
// (those rows' elements, in any shape): a view of part of a result that holds several
// (norm_param_grad's rows, gelu_and_grad's planes, attention's output and stored probabilities).
// The slice is named after node `id` with `suffix`.
void take_rows(ir::Graph& g, int32_t id, int32_t src, int64_t start, int64_t end, const char* suffix = "/part");
inline void take_plane(ir::Graph& g, int32_t id, int32_t stacked, int64_t p) {
  take_rows(g, id, stacked, p, p + 1, "/plane");
}

// If q, k and v are the head splits (transpose(reshape(.., [.., T, H, D]))) of the first, second
// and third column thirds of one value x [.., T, 3 H D] (a packed projection), x; else -1
// (fuse_attention_heads.cpp).
int32_t packed_projection(const ir::Graph& g, int32_t q, int32_t k, int32_t v);

// The node's `axis` attribute (default -1) names its last axis.
bool last_axis(const ir::Node& n);
// `axis` (may be negative) of a node whose value has rank `rank`, as a non-negative index.
inline int64_t axis_index(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

}  // namespace volta::passes
