#include "volta/profiler.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "io/file.h"

namespace volta {

Profiler::Profiler() : origin_(std::chrono::steady_clock::now()) {}

// Multiply-adds count two; masked attention entries count too (the causal skip is the kernel's gain).
uint64_t node_flops(const ir::Graph& g, const ir::Node& n) {
  auto shape = [&](size_t i) -> const Shape& { return g.node(n.inputs[i]).type.shape; };
  if (n.op == ir::Op::Matmul) {
    const Shape& a = shape(0);
    auto ta = n.attrs.get_int("transpose_a", 0);
    const int64_t k = ta.is_ok() && *ta ? a[a.size() - 2] : a.back();
    return 2 * static_cast<uint64_t>(n.type.numel()) * static_cast<uint64_t>(k);
  }
  if (n.op == ir::Op::Attention && shape(0).size() >= 2 && shape(1).size() >= 2) {
    // q kᵀ and p v over every key: 2 T S (D + E) per batch, from out = [..., T, E]
    const int64_t D = shape(0).back();
    int64_t S = shape(1)[shape(1).size() - 2];
    if (n.inputs.size() == 5) S += shape(3)[shape(3).size() - 2];
    return 2 * static_cast<uint64_t>(n.type.numel() / std::max<int64_t>(n.type.shape.back(), 1)) *
           static_cast<uint64_t>(S) * static_cast<uint64_t>(D + n.type.shape.back());
  }
  if (n.op == ir::Op::AttentionGrad && shape(0).size() >= 2) {
    // q kᵀ again, then dy vᵀ, dq, dk, dv: five [T, T, D] products
    const Shape& q = shape(0);
    const int64_t T = q[q.size() - 2];
    return 10 * static_cast<uint64_t>(g.node(n.inputs[0]).type.numel()) * static_cast<uint64_t>(T);
  }
  if (n.op == ir::Op::Conv2d && shape(1).size() == 4) {
    const Shape& w = shape(1);
    return 2 * static_cast<uint64_t>(n.type.numel()) * static_cast<uint64_t>(w[1] * w[2] * w[3]);
  }
  uint64_t elems = static_cast<uint64_t>(n.type.numel());
  for (int32_t in : n.inputs) elems = std::max(elems, static_cast<uint64_t>(g.node(in).type.numel()));
  return elems;
}

void Profiler::record(const ir::Graph& g, const ir::Node& n, std::chrono::steady_clock::time_point start,
                      std::chrono::steady_clock::time_point end) {
  ProfileEvent e;
  e.op = ir::op_name(n.op);
  e.node = n.name;
  e.shapes = n.type.to_string() + " <-";
  e.bytes = n.type.bytes();
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const TensorType& t = g.node(n.inputs[i]).type;
    e.shapes += (i ? ", " : " ") + t.to_string();
    e.bytes += t.bytes();
  }
  e.flops = node_flops(g, n);
  e.start_us = std::chrono::duration<double, std::micro>(start - origin_).count();
  e.dur_us = std::chrono::duration<double, std::micro>(end - start).count();
  events_.push_back(std::move(e));
}

void Profiler::record_span(const std::string& name, std::chrono::steady_clock::time_point start,
                           std::chrono::steady_clock::time_point end) {
  ProfileEvent e;
  e.op = name;
  e.node = name;
  e.start_us = std::chrono::duration<double, std::micro>(start - origin_).count();
  e.dur_us = std::chrono::duration<double, std::micro>(end - start).count();
  events_.push_back(std::move(e));
}

std::string Profiler::chrome_trace_json() const {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const ProfileEvent& e : events_)
    events.push_back({{"name", e.op},
                      {"cat", "op"},
                      {"ph", "X"},
                      {"ts", e.start_us},
                      {"dur", e.dur_us},
                      {"pid", 1},
                      {"tid", 1},
                      {"args", {{"node", e.node}, {"shapes", e.shapes}, {"bytes", e.bytes}, {"flops", e.flops}}}});
  nlohmann::ordered_json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status Profiler::write_chrome_trace(const std::string& path) const {
  // Built whole before the file is touched, then replaced at once: an interrupted run leaves
  // the earlier trace (the file sat empty while a large trace was built).
  const Status st = io::write_output(path, chrome_trace_json());
  return st.is_ok() ? st : Status(st.code(), "--profile: " + st.message());
}

std::string Profiler::summary() const {
  struct Row {
    uint64_t calls = 0, flops = 0;
    double us = 0.0;
  };
  std::map<std::string, Row> rows;
  double total = 0.0;
  for (const ProfileEvent& e : events_) {
    Row& r = rows[e.op];
    ++r.calls;
    r.us += e.dur_us;
    r.flops += e.flops;
    total += e.dur_us;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  std::string out = "op                        calls    total ms   share    mean us   GFLOP/s\n";
  char line[160];
  for (const auto& [op, r] : sorted) {
    std::snprintf(line, sizeof line, "%-24s %7llu %11.2f %6.1f%% %10.1f %9.2f\n", op.c_str(),
                  static_cast<unsigned long long>(r.calls), r.us / 1000.0, total > 0 ? 100.0 * r.us / total : 0.0,
                  r.us / static_cast<double>(r.calls), r.us > 0 ? static_cast<double>(r.flops) / (r.us * 1000.0) : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-24s %7zu %11.2f\n", "total", events_.size(), total / 1000.0);
  return out + line;
}

}  // namespace volta
