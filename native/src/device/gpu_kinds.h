// The CUDA device's two builds as device/create.cc and the bindings see them: fsm::cuda (the GPU build, only
// with FSM_HAVE_CUDA) and fsm::simt (the same code on the SIMT emulator, always built). Each defines these in
// device/cuda/kind.cc, compiled once per build.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_call.h"
#include "core/program.h"
#include "device/device.h"

namespace fsm {

/** What a build of the CUDA device finds on this machine (`fsm devices`). */
struct GpuKindInfo {
  int devices = 0;
  /** Why there is none ("no CUDA device (driver: not loaded)"), empty when there are some. */
  std::string none;
  int driverVersion = 0;
  int runtimeVersion = 0;
  /** Per device: its name, memory, multiprocessors and compute capability. */
  struct Gpu {
    std::string name;
    size_t memoryBytes = 0;
    int multiprocessors = 0;
    int major = 0, minor = 0;
  };
  std::vector<Gpu> gpus;
};

/** A kernel call named by its op (the kernel not yet resolved). */
struct OpCall {
  std::string op;
  KernelCall call;
};

#define FSM_DECLARE_GPU_KIND(ns)                                                                                       \
  namespace ns {                                                                                                       \
  /** Local device `local` of this kind; options: firstOrdinal (local device i on GPU (first + i) mod the GPUs   \
   *  seen; default 0), allowTf32. */                                                                                 \
  std::unique_ptr<Device> makeDevice(const Plugin& plugin, size_t local, std::optional<size_t> limitBytes);              \
  GpuKindInfo kindInfo();                                                                                              \
  /** GPU `ordinal`'s free and total memory now (cudaMemGetInfo: what the driver reports, every process's use). */    \
  void memoryInfo(int ordinal, size_t& freeBytes, size_t& totalBytes);                                                  \
  /** Every op this build has a kernel for, sorted. */                                                                 \
  std::vector<std::string> kernelOps();                                                                               \
  /** What a device reserves besides its arena for a program whose kernel calls are these (their data unused):  \
   *  CudaDevice::prepare's bytes. Throws FailureError (description) for an op without a kernel. */              \
  size_t reservedBytesFor(const std::vector<OpCall>& calls);                                                           \
  }

FSM_DECLARE_GPU_KIND(simt)
#ifdef FSM_HAVE_CUDA
FSM_DECLARE_GPU_KIND(cuda)
#endif

#undef FSM_DECLARE_GPU_KIND

}  // namespace fsm
