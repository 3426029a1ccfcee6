// The Runtime: the one gateway from a graph to results.
#include "volta/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include "volta/op_attrs.h"
#include "volta/state.h"
#include "volta/verify.h"

namespace volta {

Result<NumericsPolicy> parse_numerics(std::string_view s) {
  if (s == "off") return NumericsPolicy::Off;
  if (s == "check") return NumericsPolicy::Check;
  if (s == "fail-fast") return NumericsPolicy::FailFast;
  return invalid_argument("unknown numerics policy '" + std::string(s) + "' (expected off, check or fail-fast)");
}

Status Runtime::check_numerics(const TensorRef& t, const std::string& what) {
  if (numerics_ == NumericsPolicy::Off || t.type.dtype != DType::f32) return Status::ok();
  std::vector<float> host(static_cast<size_t>(t.numel()));
  VOLTA_RETURN_IF_ERROR(backend_->copy_out(reinterpret_cast<std::byte*>(host.data()), t.data, host.size() * sizeof(float)));
  for (size_t i = 0; i < host.size(); ++i) {
    if (std::isfinite(host[i])) continue;
    std::string desc = what + " has " + (std::isnan(host[i]) ? "nan" : "inf") + " at element " + std::to_string(i) +
                       " of " + t.type.to_string();
    ++numerics_report_.nonfinite_values;
    if (numerics_report_.first.empty()) numerics_report_.first = desc;
    if (numerics_ == NumericsPolicy::FailFast) return numeric_error(desc + " (numerics policy fail-fast)");
    break;
  }
  return Status::ok();
}

namespace {
std::atomic<size_t> g_memory_limit{0};

std::string format_bytes(size_t b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 6) v /= 1024.0, ++u;
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu bytes", b);
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}
}  // namespace

void set_memory_limit(size_t bytes) { g_memory_limit = bytes; }
size_t memory_limit() { return g_memory_limit.load(); }

size_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

Runtime::Runtime(std::unique_ptr<Backend> backend, Determinism determinism)
    : backend_(std::move(backend)), cache_(std::make_unique<plan::PlanCache>()), determinism_(determinism) {
  memory_limit_ = volta::memory_limit();
  if (memory_limit_ == 0 && backend_->host_memory()) memory_limit_ = available_memory();
}

Result<Runtime> Runtime::create(DeviceKind kind, const ir::Graph* g, Determinism determinism) {
  VOLTA_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, select_backend(kind, g));
  Runtime rt(std::move(backend), determinism);
  if (const char* r = std::getenv("VOLTA_REPLAY"); r != nullptr && (std::string_view(r) == "off" || std::string_view(r) == "0"))
    rt.set_replay(false);
  return rt;
}

namespace {

std::string bound_shapes(const ir::Graph& g) {
  std::string s;
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Input || n.op == ir::Op::Param) s += n.name + "=" + n.type.to_string() + ";";
  return s;
}

// Every op has a kernel, every value a dtype the backend takes, and every kernel meets `level`.
// Returns the kernel of each node (indexed by id), as the plan records and reports them.
Result<std::vector<KernelInfo>> check_capabilities(const ir::Graph& g, const Backend& backend, Determinism level) {
  const Capabilities& caps = backend.capabilities();
  auto has_dtype = [&caps](DType d) { return std::find(caps.dtypes.begin(), caps.dtypes.end(), d) != caps.dtypes.end(); };
  std::vector<KernelInfo> kernels(g.nodes.size());
  for (const ir::Node& n : g.nodes) {
    auto what = [&] { return "[" + std::string(ir::op_name(n.op)) + "] backend '" + backend.name() + "' "; };
    if (!has_dtype(n.type.dtype))
      return unimplemented(what() + "does not take dtype " + dtype_name(n.type.dtype) + " " + ir::node_ref(n) +
                           " with type " + n.type.to_string());
    if (ir::is_leaf(n.op)) continue;
    if (!caps.supports(n.op))
      return unimplemented(what() + "has no kernel for this op " + ir::node_ref(n) + " with type " + n.type.to_string());
    VOLTA_RETURN_IF_ERROR(backend.check_node(g, n));
    KernelInfo k = backend.kernel_info(g, n, level);
    if (k.level < level)
      return unimplemented(what() + "kernel '" + k.variant + "' is only " + determinism_name(k.level) +
                                 " deterministic, below the " + determinism_name(level) + " level asked for " +
                                 ir::node_ref(n) + " (--deterministic or VOLTA_DETERMINISTIC)");
    kernels[static_cast<size_t>(n.id)] = std::move(k);
  }
  return kernels;
}

}  // namespace

