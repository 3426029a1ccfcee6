// libFuzzer target: the checkpoint parser and the TinyLM checkpoint reader on arbitrary bytes.
// Anything it accepts must serialize back to bytes it accepts again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "train/lm.h"
#include "volta/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto c = volta::io::parse_checkpoint(bytes, "fuzz");
  if (!c.is_ok()) return 0;
  auto again = volta::io::parse_checkpoint(volta::io::serialize_checkpoint(*c), "again");
  if (!again.is_ok()) __builtin_trap();
  (void)volta::train::from_checkpoint(*c, "fuzz");
  return 0;
}
