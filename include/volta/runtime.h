// The Runtime is the only way to execute: verify -> passes -> plan (cached) -> backend.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "volta/backend.h"
#include "volta/passes.h"
#include "volta/plan.h"
#include "volta/profiler.h"
#include "volta/trace.h"

namespace volta {

class State;

struct CompileOptions {
  passes::PipelineOptions pipeline;
  plan::PlanOptions plan;
  // The level every kernel of the plan must meet; unset: the runtime's (Runtime::determinism).
  std::optional<Determinism> determinism;
};

// Named tensors for the graph's inputs and params.
using Bindings = std::map<std::string, Tensor>;

// What to do about NaN / Inf: nothing, count them, or stop at the first op that produced one.
enum class NumericsPolicy : uint8_t { Off, Check, FailFast };
Result<NumericsPolicy> parse_numerics(std::string_view s);  // "off" | "check" | "fail-fast"

struct NumericsReport {
  int64_t nonfinite_values = 0;  // values (node outputs, bound inputs, updated params) with a NaN or Inf
  std::string first;             // description of the first one, empty if none
};

// Bytes a runtime moved between host and a device backend (all zero on the CPU).
struct TransferStats {
  size_t h2d_bytes = 0;      // inputs every run, params and constants on first use
  size_t d2h_bytes = 0;      // outputs
  int64_t param_uploads = 0;  // params and constants uploaded (each once per runtime)
};

// The memory limit of runtimes created from now on, in bytes: compile() refuses a plan whose
// peak (its arena plus the params, state and inputs it binds) is above it, before anything is
// allocated, naming the largest classes. 0 (the default): on a host-memory backend, the
// machine's available memory when the runtime is created (MemAvailable); no limit on a device.
void set_memory_limit(size_t bytes);
size_t memory_limit();
size_t available_memory();  // MemAvailable of /proc/meminfo in bytes; 0 when unknown

class Runtime {
 public:
  // `determinism`: the level its plans promise unless a compile asks for another (strict unless
  // told; the CLI reads --deterministic or VOLTA_DETERMINISTIC).
  explicit Runtime(std::unique_ptr<Backend> backend, Determinism determinism = Determinism::Strict);
  static Result<Runtime> create(DeviceKind kind, const ir::Graph* g = nullptr,
                                Determinism determinism = Determinism::Strict);

  Backend& backend() { return *backend_; }
  plan::PlanCache& cache() { return *cache_; }
  size_t memory_limit() const { return memory_limit_; }  // 0: none
  Determinism determinism() const { return determinism_; }

  // verify_graph, the pass pipeline and planning, cached by (hash, shapes, backend, flags).
  // Fails if the backend lacks a kernel for any op, naming op, node and backend.
  Result<std::shared_ptr<const plan::ExecutionPlan>> compile(const ir::Graph& g, const CompileOptions& opts = {});
  // The same for a graph the caller gives up: its constants are the pipeline's own, so a weight
  // the plan stores in another layout is not held twice while the plan is made.
  Result<std::shared_ptr<const plan::ExecutionPlan>> compile(ir::Graph&& g, const CompileOptions& opts = {});

  // The plan for the graph `build` makes, remembered under `key`: a caller that names its graphs
  // (e.g. "tinylm decode <config> B=1 pos=17") skips building and hashing them after the first
  // time. The key must determine the graph completely.
  Result<std::shared_ptr<const plan::ExecutionPlan>> compile_keyed(const std::string& key,
                                                                   const std::function<Result<ir::Graph>()>& build,
                                                                   const CompileOptions& opts = {});

  // Runs a plan. Every input and param must be bound with exactly its declared type: params
  // held by `state` (on this runtime's backend) are bound to its buffers, which the plan's
  // state-updating nodes write in place; everything else comes from `bindings`.
  // Returns the outputs in graph order as host tensors.
  Result<std::vector<Tensor>> run(const plan::ExecutionPlan& p, const Bindings& bindings, State* state = nullptr);
  // The same, into `outputs`: an entry of the output's type whose storage nobody else shares is
  // written in place, any other is replaced by a new tensor. A caller running a plan per token
  // (decode) so allocates nothing once its outputs exist.
  Status run(const plan::ExecutionPlan& p, const Bindings& bindings, State* state, std::vector<Tensor>& outputs);

  // Records every executed node while set (nullptr: off). The profiler must outlive its use.
  void set_profiler(Profiler* p) { profiler_ = p; }
  Profiler* profiler() const { return profiler_; }
  // Records a hash of every executed node's output while set (nullptr: off; --trace-hashes).
  void set_trace(HashTrace* t) { trace_ = t; }

  const TransferStats& transfers() const { return transfers_; }