Status Runtime::trace_output(const ir::Node& n, int64_t step, const TensorRef& out, bool device) {
  const size_t bytes = out.type.bytes();
  if (!device) return trace_->record(n, step, out.data, bytes);
  Tensor host = Tensor::empty(out.type.dtype, out.type.shape);
  VOLTA_RETURN_IF_ERROR(backend_->copy_out(host.raw(), out.data, bytes));
  return trace_->record(n, step, host.raw(), bytes);
}

Status Runtime::check_memory(const plan::ExecutionPlan& p) const {
  // The plan's bytes, and each thread's scratch for its largest step beside them.
  const size_t threads = static_cast<size_t>(std::max(1, backend_->scratch_threads()));
  const size_t scratch = p.memory.thread_scratch_bytes > (size_t{1} << 62) / threads ? size_t{1} << 62 : p.memory.thread_scratch_bytes * threads;
  if (memory_limit_ == 0 || (p.memory.peak_bytes <= memory_limit_ && scratch <= memory_limit_ - p.memory.peak_bytes)) return Status::ok();
  if (p.memory.peak_bytes <= memory_limit_)
    return out_of_memory("plan for graph '" + p.graph.name + "' needs " + format_bytes(p.memory.peak_bytes) + " and its kernels " +
                         format_bytes(p.memory.thread_scratch_bytes) + " of scratch on each of " + std::to_string(threads) +
                         " threads, but the memory limit is " + format_bytes(memory_limit_) +
                         " (--memory-limit; by default the memory available when the run started)");
  std::vector<std::pair<size_t, size_t>> classes;  // (bytes, class)
  for (size_t c = 0; c < plan::kNumMemClasses; ++c)
    if (p.memory.peak[c] > 0) classes.emplace_back(p.memory.peak[c], c);
  std::sort(classes.begin(), classes.end(), [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::string largest;
  for (size_t i = 0; i < classes.size() && i < 3; ++i)
    largest += std::string(i ? ", " : "") + plan::mem_class_name(static_cast<plan::MemClass>(classes[i].second)) + " " +
               format_bytes(classes[i].first);
  return out_of_memory("plan for graph '" + p.graph.name + "' needs " + format_bytes(p.memory.peak_bytes) + " (largest: " + largest +
                       ") but the memory limit is " + format_bytes(memory_limit_) +
                       " (--memory-limit; by default the memory available when the run started)");
}

Result<std::shared_ptr<const plan::ExecutionPlan>> Runtime::compile(const ir::Graph& g, const CompileOptions& options) {
  return compile(ir::Graph(g), options);  // a copy shares the constants' storage
}

Result<std::shared_ptr<const plan::ExecutionPlan>> Runtime::compile(ir::Graph&& g, const CompileOptions& options) {
  VOLTA_RETURN_IF_ERROR(ir::verify_graph(g));
  CompileOptions opts = options;  // without the fusions whose ops this backend cannot run
  const Capabilities& caps = backend_->capabilities();
  opts.pipeline = passes::without_unsupported(opts.pipeline, [&caps](ir::Op op) { return caps.supports(op); },
                                              [&caps](const std::string& f) { return caps.has(f); });
  opts.plan.device = !backend_->host_memory();
  opts.pipeline.weight_packing = [b = backend_.get()](int64_t M, int64_t N, int64_t K) { return b->matmul_weight_packing(M, N, K); };
  const std::string sig = passes::pipeline_signature(opts.pipeline);
  const Determinism level = opts.determinism.value_or(determinism_);
  plan::PlanKey key{passes::graph_hash(g, sig), bound_shapes(g), backend_->name(),
                    sig + ";budget=" + std::to_string(opts.plan.memory_budget_bytes) + ";determinism=" +
                        determinism_name(level)};
  if (auto cached = cache_->find(key)) {
    VOLTA_RETURN_IF_ERROR(check_memory(*cached));
    return cached;
  }

  VOLTA_ASSIGN_OR_RETURN(ir::Graph optimized, passes::run_pipeline(std::move(g), opts.pipeline));
  Status valid = ir::verify_graph(optimized);
  if (!valid.is_ok()) return internal_error("the pass pipeline produced an invalid graph: " + valid.message());
  VOLTA_RETURN_IF_ERROR(ir::bind_typed_attrs(optimized));
  VOLTA_ASSIGN_OR_RETURN(std::vector<KernelInfo> kernels, check_capabilities(optimized, *backend_, level));
  const Backend& backend = *backend_;
  auto workspace = [&backend](const ir::Graph& graph, const ir::Node& n) { return backend.workspace_bytes(graph, n); };
  VOLTA_ASSIGN_OR_RETURN(plan::ExecutionPlan p,
                         plan::make_plan(std::move(optimized), key.graph_hash, backend_->name(), workspace, opts.plan));
  for (int32_t id : p.schedule)
    p.memory.thread_scratch_bytes = std::max(p.memory.thread_scratch_bytes, backend.thread_scratch_bytes(p.graph, p.graph.node(id)));
  p.determinism = level;
  p.kernels = std::move(kernels);
  VOLTA_RETURN_IF_ERROR(plan::verify_schedule(p.graph, p.schedule));
  VOLTA_RETURN_IF_ERROR(plan::verify_allocation(p));
  VOLTA_RETURN_IF_ERROR(check_memory(p));
  auto shared = std::make_shared<const plan::ExecutionPlan>(std::move(p));
  cache_->insert(key, shared);
  return shared;
}

Result<std::shared_ptr<const plan::ExecutionPlan>> Runtime::compile_keyed(const std::string& key,
                                                                          const std::function<Result<ir::Graph>()>& build,
                                                                          const CompileOptions& opts) {
  const std::string full = key + "|" + passes::pipeline_signature(opts.pipeline) + "|budget=" +
                           std::to_string(opts.plan.memory_budget_bytes) + "|determinism=" +
                           determinism_name(opts.determinism.value_or(determinism_));
  if (auto it = keyed_.find(full); it != keyed_.end()) return it->second;
  VOLTA_ASSIGN_OR_RETURN(ir::Graph g, build());
  VOLTA_ASSIGN_OR_RETURN(auto p, compile(g, opts));
  keyed_.emplace(full, p);
  return p;
}

namespace {

// The state's buffer bound to leaf `n`: a param the state holds, else none.
const TensorRef* held(const State* state, const ir::Node& n) {
  return state && n.op == ir::Op::Param ? state->find(n.name) : nullptr;
}

// The first binding problem of a run, in node order: a leaf not bound or bound with another type,
// else a binding that names no leaf, or a param the state already holds.
Status binding_error(const ir::Graph& g, const Bindings& bindings, const State* state) {
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Input && n.op != ir::Op::Param) continue;
    if (const TensorRef* s = held(state, n)) {
      if (s->type != n.type)
        return invalid_argument("[param] '" + n.name + "' is declared " + n.type.to_string() + " but the state holds " +
                                s->type.to_string() + " " + ir::node_ref(n));
      continue;
    }
    auto it = bindings.find(n.name);
    if (it == bindings.end())
      return invalid_argument("[" + std::string(ir::op_name(n.op)) + "] '" + n.name + "' is not bound " + ir::node_ref(n));
    if (it->second.type() != n.type || !it->second.defined())
      return invalid_argument("[" + std::string(ir::op_name(n.op)) + "] '" + n.name + "' is declared " + n.type.to_string() +
                              " but bound to " + it->second.type().to_string() + " " + ir::node_ref(n));
  }
  for (const auto& [name, tensor] : bindings) {
    const int32_t id = g.find(name);
    if (id < 0 || (g.node(id).op != ir::Op::Input && g.node(id).op != ir::Op::Param))
      return invalid_argument("binding '" + name + "' names no input or param of graph '" + g.name + "'");
    if (held(state, g.node(id))) return invalid_argument("binding '" + name + "' names a param the state already holds");
  }
  return internal_error("binding_error: no problem found");
}

}  // namespace

