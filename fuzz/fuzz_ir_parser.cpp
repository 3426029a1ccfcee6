// libFuzzer target: arbitrary bytes through the IR text parser.
//
// Parsing must never crash. When it succeeds, printing is canonical: the printed text must
// re-parse, and printing the re-parsed graph must give the same text. verify_graph must
// accept or reject the parsed graph without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "volta/text.h"
#include "volta/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = volta::ir::parse_graph(text, "fuzz");
  if (!g.is_ok()) return 0;

  std::string printed = volta::ir::print_graph(*g);
  auto again = volta::ir::parse_graph(printed, "printed");
  if (!again.is_ok()) {
    std::fprintf(stderr, "printed graph does not re-parse: %s\n---\n%s---\n", again.status().to_string().c_str(),
                 printed.c_str());
    __builtin_trap();
  }
  std::string reprinted = volta::ir::print_graph(*again);
  if (reprinted != printed) {
    std::fprintf(stderr, "print is not a fixed point\n--- first\n%s--- second\n%s---\n", printed.c_str(),
                 reprinted.c_str());
    __builtin_trap();
  }

  volta::Status verified = volta::ir::verify_graph(*g);
  (void)verified;
  return 0;
}
