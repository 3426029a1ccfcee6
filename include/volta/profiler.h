// Per-op timing of Runtime::run: every executed node becomes an event (op, node, shapes, bytes,
// FLOPs, start, duration), exported as a Chrome trace (Perfetto, chrome://tracing) or summed
// into a per-op table.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "volta/ir.h"

namespace volta {

struct ProfileEvent {
  std::string op;
  std::string node;
  std::string shapes;  // "f32[12,64,128] <- f32[12,64,128], f32[128,384]"
  uint64_t bytes = 0;  // inputs + output
  uint64_t flops = 0;
  double start_us = 0.0;
  double dur_us = 0.0;
};

class Profiler {
 public:
  Profiler();
  // Called by the Runtime around each node.
  void record(const ir::Graph& g, const ir::Node& n, std::chrono::steady_clock::time_point start,
              std::chrono::steady_clock::time_point end);
  // A named span that is not a node (an optimizer update, an evaluation).
  void record_span(const std::string& name, std::chrono::steady_clock::time_point start,
                   std::chrono::steady_clock::time_point end);

  const std::vector<ProfileEvent>& events() const { return events_; }
  std::string chrome_trace_json() const;
  Status write_chrome_trace(const std::string& path) const;
  // Per-op table: calls, total ms, share, mean us, GFLOP/s; sorted by total time.
  std::string summary() const;

 private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<ProfileEvent> events_;
};

// FLOPs one node performs (2*M*N*K for a matmul, about one per element otherwise).
uint64_t node_flops(const ir::Graph& g, const ir::Node& n);

}  // namespace volta