// Device backends: the resident copy of a param's or constant's bytes, uploaded the first time
// they are seen.
Result<std::byte*> Runtime::resident(const Tensor& host, bool constant) {
  auto it = resident_.find(host.raw());
  if (it == resident_.end() || it->second.host.bytes() != host.bytes()) {
    VOLTA_ASSIGN_OR_RETURN(std::shared_ptr<std::byte> dev, backend_->allocate(host.bytes()));
    VOLTA_RETURN_IF_ERROR(backend_->copy_in(dev.get(), host.raw(), host.bytes()));
    transfers_.h2d_bytes += host.bytes();
    ++transfers_.param_uploads;
    it = resident_.insert_or_assign(host.raw(), Resident{host, std::move(dev), false}).first;
  }
  it->second.constant = it->second.constant || constant;
  return it->second.device.get();
}

// Device backends: a bound param's copy goes once nobody but the runtime holds its host tensor
// (nobody can bind it again), so binding fresh tensors run after run does not grow device
// memory. Constants stay: a cached plan's refs point at their copies.
void Runtime::drop_unreachable_residents() {
  for (auto it = resident_.begin(); it != resident_.end();)
    it = !it->second.constant && it->second.host.use_count() == 1 ? resident_.erase(it) : std::next(it);
}

// Device backends: input `n` of plan `p` copied into the plan's buffer for it, every run.
Result<std::byte*> Runtime::device_input(const plan::ExecutionPlan& p, const ir::Node& n, const Tensor& host) {
  std::shared_ptr<std::byte>& buf = device_inputs_[{p.graph_hash, n.id}];
  if (!buf) {
    VOLTA_ASSIGN_OR_RETURN(buf, backend_->allocate(host.bytes()));
  }
  VOLTA_RETURN_IF_ERROR(backend_->copy_in(buf.get(), host.raw(), host.bytes()));
  transfers_.h2d_bytes += host.bytes();
  return buf.get();
}

