// ExecutionPlan: a deterministic schedule plus a memory plan that places every computed value
// and kernel workspace in one arena, reusing bytes once a value is dead.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "volta/determinism.h"
#include "volta/ir.h"

namespace volta::plan {

enum class MemClass : uint8_t { Input, Param, Constant, Activation, Temp, Output, Grad, OptState, KvCache, kCount };
const char* mem_class_name(MemClass c);
constexpr size_t kNumMemClasses = static_cast<size_t>(MemClass::kCount);

// One planned buffer: a value (node id) or a kernel workspace (node = owning step's node).
struct Buffer {
  int32_t node = -1;
  MemClass cls = MemClass::Activation;
  size_t bytes = 0;
  int32_t first_step = 0;  // step that writes it (leaves: 0)
  int32_t last_step = 0;   // last step that reads it (outputs: the final step)
  bool in_arena = false;   // leaves are bound by the caller, not placed in the arena
  size_t offset = 0;       // arena offset, kAlignment-aligned, when in_arena
  // A view (a reshape, a transpose that only moves size-1 dims, a slice of one contiguous
  // block) is bytes of its input under another type: it points `view_offset` bytes into the
  // root value `view_of` (never itself a view), has no bytes of its own and is not executed.
  int32_t view_of = -1;
  size_t view_offset = 0;
};

// The byte offset into its input at which node `n` is a view of it, or nullopt when n computes
// new bytes (see Buffer::view_of).
std::optional<size_t> view_offset(const ir::Graph& g, const ir::Node& n);

// Where a plan's bytes live on a device backend (one whose memory is not host memory) and what
// crosses between host and device: inputs every run, params and constants once (the runtime
// keeps them resident), outputs back every run; the arena holds everything else.
struct Placement {
  bool device = false;             // planned for a device backend
  size_t host_input_bytes = 0;     // inputs: copied host -> device every run
  size_t device_param_bytes = 0;   // params and constants: uploaded once, kept resident
  size_t device_temp_bytes = 0;    // the arena: activations and workspaces
  size_t device_output_bytes = 0;  // outputs (in the arena or bound leaves): device -> host every run
};

struct MemoryReport {
  std::array<size_t, kNumMemClasses> peak{};   // max bytes of the class live at once
  std::array<size_t, kNumMemClasses> naive{};  // sum of all bytes of the class
  size_t arena_bytes = 0;      // size of the planned arena
  size_t external_bytes = 0;   // inputs + params + constants (bound by the caller)
  size_t peak_live_bytes = 0;  // max over steps of all bytes live (a lower bound)
  size_t thread_scratch_bytes = 0;  // per thread, the kernels' scratch beside the arena (the largest step's)
  size_t peak_bytes = 0;       // external_bytes + arena_bytes: what the plan really needs
  size_t naive_bytes = 0;      // every value and workspace in its own buffer
  Placement placement;
};

struct PlanOptions {
  size_t memory_budget_bytes = 0;  // 0 = unlimited; otherwise planning fails above it
  bool device = false;             // the backend's memory is not host memory (see Placement)
  // Class of each graph output by position (Output when absent), e.g. Grad for gradients.
  std::vector<MemClass> output_classes;
  // Bytes bound outside the graph that the plan must still account for and fit in the
  // budget, e.g. optimizer state.
  std::array<size_t, kNumMemClasses> extra_bound{};
};

// Workspace (temp) bytes a backend needs for one node.
using WorkspaceFn = std::function<size_t(const ir::Graph&, const ir::Node&)>;

struct ExecutionPlan {
  ir::Graph graph;                 // the verified, optimised graph this plan runs
  uint64_t graph_hash = 0;         // graph + pipeline
  std::string backend;             // the backend it was planned for
  Determinism determinism = Determinism::Strict;  // the level asked for; every kernel meets it
  std::vector<KernelInfo> kernels;  // the kernel of each node, indexed by node id (leaves: none)
  std::vector<int32_t> schedule;   // non-leaf node ids in execution order
  std::vector<Buffer> values;      // indexed by node id
  std::vector<Buffer> workspaces;  // indexed by step; bytes == 0 when none
  MemoryReport memory;
};

// Deterministic topological schedule of the non-leaf nodes.
Result<std::vector<int32_t>> make_schedule(const ir::Graph& g);
// Builds the plan for a verified graph. Fails with kOutOfMemory over the budget.
Result<ExecutionPlan> make_plan(ir::Graph g, uint64_t graph_hash, const std::string& backend,
                                const WorkspaceFn& workspace, const PlanOptions& opts);

// Each node after its inputs, each non-leaf node exactly once.
Status verify_schedule(const ir::Graph& g, const std::vector<int32_t>& schedule);
// No two buffers that are live at the same step share a byte; all inside the arena, aligned.
Status verify_allocation(const ExecutionPlan& p);

// By value id: whether the value's bytes stay as they are through a run of the plan
// (TensorRef::fixed): a leaf, or a view of one, that no step writes in place (a KV cache, a
// param an optimizer updates and a step counter are written).
std::vector<bool> fixed_values(const ExecutionPlan& p);

// Human-readable schedule + memory plan, and the same as JSON.
std::string format_plan(const ExecutionPlan& p);
std::string format_memory_report(const MemoryReport& m);
// "determinism strict; kernels: 12 cpu (strict), 2 reference (strict)": the level asked for and
// the schedule's kernels by variant and level, in order of first use.
std::string format_kernel_summary(const ExecutionPlan& p);
std::string plan_to_json(const ExecutionPlan& p, int indent = 2);

// Thread-safe cache of plans keyed by (graph hash, bound shapes, backend, flags).
struct PlanKey {
  uint64_t graph_hash = 0;
  std::string bound_shapes;  // "x=f32[8,4];w1=f32[4,16]"
  std::string backend;
  std::string flags;
  auto operator<=>(const PlanKey&) const = default;
};

class PlanCache {
 public:
  std::shared_ptr<const ExecutionPlan> find(const PlanKey& key);  // counts a hit or a miss
  void insert(const PlanKey& key, std::shared_ptr<const ExecutionPlan> plan);
  uint64_t hits() const;
  uint64_t misses() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<PlanKey, std::shared_ptr<const ExecutionPlan>> plans_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace volta::plan
