// libFuzzer target: whole IR graphs end to end on the CPU backend. Text that parses and verifies
// is compiled (passes, schedule, memory plan) and, when its plan is small, run with seeded params
// and inputs. Every stage must give a result or an error, never a crash, hang or abort.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "volta/runtime.h"
#include "volta/text.h"
#include "volta/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool limited = [] {
    volta::set_memory_limit(size_t{64} << 20);  // plans above it are refused at compile time
    volta::set_cpu_threads(1);
    return true;
  }();
  (void)limited;
  auto g = volta::ir::parse_graph(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!g.is_ok() || !volta::ir::verify_graph(*g).is_ok()) return 0;
  volta::Runtime rt(volta::make_cpu_backend());
  auto plan = rt.compile(*g);
  if (!plan.is_ok()) return 0;
  // Running is what costs time: only plans of at most 256 KiB of values (a few MFLOP at most).
  if ((*plan)->memory.peak_bytes > (size_t{256} << 10)) return 0;
  auto bindings = volta::init_params(*g, 1);
  auto inputs = volta::random_inputs(*g, 1);
  if (!bindings.is_ok() || !inputs.is_ok()) return 0;
  bindings->merge(*inputs);
  (void)rt.run(**plan, *bindings);
  return 0;
}
