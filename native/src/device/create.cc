// createDevice (create.h): "cpu" (arena "heap" or "mmap"), "cuda" (the GPU build, when this addon was built
// with nvcc) and "simt" (the CUDA device's code on the SIMT emulator: always built, for tests).
#include "device/create.h"

#include "core/failure.h"
#include "device/cpu/cpu_device.h"
#include "device/gpu_kinds.h"

namespace fsm {

std::unique_ptr<Device> createDevice(const Plugin& p, size_t local, std::optional<size_t> limitBytes, int blasThreads) {
  if (p.kind == "cpu") {
    p.allowOnly({"arena"});
    CpuDevice::ArenaRoute route = CpuDevice::ArenaRoute::Heap;
    if (p.options.has("arena")) {
      auto it = p.options.strings.find("arena");
      if (it == p.options.strings.end() || (it->second != "heap" && it->second != "mmap")) {
        refuse(JsClass::TypeError, {}, p.field + ".arena must be \"heap\" or \"mmap\"");
      }
      route = it->second == "mmap" ? CpuDevice::ArenaRoute::Mmap : CpuDevice::ArenaRoute::Heap;
    }
    return std::make_unique<CpuDevice>(route, limitBytes, blasThreads);
  }
  if (p.kind == "simt") return simt::makeDevice(p, local, limitBytes);
  if (p.kind == "cuda") {
#ifdef FSM_HAVE_CUDA
    return cuda::makeDevice(p, local, limitBytes);
#else
    refuse(JsClass::Error, {}, p.field + ".kind \"cuda\": this fsm was built without CUDA (nvcc was not found when the addon was built: install the CUDA toolkit, then npm run build:native)");
#endif
  }
  refuse(JsClass::TypeError, {}, p.field + ".kind must be \"cpu\", \"cuda\" or \"simt\", got \"" + p.kind + "\"");
}

}  // namespace fsm