Result<std::vector<Tensor>> Runtime::run(const plan::ExecutionPlan& p, const Bindings& bindings, State* state) {
  std::vector<Tensor> outputs;
  VOLTA_RETURN_IF_ERROR(run(p, bindings, state, outputs));
  return outputs;
}

Status Runtime::run(const plan::ExecutionPlan& p, const Bindings& bindings, State* state, std::vector<Tensor>& outputs) {
  try {  // host tensors (outputs, staging) that fail to allocate are an error, not an abort
    return run_plan(p, bindings, state, outputs);
  } catch (const std::bad_alloc&) {
    return out_of_memory("running the plan for graph '" + p.graph.name + "': out of host memory");
  }
}

// Every node of the plan in schedule order (device backends: queued).
Status Runtime::execute_nodes(const plan::ExecutionPlan& p, RunRefs& cached, bool same_graph, bool device) {
  const ir::Graph& g = p.graph;
  std::vector<TensorRef>& refs = cached.values;
  if (!same_graph) {
    // The steps that compute (a view has nothing to, an in-place write does), each with its
    // inputs' ids and references in one flat list: a decode step walks them every token with
    // the caches cold, so they are read in order instead of from each node's own vectors.
    cached.steps.clear(), cached.arg_ids.clear(), cached.roles.clear();
    for (size_t s = 0; s < p.schedule.size(); ++s) {
      const ir::Node& n = g.node(p.schedule[s]);
      if (p.values[static_cast<size_t>(n.id)].view_of >= 0 && !ir::output_is_input(n.op)) continue;
      const plan::Buffer& ws = p.workspaces[s];
      cached.steps.push_back({n.id, s, cached.arg_ids.size(), n.inputs.size(), ws.offset, ws.bytes});
      cached.roles.push_back(backend_->step_role(n, p.kernels[static_cast<size_t>(n.id)]));
      cached.arg_ids.insert(cached.arg_ids.end(), n.inputs.begin(), n.inputs.end());
    }
    cached.args.resize(cached.arg_ids.size());
    const std::vector<bool> fixed = plan::fixed_values(p);
    for (size_t i = 0; i < cached.args.size(); ++i) {
      const auto id = static_cast<size_t>(cached.arg_ids[i]);
      cached.args[i].type = refs[id].type;
      cached.args[i].fixed = fixed[id];
    }
  }
  // Every reference is fixed before the first step runs, so the steps only read them (the
  // backend's walk may run a step on several threads at once).
  for (size_t i = 0; i < cached.args.size(); ++i) cached.args[i].data = refs[static_cast<size_t>(cached.arg_ids[i])].data;
  auto execute = [&](const RunRefs::Step& step) {
    const ir::Node& n = g.node(step.node);
    const std::span<const TensorRef> inputs(cached.args.data() + step.first_arg, step.args);
    const std::span<std::byte> workspace(arena_.get() + step.ws_offset, step.ws_bytes);
    return backend_->execute(n, inputs, refs[static_cast<size_t>(n.id)], workspace, p.kernels[static_cast<size_t>(n.id)]);
  };
  if (!profiler_ && !trace_ && numerics_ == NumericsPolicy::Off)
    return backend_->walk(cached.roles, [&](size_t i) { return execute(cached.steps[i]); });
  for (const RunRefs::Step& step : cached.steps) {
    const ir::Node& n = g.node(step.node);
    const size_t s = step.schedule_index;
    const std::span<const TensorRef> inputs(cached.args.data() + step.first_arg, step.args);
    const auto start = profiler_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    VOLTA_RETURN_IF_ERROR(execute(step));
    if (profiler_) {
      VOLTA_RETURN_IF_ERROR(backend_->synchronize());
      profiler_->record(g, n, start, std::chrono::steady_clock::now());
    }
    if (trace_) VOLTA_RETURN_IF_ERROR(trace_output(n, static_cast<int64_t>(s), refs[static_cast<size_t>(n.id)], device));
    if (numerics_ != NumericsPolicy::Off) {
      VOLTA_RETURN_IF_ERROR(check_numerics(refs[static_cast<size_t>(n.id)],
                                           "[" + std::string(ir::op_name(n.op)) + "] " + ir::node_ref(n) + " output"));
      if (n.op == ir::Op::OptimizerUpdate) {  // the param it wrote in place
        VOLTA_ASSIGN_OR_RETURN(const std::string kind, n.attrs.get_string("kind", ""));
        VOLTA_RETURN_IF_ERROR(check_numerics(inputs[0], "[" + kind + "] update of param '" + g.node(n.inputs[0]).name + "'"));
      }
    }
  }
  return Status::ok();
}

