// This build's entry points for device/create.cc and the bindings (device/gpu_kinds.h): making a device from
// a description's options, and what the machine has.
#include <cmath>

#include "core/failure.h"
#include "device/cuda/cuda_device.h"
#include "device/gpu_kinds.h"

namespace fsm {
namespace FSM_CUDA_NS {

std::unique_ptr<Device> makeDevice(const Plugin& p, size_t local, std::optional<size_t> limitBytes) {
  p.allowOnly({"ordinal", "allowTf32"});
  CudaOptions o;
  if (p.options.has("ordinal")) {
    auto it = p.options.numbers.find("ordinal");
    if (it == p.options.numbers.end() || !std::isfinite(it->second) || it->second < 0 || std::floor(it->second) != it->second) {
      refuse(JsClass::TypeError, {}, p.field + ".ordinal must be a non-negative integer");
    }
    o.ordinal = static_cast<int>(it->second);
  } else {
    const CudaPresence presence = cudaPresence();
    if (presence.count == 0) refuse(JsClass::Error, {}, presence.why);
    o.ordinal = static_cast<int>(local % static_cast<size_t>(presence.count));
  }
  if (p.options.has("allowTf32")) {
    auto it = p.options.bools.find("allowTf32");
    if (it == p.options.bools.end()) refuse(JsClass::TypeError, {}, p.field + ".allowTf32 must be a boolean");
    o.allowTf32 = it->second;
  }
  return std::make_unique<CudaDevice>(o, limitBytes);
}

GpuKindInfo kindInfo() {
  const CudaPresence p = cudaPresence();
  GpuKindInfo info;
  info.devices = p.count;
  info.none = p.why;
  info.driverVersion = p.driverVersion;
  info.runtimeVersion = p.runtimeVersion;
  for (int d = 0; d < p.count; d++) {
    GpuKindInfo::Gpu g;
    deviceDescription(d, g.name, g.memoryBytes, g.multiprocessors, g.major, g.minor);
    info.gpus.push_back(g);
  }
  return info;
}

std::vector<std::string> kernelOps() { return kernelNames(); }

}  // namespace FSM_CUDA_NS
}  // namespace fsm
