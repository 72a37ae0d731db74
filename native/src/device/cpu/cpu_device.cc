// CpuDevice (cpu_device.h): arenas by route, kernels from the CPU table, and the completion counters that
// stand in for a GPU's events.
#include "device/cpu/cpu_device.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "core/failure.h"
#include "core/program.h"
#include "core/yield_wait.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

[[noreturn]] void outOfMemory(size_t bytes) {
  Failure f = failureAt(FailureKind::Oom, JsClass::Error, {}, "cannot allocate its arena of " + std::to_string(bytes) + " bytes: out of memory");
  f.arenaBytes = bytes;
  throw FailureError(f);
}

}  // namespace

CpuDevice::CpuDevice(ArenaRoute route, std::optional<size_t> limitBytes, int blasThreads)
    : route_(route), limitBytes_(limitBytes), blasThreads_(blasThreads) {
  if (blasThreads > 1) kernelThreads_ = std::make_unique<KernelThreads>(blasThreads);
}

Arena CpuDevice::allocate(size_t bytes) {
  refuseOverLimit(bytes, limitBytes_);
  Arena arena;
  arena.bytes = bytes;
  if (route_ == ArenaRoute::Mmap) {
    // Anonymous pages are zero; MAP_POPULATE faults every one in now rather than during a step.
    const size_t page = 4096, length = bytes == 0 ? page : (bytes + page - 1) / page * page;
    if (length < bytes) outOfMemory(bytes);
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) outOfMemory(bytes);
    arena.base = static_cast<uint8_t*>(p);
    arena.handle = length;
    return arena;
  }
  // aligned_alloc wants a multiple of the alignment; the memset touches every page once, so steps never fault.
  const size_t length = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  if (length < bytes) outOfMemory(bytes);
  void* p = std::aligned_alloc(64, length);
  if (p == nullptr) outOfMemory(bytes);
  std::memset(p, 0, length);
  arena.base = static_cast<uint8_t*>(p);
  arena.handle = length;
  return arena;
}

void CpuDevice::release(Arena& arena) {
  if (arena.base == nullptr) return;
  if (route_ == ArenaRoute::Mmap) munmap(arena.base, arena.handle);
  else std::free(arena.base);
  arena = Arena();
}

void CpuDevice::zero(int, void* data, size_t bytes) { std::memset(data, 0, bytes); }

void CpuDevice::copyIn(int, void* device, const void* host, size_t bytes) { std::memcpy(device, host, bytes); }

void CpuDevice::copyOut(int, void* host, const void* device, size_t bytes) { std::memcpy(host, device, bytes); }

KernelId CpuDevice::resolve(const std::string& op) const {
  const KernelId id = findCpuKernel(op);
  if (id < 0) refuse(JsClass::Error, {}, "not implemented: native kernel for op '" + op + "' on device kind cpu");
  return id;
}

void CpuDevice::launch(int stream, KernelCall& call) {
  ScopedKernelThreads threads(kernelThreads_.get());
  ScopedKernelScratch scratch(streamScratch_ ? &scratch_[stream == kCommStream ? 1 : 0] : nullptr);
  cpuKernel(call.kernel)(call.inputs, call.outputs, call.attrs);
}

bool CpuDevice::fillsOutputs(KernelId kernel) const { return cpuKernelFillsOutputs(kernel); }

void CpuDevice::beginRun(bool) {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    completed_[0] = completed_[1] = 0;
    waitingFor_[0] = waitingFor_[1] = 0;
    aborted_ = false;
  }
  // Held for the whole run so it covers every kernel of the step (the devices' threads share the cores).
  if (blasThreads_ > 0) blas_.emplace(blasThreads_);
}

void CpuDevice::endRun() { blas_.reset(); }

void CpuDevice::record(int stream) {
  bool reached;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    reached = ++completed_[stream] == waitingFor_[stream];
  }
  if (reached) cv_.notify_all();
}

bool CpuDevice::wait(int, int other, size_t count) {
  std::unique_lock<std::mutex> lk(mutex_);
  yieldBeforeSleep(lk, [&] { return aborted_ || completed_[other] >= count; });
  if (completed_[other] < count) {
    waitingFor_[other] = count;
    cv_.wait(lk, [&] { return aborted_ || completed_[other] >= count; });
    waitingFor_[other] = 0;
  }
  return completed_[other] >= count;
}

void CpuDevice::abortWaits() {
  {
    std::lock_guard<std::mutex> lk(mutex_);  // a waiter between its check and its wait cannot miss this
    aborted_ = true;
  }
  cv_.notify_all();
}

CpuDevice& hostDevice() {
  static CpuDevice& device = []() -> CpuDevice& {
    static CpuDevice d(CpuDevice::ArenaRoute::Heap, std::nullopt, 0);
    d.streamScratch_ = false;  // runKernel calls it from any thread, at once
    return d;
  }();
  return device;
}

}  // namespace fsm
