// libFuzzer target: the hash-trace reader and comparison (volta diff-trace) on arbitrary text.
// The input is two traces separated by the first NUL byte (or split in half); the comparison of
// a trace with itself must find it identical.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "volta/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  size_t cut = bytes.find('\0');
  std::string_view a = bytes.substr(0, cut == std::string_view::npos ? size / 2 : cut);
  std::string_view b = bytes.substr(cut == std::string_view::npos ? size / 2 : cut + 1);
  (void)volta::diff_trace_texts(a, b, "/nonexistent/a", "/nonexistent/b");
  auto self = volta::diff_trace_texts(a, a, "/nonexistent/a", "/nonexistent/a");
  if (self.is_ok() && !self->same) __builtin_trap();
  return 0;
}