// Device backends that record: the second run of a plan over the same buffers is recorded and
// replayed, later ones replay. A plan whose recording fails runs node by node from then on.
Status Runtime::run_or_replay(const plan::ExecutionPlan& p, RunRefs& cached, bool same_graph, bool device) {
  const bool may_record = device && replay_ && backend_->can_record() && !profiler_ && !trace_ && numerics_ == NumericsPolicy::Off;
  if (!may_record) return execute_nodes(p, cached, same_graph, device);
  Recorded& rec = recorded_[p.graph_hash];
  const std::vector<TensorRef>& refs = cached.values;
  auto same_buffers = [&] {
    if (rec.graph != &p.graph || rec.arena != arena_.get() || rec.refs.size() != refs.size()) return false;
    for (size_t i = 0; i < refs.size(); ++i)
      if (rec.refs[i].data != refs[i].data || rec.refs[i].type != refs[i].type) return false;
    return true;
  };
  if (!rec.failed && same_buffers()) {
    if (!rec.recording) {
      Status st = backend_->begin_recording();
      if (st.is_ok()) {
        st = execute_nodes(p, cached, same_graph, device);
        auto r = backend_->end_recording();  // always: leaves the recording state
        if (st.is_ok() && r.is_ok()) rec.recording = std::move(r).value();
      }
      if (!rec.recording) rec.failed = true;  // run node by node below, now and from now on
    }
    if (rec.recording) {
      ++replays_;
      return backend_->replay(*rec.recording);
    }
  }
  rec.recording.reset();
  VOLTA_RETURN_IF_ERROR(execute_nodes(p, cached, same_graph, device));
  rec.graph = &p.graph, rec.refs = refs, rec.arena = arena_.get();
  return Status::ok();
}

