// libFuzzer target: the ONNX importer and the tensor file parsers on arbitrary bytes. Every
// input must give a model or an error; an imported graph must type-check again.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "volta/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)volta::onnx::parse_tensor_proto(bytes, "fuzz.pb");
  (void)volta::onnx::parse_npy(bytes, "fuzz.npy");
  auto m = volta::onnx::import_model(bytes, "fuzz.onnx");
  if (!m.is_ok()) return 0;
  volta::ir::Graph g = m->graph;
  if (!volta::ir::infer_types(g).is_ok()) __builtin_trap();  // the importer's types are the rules' types
  return 0;
}
