// `volta bench model FILE`: steady-state latency of any model, .onnx or .vir, with the first
// run and the compile (import + passes + plan) timed apart, so an imported model can be compared
// with another runtime's session on the same inputs.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "volta/passes.h"
#include "volta/text.h"

namespace volta::cli {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The q-quantile (nearest rank) of `v`.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(std::min<double>(static_cast<double>(v.size()) - 1, q * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

Result<RunTimes> time_runs(Runtime& rt, const plan::ExecutionPlan& plan, const Bindings& bindings, int64_t runs, int64_t warmup,
                           Profiler* profiler) {
  RunTimes t;
  for (int64_t r = 0; r < 1 + warmup + runs; ++r) {
    if (r == 1 + warmup && profiler) rt.set_profiler(profiler);  // steady state only
    const auto t0 = Clock::now();
    VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt.run(plan, bindings));
    const double ms = ms_since(t0);
    if (r == 0) t.first_ms = ms;
    else if (r > warmup) t.ms.push_back(ms);
    if (r == 0) t.outputs = std::move(out);
  }
  rt.set_profiler(nullptr);
  t.median_ms = quantile(t.ms, 0.5);
  t.p90_ms = quantile(t.ms, 0.9);
  t.min_ms = t.ms.empty() ? 0.0 : *std::min_element(t.ms.begin(), t.ms.end());
  return t;
}

std::string format_run_times(const RunTimes& t) {
  char text[200];
  std::snprintf(text, sizeof text, "first run %.3f ms; steady state median %.3f ms, p90 %.3f ms, min %.3f ms (%zu runs)", t.first_ms,
                t.median_ms, t.p90_ms, t.min_ms, t.ms.size());
  return text;
}

Status bench_model(const BenchModelFlags& f, const GlobalFlags& global) {
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  const auto t0 = Clock::now();
  ir::Graph graph;
  Bindings bindings;
  if (is_onnx_file(f.file)) {
    VOLTA_ASSIGN_OR_RETURN(OnnxRun r, import_onnx(f.file, f.inputs, false, f.shapes));
    graph = std::move(r.model.graph);
    bindings = std::move(r.bindings);
  } else {
    if (!f.shapes.empty()) return invalid_argument("--shape: only ONNX models have dynamic dims; a .vir model's shapes are fixed");
    if (!f.inputs.empty()) return invalid_argument("--input: bench model binds a .vir model's inputs with seeded random values");
    VOLTA_ASSIGN_OR_RETURN(graph, ir::load_graph(f.file));
    VOLTA_ASSIGN_OR_RETURN(bindings, init_params(graph, f.seed));
  }
  VOLTA_ASSIGN_OR_RETURN(const DType weights, weights_flag(f.weights, DType::f32));
  size_t narrowed = 0;
  if (weights != DType::f32) {  // constants are narrowed in the graph, bound params here
    std::vector<std::string> names;
    VOLTA_ASSIGN_OR_RETURN(graph, passes::store_weights_as(graph, weights, &names));
    for (const std::string& name : names)
      if (auto it = bindings.find(name); it != bindings.end()) it->second = narrow_to(it->second, weights);
    for (const ir::Node& n : graph.nodes) narrowed += n.type.dtype == weights && ir::is_leaf(n.op) ? 1 : 0;
  }
  // Inputs no file gave: seeded values (integers small enough to index anything).
  VOLTA_ASSIGN_OR_RETURN(Bindings random, random_inputs(graph, f.seed));
  std::vector<std::string> generated;
  for (auto& [name, t] : random)
    if (!bindings.count(name)) bindings.emplace(name, std::move(t)), generated.push_back(name);
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &graph));
  VOLTA_ASSIGN_OR_RETURN(CompileOptions opts, f.pipeline.to_options());
  // Moved in: the plan holds its own graph, and weights it packs are never held twice.
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(std::move(graph), opts));
  const double compile_ms = ms_since(t0);
  Profiler profiler;
  VOLTA_ASSIGN_OR_RETURN(RunTimes t, time_runs(rt, *plan, bindings, f.runs, f.warmup, f.profile.enabled() ? &profiler : nullptr));
  const int64_t rss = peak_rss_bytes();
  if (f.json) {
    nlohmann::ordered_json row = {{"bench", "model"},        {"file", f.file},          {"compile_ms", compile_ms},
                                  {"first_run_ms", t.first_ms}, {"median_ms", t.median_ms}, {"p90_ms", t.p90_ms},
                                  {"min_ms", t.min_ms},       {"runs", t.ms.size()},     {"threads", cpu_threads()},
                                  {"peak_rss_bytes", rss},    {"plan_bytes", plan->memory.peak_bytes},
                                  {"weights", dtype_name(weights)}, {"weights_narrowed", narrowed},
                                  {"backend", rt.backend().name()}};
    std::printf("%s\n", row.dump().c_str());
  } else {
    std::printf("model %s on %s, %d threads: compile %.1f ms; %s\n", f.file.c_str(), rt.backend().name().c_str(), cpu_threads(),
                compile_ms, format_run_times(t).c_str());
    std::printf("memory: plan %.2f MB (weights and inputs %.2f MB, arena %.2f MB), peak RSS %.1f MB%s\n",
                static_cast<double>(plan->memory.peak_bytes) / 1e6, static_cast<double>(plan->memory.external_bytes) / 1e6,
                static_cast<double>(plan->memory.arena_bytes) / 1e6,
                static_cast<double>(rss) / 1e6, generated.empty() ? "" : "; seeded values for inputs with no --input:");
    for (const std::string& name : generated) std::printf("  %s %s\n", name.c_str(), bindings.at(name).type().to_string().c_str());
    if (weights != DType::f32) std::printf("weights: %zu matmul weights in %s\n", narrowed, dtype_name(weights));
  }
  return f.profile.finish(profiler);
}

}  // namespace volta::cli