Status Runtime::run_plan(const plan::ExecutionPlan& p, const Bindings& bindings, State* state, std::vector<Tensor>& outputs) {
  if (p.backend != backend_->name())
    return invalid_argument("plan was made for backend '" + p.backend + "' but this runtime runs '" + backend_->name() + "'");
  const ir::Graph& g = p.graph;
  if (p.kernels.size() != g.size())  // made by plan::make_plan alone: no kernel was chosen
    return invalid_argument("plan for graph '" + g.name + "' has no kernel choices (compile it with Runtime::compile)");
  RunRefs& cached = refs_[p.graph_hash];
  std::vector<TensorRef>& refs = cached.values;
  // The last run of this same graph object completed: every type is already right. Otherwise
  // compare them (a run that stopped early leaves some unset; two graphs' hashes may collide).
  const bool same_graph = cached.graph == &g && refs.size() == g.size();
  cached.graph = nullptr;  // set again once this run has completed
  refs.resize(g.size());
  // Device backends: params and constants live in resident copies (uploaded once, kept while
  // the runtime lives), inputs are copied into per-plan buffers every run, outputs copied back.
  const bool device = !backend_->host_memory();
  if (device) drop_unreachable_residents();
  if (!same_graph) {
    cached.leaves.clear();
    for (const ir::Node& n : g.nodes) {
      TensorRef& r = refs[static_cast<size_t>(n.id)];
      if (r.type != n.type) r.type = n.type;
      if (n.op == ir::Op::Constant) r.data = const_cast<std::byte*>(n.value.raw());  // read-only
      if (n.op == ir::Op::Constant && device) {
        VOLTA_ASSIGN_OR_RETURN(r.data, resident(n.value, true));
      }
      if (n.op == ir::Op::Input || n.op == ir::Op::Param) cached.leaves.push_back(n.id);
    }
    std::sort(cached.leaves.begin(), cached.leaves.end(), [&g](int32_t a, int32_t b) { return g.node(a).name < g.node(b).name; });
  }
  if (state && &state->backend() != backend_.get())
    return invalid_argument("the state lives on another backend than this runtime's '" + backend_->name() + "'");
  // Params the state holds are bound to its buffers; the other leaves to the bindings, both in
  // name order (one pass over each, every binding used once). On a mismatch, binding_error()
  // names the first problem in node order.
  // The state's buffers are looked up by name once per layout of the state (a decode step binds
  // tens of them every token).
  const uint64_t layout = state ? state->layout() : 0;
  if (!same_graph || cached.state != state || cached.state_layout != layout) {
    cached.state = nullptr;
    cached.held.assign(cached.leaves.size(), RunRefs::Held{});
    for (size_t i = 0; i < cached.leaves.size(); ++i) {
      const ir::Node& n = g.node(cached.leaves[i]);
      if (const TensorRef* s = held(state, n)) {
        if (s->type != n.type) return binding_error(g, bindings, state);
        cached.held[i] = {s->data, true};
      }
    }
    cached.state = state, cached.state_layout = layout;
  }
  auto it = bindings.begin();
  for (size_t i = 0; i < cached.leaves.size(); ++i) {
    const ir::Node& n = g.node(cached.leaves[i]);
    std::byte*& data = refs[static_cast<size_t>(cached.leaves[i])].data;
    if (cached.held[i].held) {  // (an empty tensor's buffer may be null)
      data = cached.held[i].data;
      continue;
    }
    if (it == bindings.end() || it->first != n.name || it->second.type() != n.type || !it->second.defined())
      return binding_error(g, bindings, state);
    data = const_cast<std::byte*>(it->second.raw());  // kernels never write bound inputs
    if (device) {
      VOLTA_ASSIGN_OR_RETURN(data, n.op == ir::Op::Input ? device_input(p, n, it->second) : resident(it->second, false));
    }
    ++it;
  }
  if (it != bindings.end()) return binding_error(g, bindings, state);
  if (numerics_ != NumericsPolicy::Off)
    for (const ir::Node& n : g.nodes)
      if (n.op == ir::Op::Input)
        VOLTA_RETURN_IF_ERROR(check_numerics(refs[static_cast<size_t>(n.id)], "input '" + n.name + "'"));
  if (!arena_ || arena_bytes_ < p.memory.arena_bytes) {
    VOLTA_ASSIGN_OR_RETURN(arena_, backend_->allocate(p.memory.arena_bytes));
    arena_bytes_ = p.memory.arena_bytes;
  }
  // The arena's values keep their addresses while the graph and the arena stay (a decode step
  // walked every value of its plan twice a token for them).
  if (!same_graph || cached.arena != arena_.get()) {
    cached.views.clear();
    for (const plan::Buffer& b : p.values) {
      if (b.in_arena) refs[static_cast<size_t>(b.node)].data = arena_.get() + b.offset;
      if (b.view_of >= 0) cached.views.push_back({b.node, b.view_of, b.view_offset});
    }
    cached.arena = arena_.get();
  }
  for (const RunRefs::View& v : cached.views)  // views point into their root's bytes
    refs[static_cast<size_t>(v.node)].data = refs[static_cast<size_t>(v.root)].data + v.offset;

  if (trace_) trace_->begin_run(g.name);
  VOLTA_RETURN_IF_ERROR(run_or_replay(p, cached, same_graph, device));
  cached.graph = &g;
  outputs.resize(g.outputs.size());
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorRef& r = refs[static_cast<size_t>(g.outputs[i])];
    Tensor& t = outputs[i];
    // Reused only when no other tensor shares the storage: writing it must not change a copy
    // the caller handed on.
    if (!t.defined() || t.use_count() != 1 || t.type() != r.type) t = Tensor::empty(r.type.dtype, r.type.shape);
    VOLTA_RETURN_IF_ERROR(backend_->copy_out(t.raw(), r.data, t.bytes()));
    if (device) transfers_.d2h_bytes += t.bytes();
  }
  return Status::ok();
}

}  // namespace volta
