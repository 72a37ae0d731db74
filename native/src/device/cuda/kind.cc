// This build's entry points for device/create.cc and the bindings (device/gpu_kinds.h): making a device from
// a description's options, and what the machine has.
#include <cmath>

#include "core/failure.h"
#include "device/cuda/cuda_device.h"
#include "device/gpu_kinds.h"

namespace fsm {
namespace FSM_CUDA_NS {

std::unique_ptr<Device> makeDevice(const Plugin& p, size_t local, std::optional<size_t> limitBytes) {
  p.allowOnly({"firstOrdinal", "allowTf32"});
  CudaOptions o;
  size_t first = 0;
  if (p.options.has("firstOrdinal")) {
    auto it = p.options.numbers.find("firstOrdinal");
    if (it == p.options.numbers.end() || !std::isfinite(it->second) || it->second < 0 || std::floor(it->second) != it->second) {
      refuse(JsClass::TypeError, {}, p.field + ".firstOrdinal must be a non-negative integer");
    }
    first = static_cast<size_t>(it->second);
  }
  // Local device i on GPU (first + i) mod the GPUs seen: several devices share a GPU when there are fewer.
  const CudaPresence presence = cudaPresence();
  if (presence.count == 0) refuse(JsClass::Error, {}, presence.why);
  o.ordinal = static_cast<int>((first + local) % static_cast<size_t>(presence.count));
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
  for (int d = 0; d < p.count; d++) info.gpus.push_back(deviceDescription(d));
  return info;
}

std::vector<std::string> kernelOps() { return kernelNames(); }

size_t reservedBytesFor(const std::vector<OpCall>& calls) {
  std::vector<KernelCall> resolved;
  resolved.reserve(calls.size());
  for (const OpCall& c : calls) {
    resolved.push_back(c.call);
    resolved.back().kernel = findKernel(c.op);
    if (resolved.back().kernel < 0) refuse(JsClass::Error, {}, "not implemented: native kernel for op '" + c.op + "' on device kind " FSM_CUDA_KIND);
  }
  std::vector<const KernelCall*> pointers;
  for (const KernelCall& c : resolved) pointers.push_back(&c);
  return reservationsFor(pointers).total();
}

void memoryInfo(int ordinal, size_t& freeBytes, size_t& totalBytes) {
  const CudaPresence presence = cudaPresence();
  if (ordinal < 0 || ordinal >= presence.count) refuse(JsClass::RangeError, {}, presence.count == 0 ? presence.why : "CUDA device " + std::to_string(ordinal) + " does not exist");
  cudaSetDevice(ordinal);
  if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) refuse(JsClass::Error, {}, "CUDA: cannot read the device's memory");
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
