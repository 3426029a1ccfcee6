// libFuzzer target: the ONNX importer and the tensor and value file parsers on arbitrary bytes. Every
// input must give a model or an error; an imported graph must type-check again, and exporting
// it must give a model that imports again (or a clean error for what export refuses).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "volta/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)volta::onnx::parse_tensor_proto(bytes, "fuzz.pb");
  (void)volta::onnx::parse_npy(bytes, "fuzz.npy");
  if (auto v = volta::onnx::parse_value(std::string(bytes), "fuzz.pb"); v.is_ok()) {  // tensor, sequence or optional
    for (bool sequence : {false, true})
      for (bool optional : {false, true}) {
        volta::onnx::ValueFile w = *v;
        (void)volta::onnx::as_declared(&w, sequence, optional, "fuzz.pb");
      }
  }
  auto m = volta::onnx::import_model(bytes, "fuzz.onnx");
  if (!m.is_ok()) return 0;
  volta::ir::Graph g = m->graph;
  if (!volta::ir::infer_types(g).is_ok()) __builtin_trap();  // the importer's types are the rules' types
  auto out = volta::onnx::export_model(m->graph, m->params);
  if (out.is_ok() && !volta::onnx::import_model(*out, "fuzz.export.onnx").is_ok()) __builtin_trap();
  return 0;
}