  // Device backends that can record (Backend::can_record): a plan run a second time over the
  // same buffers is recorded, later runs replay it (on by default; off with
  // VOLTA_REPLAY=off for Runtime::create, or here). Never while profiling, tracing or checking
  // numerics, which need each node on its own.
  void set_replay(bool on) { replay_ = on; }
  bool replay() const { return replay_; }
  int64_t replays() const { return replays_; }  // runs that replayed a recording

  void set_numerics(NumericsPolicy p) { numerics_ = p; }
  NumericsPolicy numerics() const { return numerics_; }
  const NumericsReport& numerics_report() const { return numerics_report_; }
  // Applies the policy to a value `what` names: under FailFast a NaN / Inf is an error.
  Status check_numerics(const TensorRef& t, const std::string& what);

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<plan::PlanCache> cache_;
  std::map<std::string, std::shared_ptr<const plan::ExecutionPlan>> keyed_;
  Profiler* profiler_ = nullptr;
  HashTrace* trace_ = nullptr;
  NumericsPolicy numerics_ = NumericsPolicy::Off;
  NumericsReport numerics_report_;
  size_t memory_limit_ = 0;
  Determinism determinism_ = Determinism::Strict;
  Status check_memory(const plan::ExecutionPlan& p) const;
  Status trace_output(const ir::Node& n, int64_t step, const TensorRef& out, bool device);
  Status run_plan(const plan::ExecutionPlan& p, const Bindings& bindings, State* state, std::vector<Tensor>& outputs);
  std::shared_ptr<std::byte> arena_;  // reused across runs, grown when a plan needs more
  // Per-graph value references (and each step's input references) kept between runs, so a run
  // only updates data pointers; types are compared, not copied (decode alternates between plans
  // every token, and a copied shape is an allocation).
  struct RunRefs {
    const ir::Graph* graph = nullptr;            // the plan graph whose types they hold
    std::vector<TensorRef> values;               // by node id
    struct Step {  // a scheduled node that computes (views are skipped)
      int32_t node;
      size_t schedule_index;
      size_t first_arg, args;  // its inputs: arg_ids / args [first_arg, first_arg + args)
      size_t ws_offset, ws_bytes;
    };
    std::vector<Step> steps;
    std::vector<StepRole> roles;   // each step's role in the backend's walk
    std::vector<int32_t> arg_ids;  // every step's input node ids, in step order
    std::vector<TensorRef> args;   // their references (types set once, data every run)
    std::vector<int32_t> leaves;                 // input and param ids in name order
    // The state buffers bound to the leaves (not held: bound by the caller's bindings), valid
    // for this state while its layout() stays and the graph's types are right.
    struct Held {
      std::byte* data = nullptr;
      bool held = false;
    };
    std::vector<Held> held;
    const State* state = nullptr;
    uint64_t state_layout = 0;
    // The arena the values' addresses were set for, and the views in plan order (re-pointed
    // every run: a view's root may be a leaf bound anew).
    const std::byte* arena = nullptr;
    struct View {
      int32_t node, root;
      size_t offset;
    };
    std::vector<View> views;
  };
  std::map<uint64_t, RunRefs> refs_;
  Status execute_nodes(const plan::ExecutionPlan& p, RunRefs& cached, bool same_graph, bool device);
  Status run_or_replay(const plan::ExecutionPlan& p, RunRefs& cached, bool same_graph, bool device);
  // A plan's recording and the buffers it was recorded over (by graph hash).
  struct Recorded {
    const ir::Graph* graph = nullptr;
    std::vector<TensorRef> refs;  // the value references of its last run
    std::byte* arena = nullptr;
    std::unique_ptr<Recording> recording;
    bool failed = false;  // the backend could not record it: run node by node
  };
  std::map<uint64_t, Recorded> recorded_;
  bool replay_ = true;
  int64_t replays_ = 0;
  size_t arena_bytes_ = 0;

  // Device backends: params and constants uploaded once, by host address; the host tensor is
  // kept so its storage (and address) cannot be reused while the copy is resident.
  struct Resident {
    Tensor host;
    std::shared_ptr<std::byte> device;
    bool constant = false;  // a graph constant's: kept while the runtime lives
  };
  std::map<const std::byte*, Resident> resident_;
  std::map<std::pair<uint64_t, int32_t>, std::shared_ptr<std::byte>> device_inputs_;  // (graph, input id)
  TransferStats transfers_;
  Result<std::byte*> resident(const Tensor& host, bool constant);
  void drop_unreachable_residents();
  Result<std::byte*> device_input(const plan::ExecutionPlan& p, const ir::Node& n, const Tensor& host);
};

// Seeded parameter values from each param's init attributes (stream = the param's name).
Result<Bindings> init_params(const ir::Graph& g, uint64_t seed);
// Seeded random values for every input: f32 ~ N(0, 1); integers uniform in [0, bound) where
// bound is the smallest row count / class count among the input's uses (2 when none).
Result<Bindings> random_inputs(const ir::Graph& g, uint64_t seed);

}  // namespace volta
