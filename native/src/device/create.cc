// createDevice (create.h): "cpu" (arena "heap" or "mmap"); "cuda" is refused as not built yet (FSM_CUDA).
#include "device/create.h"

#include "core/failure.h"
#include "device/cpu/cpu_device.h"

namespace fsm {

std::unique_ptr<Device> createDevice(const Plugin& p, std::optional<size_t> limitBytes, int blasThreads) {
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
  if (p.kind == "cuda") refuse(JsClass::Error, {}, "device kind cuda is not implemented yet (this addon builds the cpu device only)");
  refuse(JsClass::TypeError, {}, p.field + ".kind must be \"cpu\", got \"" + p.kind + "\"");
}

}  // namespace fsm
