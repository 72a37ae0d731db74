// CpuDevice: a virtual device on this machine's CPU — an arena in host memory (two routes: the heap, or an
// anonymous mmap), the kernels of device/cpu/kernels run inline on the calling stream's host thread (their long
// loops shared with the device's kernel threads, parallel.h), and completion counters that a waiting host
// thread blocks on.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>

#include "device/cpu/gemm.h"
#include "device/cpu/parallel.h"
#include "device/cpu/scratch.h"
#include "device/device.h"

namespace fsm {

class CpuDevice final : public Device {
 public:
  /** heap: a 64-byte aligned allocation touched once (memset) so steps never page-fault; mmap: an anonymous
   *  mapping populated up front (MAP_POPULATE) — a second route through the same interface. */
  enum class ArenaRoute { Heap, Mmap };

  /** limitBytes: the device's memory (an arena larger is refused before it is allocated); blasThreads: OpenBLAS
   *  threads per sgemm while a run is on (0: leave the setting alone, as runKernel does), and the device's
   *  kernel threads (parallel.h; none for 0 or 1: kernels' loops run on the stream's thread alone). */
  CpuDevice(ArenaRoute route, std::optional<size_t> limitBytes, int blasThreads);

  const char* kind() const override { return "cpu"; }
  Arena allocate(size_t bytes) override;
  void release(Arena& arena) override;
  void zero(int stream, void* data, size_t bytes) override;
  void copyIn(int stream, void* device, const void* host, size_t bytes) override;
  void copyOut(int stream, void* host, const void* device, size_t bytes) override;
  KernelId resolve(const std::string& op) const override;
  void launch(int stream, KernelCall& call) override;
  bool fillsOutputs(KernelId kernel) const override;
  void beginRun(bool traced) override;
  void endRun() override;
  void record(int stream) override;
  bool wait(int stream, int other, size_t count) override;
  void abortWaits() override;

 private:
  const ArenaRoute route_;
  const std::optional<size_t> limitBytes_;
  const int blasThreads_;
  std::optional<ScopedBlasThreads> blas_;  // held from beginRun to endRun
  std::unique_ptr<KernelThreads> kernelThreads_;  // blasThreads_ > 1
  // Per stream (each runs one kernel at a time); hostDevice's calls come from any thread and use their own.
  bool streamScratch_ = true;
  KernelScratch scratch_[2];
  friend CpuDevice& hostDevice();

  // Per-run event state: how many instructions of each stream have completed, and whether the run was aborted.
  // waitingFor_[s]: the count of stream s the other stream is blocked on (0: none), so record wakes it only
  // once that count is reached, not after every instruction (each wake-up is a context switch).
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t completed_[2] = {0, 0};
  size_t waitingFor_[2] = {0, 0};
  bool aborted_ = false;
};

/** A CPU device for kernels called outside any program (runKernel, timeKernel): heap arenas, no limit, BLAS
 *  threads as they are. */
CpuDevice& hostDevice();

}  // namespace fsm
