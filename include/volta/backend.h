// The backend interface: a device that executes one node at a time on memory it owns.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "volta/determinism.h"
#include "volta/ir.h"

namespace volta {

// A typed view of memory owned elsewhere (a bound tensor or an arena slice).
struct TensorRef {
  std::byte* data = nullptr;
  TensorType type;
  // A step's input whose bytes stay as they are for the whole run: a bound leaf (an input, param
  // or constant) that no step of the plan writes in place. A kernel walked on several threads
  // at once may read such a value outside its tasks without waiting for the others.
  bool fixed = false;
  template <typename T> T* as() const { return reinterpret_cast<T*>(data); }
  int64_t numel() const { return type.numel(); }
  const Shape& shape() const { return type.shape; }
};

struct Capabilities {
  std::vector<ir::Op> ops;  // ops with a kernel
  // Op variants beyond the op list that passes may write, e.g. "matmul.epilogue" (a bias input
  // and an activation on matmul).
  std::vector<std::string> features;
  std::vector<DType> dtypes;  // the dtypes its kernels take and give; planning refuses others
  bool supports(ir::Op op) const;
  bool has(std::string_view feature) const;
};

enum class DeviceKind { Cpu, Cuda, Auto };
Result<DeviceKind> parse_device(std::string_view s);  // "cpu" | "cuda" | "auto"
const char* device_name(DeviceKind d);

// How a walk of a plan's steps (Backend::walk) may run a node's kernel when the backend walks
// with several threads at once.
enum class StepRole : uint8_t {
  Forks,   // it forks its own threads: a plan with such a step is walked by one thread
  Solo,    // it uses one thread anyway: one thread of the walk runs it
  Shared,  // every thread of the walk runs it, each taking its own share of its work
};

// A plan's launches as a device backend recorded them (CUDA graphs), replayed as one.
class Recording {
 public:
  virtual ~Recording() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const Capabilities& capabilities() const = 0;
  // True when kernels read and write host memory directly (the CPU). For a device backend the
  // runtime uploads inputs every run and params and constants once (kept resident), and copies
  // outputs back (plan::Placement).
  virtual bool host_memory() const { return true; }

  // Memory in this backend's address space, kAlignment-aligned.
  virtual Result<std::shared_ptr<std::byte>> allocate(size_t bytes) = 0;
  virtual Status copy_in(std::byte* dst, const std::byte* host_src, size_t bytes) = 0;
  virtual Status copy_out(std::byte* host_dst, const std::byte* src, size_t bytes) = 0;

  // The kernel for `node` (an op the backend supports): the fastest one that meets `level`, or
  // the backend's default kernel when none does (planning then refuses it, naming its level).
  virtual KernelInfo kernel_info(const ir::Graph& g, const ir::Node& node, Determinism level) const = 0;
  // The layout [kc, nr] (ir/packed_weight.h) this backend's GEMM reads a constant weight of an
  // M x N x K product in without packing it, or none: the pack_matmul_weights pass asks.
  virtual std::optional<std::array<int64_t, 2>> matmul_weight_packing(int64_t /*M*/, int64_t /*N*/, int64_t /*K*/) const {
    return std::nullopt;
  }
  // A form of a supported op this backend's kernel does not take (a dtype, an attribute, an
  // input): planning refuses it (kUnimplemented, naming the node) instead of failing at run time.
  virtual Status check_node(const ir::Graph& /*g*/, const ir::Node& /*node*/) const { return Status::ok(); }
  // Workspace bytes `node` needs beyond its inputs and output.
  virtual size_t workspace_bytes(const ir::Graph& g, const ir::Node& node) const = 0;
  // Bytes a kernel of the node keeps per thread outside the plan's arena (thread-local scratch
  // reused from step to step), and the threads that may each hold such scratch: counted against
  // the memory limit beside the plan (Runtime::check_memory).
  virtual size_t thread_scratch_bytes(const ir::Graph& /*g*/, const ir::Node& /*node*/) const { return 0; }
  virtual int scratch_threads() const { return 1; }
  // Runs one node with `kernel`, which kernel_info chose for it. Shapes were verified before
  // planning; data-dependent problems (an embedding id out of range) come back as errors naming
  // the node.
  virtual Status execute(const ir::Node& node, std::span<const TensorRef> inputs, const TensorRef& output,
                         std::span<std::byte> workspace, const KernelInfo& kernel) = 0;
  // The role of `node`'s kernel in a walk (below), decided when the plan is made.
  virtual StepRole step_role(const ir::Node& /*node*/, const KernelInfo& /*kernel*/) const { return StepRole::Forks; }
  // Runs step(0), step(1), ... step(roles.size() - 1) in order (each executes one node), stopping
  // at the first error, which it returns. A backend with threads of its own may have all of them
  // walk the steps at once, each running the Shared steps and one the Solo ones (cpu/parallel.h's
  // team); the default runs each step once on the calling thread.
  virtual Status walk(std::span<const StepRole> roles, const std::function<Status(size_t)>& step) {
    for (size_t i = 0; i < roles.size(); ++i) VOLTA_RETURN_IF_ERROR(step(i));
    return Status::ok();
  }
  // Waits for the work execute() queued (device backends run asynchronously). The profiler calls
  // it after every node so each op's time is the device's, not its launch's.
  virtual Status synchronize() { return Status::ok(); }

  // Device backends that can record the work execute() queues and replay it in one launch: the
  // runtime records a plan the second time it runs over the same buffers, then replays it
  // instead of executing node by node (a decode step, a training step). Between begin and end
  // execute() only queues (nothing runs); a replay runs exactly the recorded launches, so it
  // computes the same bits. A failed recording leaves the backend as before begin.
  virtual bool can_record() const { return false; }
  virtual Status begin_recording() { return unimplemented(name() + " cannot record launches"); }
  virtual Result<std::unique_ptr<Recording>> end_recording() { return unimplemented(name() + " cannot record launches"); }
  virtual Status replay(const Recording& /*r*/) { return unimplemented(name() + " cannot replay launches"); }
};

std::unique_ptr<Backend> make_cpu_backend();
// Threads of the CPU backend (n <= 0: one per hardware thread). Results are bitwise the same for
// every thread count.
void set_cpu_threads(int n);
int cpu_threads();
// Starts the CPU backend's threads now. When the system refuses one: an error naming the count
// if `asked` (--threads given), else the backend runs on the threads it has.
Status start_cpu_threads(bool asked);
// Whether the CPU backend walks a plan whose kernels allow it on all its threads at once
// (Backend::walk; on by default): off, every plan runs step by step, forking per kernel call.
// Only the speed differs (`bench infer --compare-teams` times both).
void set_cpu_teams(bool on);
bool cpu_teams();
// Fails with kUnavailable when Volta was built without CUDA or no device is present.
Result<std::unique_ptr<Backend>> make_cuda_backend();
// Picks the backend: explicit kinds never fall back; Auto takes CUDA only when a device is
// present and supports every op of `g`.
Result<std::unique_ptr<Backend>> select_backend(DeviceKind kind, const ir::Graph* g = nullptr);
// Reads VOLTA_DEVICE when `flag` is empty; defaults to cpu.
Result<DeviceKind> device_from_flag_or_env(std::string_view flag);

}  // namespace volta
