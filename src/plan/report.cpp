// Text and JSON views of a plan, for `volta inspect` and golden tests.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "volta/plan.h"

namespace volta::plan {

namespace {

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}
std::string rpad(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

}  // namespace

std::string format_memory_report(const MemoryReport& m) {
  std::string out = "memory (bytes)      planned peak         naive\n";
  for (size_t c = 0; c < kNumMemClasses; ++c)
    out += "  " + pad(mem_class_name(static_cast<MemClass>(c)), 16) + rpad(std::to_string(m.peak[c]), 14) +
           rpad(std::to_string(m.naive[c]), 14) + "\n";
  out += "  " + pad("total", 16) + rpad(std::to_string(m.peak_bytes), 14) + rpad(std::to_string(m.naive_bytes), 14) + "\n";
  char ratio[32] = "n/a";
  if (m.peak_bytes > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", static_cast<double>(m.naive_bytes) / static_cast<double>(m.peak_bytes));
  out += "  arena " + std::to_string(m.arena_bytes) + " + bound " + std::to_string(m.external_bytes) +
         "; peak live " + std::to_string(m.peak_live_bytes) + "; naive / planned " + ratio + "\n";
  const Placement& pl = m.placement;
  if (pl.device)
    out += "  device: host-input " + std::to_string(pl.host_input_bytes) + ", device-param " + std::to_string(pl.device_param_bytes) +
           ", device-temp " + std::to_string(pl.device_temp_bytes) + ", device-output " + std::to_string(pl.device_output_bytes) +
           "; H2D " + std::to_string(pl.host_input_bytes) + " per run + " + std::to_string(pl.device_param_bytes) +
           " once, D2H " + std::to_string(pl.device_output_bytes) + " per run\n";
  return out;
}

namespace {

// The kernel planned for node `id` (none when the plan has no record of it).
KernelInfo kernel_of(const ExecutionPlan& p, int32_t id) {
  return static_cast<size_t>(id) < p.kernels.size() ? p.kernels[static_cast<size_t>(id)] : KernelInfo{"?", p.determinism};
}

// "2 cpu (strict), 1 reference (strict)": the kernels of the schedule by variant and level, in
// order of first use.
std::string kernel_counts(const ExecutionPlan& p) {
  std::vector<std::pair<std::string, int64_t>> counts;
  for (int32_t id : p.schedule) {
    const KernelInfo k = kernel_of(p, id);
    const std::string key = k.variant + " (" + determinism_name(k.level) + ")";
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == key; });
    if (it == counts.end()) counts.emplace_back(key, 1);
    else ++it->second;
  }
  std::string out;
  for (const auto& [key, n] : counts) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + key;
  return out;
}

}  // namespace

std::string format_kernel_summary(const ExecutionPlan& p) {
  return std::string("determinism ") + determinism_name(p.determinism) + "; kernels: " + kernel_counts(p);
}

std::string format_plan(const ExecutionPlan& p) {
  std::string out = "schedule (" + std::to_string(p.schedule.size()) + " steps, backend " + p.backend + ", " +
                    format_kernel_summary(p) + ")\n";
  out += "  step  op                kernel      value                           type                   class          offset       bytes  live\n";
  for (size_t s = 0; s < p.schedule.size(); ++s) {
    const ir::Node& n = p.graph.node(p.schedule[s]);
    const Buffer& b = p.values[static_cast<size_t>(n.id)];
    out += "  " + rpad(std::to_string(s), 4) + "  " + pad(ir::op_name(n.op), 18) + pad(kernel_of(p, n.id).variant, 12) +
           pad("%" + n.name, 32) + pad(n.type.to_string(), 23);
    if (b.view_of >= 0) {
      out += "view of %" + p.graph.node(b.view_of).name;
      if (b.view_offset > 0) out += " + " + std::to_string(b.view_offset) + " bytes";
      out += "\n";
      continue;
    }
    out += pad(mem_class_name(b.cls), 11) + rpad(std::to_string(b.offset), 10) + rpad(std::to_string(b.bytes), 12) + "  " +
           std::to_string(b.first_step) + ".." + std::to_string(b.last_step) + "\n";
    const Buffer& ws = p.workspaces[s];
    if (ws.bytes > 0)
      out += "        " + pad("", 12) + pad("(workspace)", 50) + pad("", 23) + pad("temp", 11) + rpad(std::to_string(ws.offset), 10) +
             rpad(std::to_string(ws.bytes), 12) + "\n";
  }
  return out + format_memory_report(p.memory);
}

std::string plan_to_json(const ExecutionPlan& p, int indent) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["graph"] = p.graph.name;
  j["hash"] = hash_to_hex(p.graph_hash);
  j["backend"] = p.backend;
  j["determinism"] = determinism_name(p.determinism);
  j["peak_bytes"] = p.memory.peak_bytes;
  j["naive_bytes"] = p.memory.naive_bytes;
  j["arena_bytes"] = p.memory.arena_bytes;
  j["external_bytes"] = p.memory.external_bytes;
  j["peak_live_bytes"] = p.memory.peak_live_bytes;
  const Placement& pl = p.memory.placement;
  if (pl.device)
    j["placement"] = {{"host_input_bytes", pl.host_input_bytes},     {"device_param_bytes", pl.device_param_bytes},
                      {"device_temp_bytes", pl.device_temp_bytes},   {"device_output_bytes", pl.device_output_bytes},
                      {"h2d_bytes_per_run", pl.host_input_bytes},    {"h2d_bytes_once", pl.device_param_bytes},
                      {"d2h_bytes_per_run", pl.device_output_bytes}};
  ordered_json classes = ordered_json::object();
  for (size_t c = 0; c < kNumMemClasses; ++c)
    classes[mem_class_name(static_cast<MemClass>(c))] = {{"peak", p.memory.peak[c]}, {"naive", p.memory.naive[c]}};
  j["classes"] = classes;
  ordered_json steps = ordered_json::array();
  for (size_t s = 0; s < p.schedule.size(); ++s) {
    const ir::Node& n = p.graph.node(p.schedule[s]);
    const Buffer& b = p.values[static_cast<size_t>(n.id)];
    const KernelInfo k = kernel_of(p, n.id);
    ordered_json step = {{"step", s},          {"op", ir::op_name(n.op)},  {"kernel", k.variant},
                         {"kernel_level", determinism_name(k.level)},      {"value", n.name},
                         {"type", n.type.to_string()}, {"class", mem_class_name(b.cls)}, {"offset", b.offset},
                         {"bytes", b.bytes},   {"first_step", b.first_step}, {"last_step", b.last_step}};
    if (p.workspaces[s].bytes > 0) step["workspace"] = {{"offset", p.workspaces[s].offset}, {"bytes", p.workspaces[s].bytes}};
    if (b.view_of >= 0) step["view_of"] = {{"value", p.graph.node(b.view_of).name}, {"offset", b.view_offset}};
    steps.push_back(step);
  }
  j["schedule"] = steps;
  return j.dump(indent);
}

}  // namespace volta::plan
