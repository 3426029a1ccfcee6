// Device selection: explicit choices never fall back; `auto` takes CUDA only when it works.
#include "runtime/flag_or_env.h"
#include "volta/backend.h"

namespace volta {

bool Capabilities::supports(ir::Op op) const {
  for (ir::Op o : ops)
    if (o == op) return true;
  return false;
}

bool Capabilities::has(std::string_view feature) const {
  for (const std::string& f : features)
    if (f == feature) return true;
  return false;
}

Result<DeviceKind> parse_device(std::string_view s) {
  if (s == "cpu") return DeviceKind::Cpu;
  if (s == "cuda") return DeviceKind::Cuda;
  if (s == "auto") return DeviceKind::Auto;
  return invalid_argument("unknown device '" + std::string(s) + "' (expected cpu, cuda or auto)");
}

const char* device_name(DeviceKind d) {
  switch (d) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Cuda: return "cuda";
    case DeviceKind::Auto: return "auto";
  }
  return "?";
}

Result<DeviceKind> device_from_flag_or_env(std::string_view flag) {
  return from_flag_or_env(flag, "--device", "VOLTA_DEVICE", DeviceKind::Cpu, parse_device);
}

Result<std::unique_ptr<Backend>> select_backend(DeviceKind kind, const ir::Graph* g) {
  switch (kind) {
    case DeviceKind::Cpu: return make_cpu_backend();
    case DeviceKind::Cuda: return make_cuda_backend();
    case DeviceKind::Auto: {
      auto cuda = make_cuda_backend();
      bool covers = cuda.is_ok();
      if (covers && g)
        for (const ir::Node& n : g->nodes)
          covers = covers && (ir::is_leaf(n.op) || ((*cuda)->capabilities().supports(n.op) && (*cuda)->check_node(*g, n).is_ok()));
      if (covers) return cuda;
      return make_cpu_backend();
    }
  }
  return internal_error("select_backend: unknown device kind");
}

}  // namespace volta
