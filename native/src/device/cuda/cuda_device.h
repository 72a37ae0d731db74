// CudaDevice: one GPU (or a share of one: several virtual devices may use the same GPU) — an arena from one
// cudaMalloc, a compute and a communication stream, the kernels of device/cuda/kernels enqueued on them,
// the plan's waits as CUDA events, and the scratch and cuBLAS workspaces its kernels need reserved before the
// first step. The same source builds the emulated kind (FSM_SIMT: "simt"), whose streams are its host threads.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "device/cuda/blas.h"
#include "device/cuda/kernel.h"
#include "device/cuda/runtime.h"
#include "device/device.h"
#include "device/gpu_kinds.h"

namespace fsm {
namespace FSM_CUDA_NS {

struct CudaOptions {
  /** The GPU (cudaSetDevice's ordinal). */
  int ordinal = 0;
  /** f32 matrix products on TF32 tensor cores (PyTorch's allow_tf32); off: full f32 products. */
  bool allowTf32 = false;
};

class CudaDevice final : public Device {
 public:
  /** Throws FailureError (description) when the GPU cannot be used: no CUDA device, a bad ordinal. */
  CudaDevice(CudaOptions options, std::optional<size_t> limitBytes);
  ~CudaDevice() override;

  const char* kind() const override { return FSM_CUDA_KIND; }
  /** No, even emulated (whose memory is the host's): the emulator must meet a GPU's constraints. */
  bool hostAddressable() const override { return false; }
  Arena allocate(size_t bytes) override;
  void release(Arena& arena) override;
  void zero(int stream, void* data, size_t bytes) override;
  void copyIn(int stream, void* device, const void* host, size_t bytes) override;
  void copyOut(int stream, void* host, const void* device, size_t bytes) override;
  KernelId resolve(const std::string& op) const override;
  bool fillsOutputs(KernelId kernel) const override { return kernelEntry(kernel).fills == FillsOutputs::Yes; }
  void launch(int stream, KernelCall& call) override;
  void prepare(const Preparation& p) override;
  size_t reservedBytes() const override { return reservedBytes_; }
  void* nativeStream(int stream) override { return reinterpret_cast<void*>(streams_[stream]); }
  void bindThread() override { use(); }
  void beginRun(bool traced) override;
  void endRun() override;
  std::optional<DeviceFault> takeFault() override;
  bool timesOnDevice() const override { return true; }
  void traceMark(int stream, size_t instruction, bool begin) override;
  void traceTimings(std::vector<double>& timings) override;
  void record(int stream) override;
  bool wait(int stream, int other, size_t count) override;
  void abortWaits() override;

 private:
  /** Makes this device current on the calling host thread (CUDA's current device is per thread). */
  void use() const;
  /** Waits for stream s to finish; a stall of timeoutSeconds_ with none of its events completing is a fault
   *  (a collective whose peers never came keeps a GPU waiting; the executor's abort then frees it). */
  void drain(int s);
  /** Memory outside the arena (workspaces, the error record), counted in reservedBytes. */
  void* reserve(size_t bytes, const char* what);

  const CudaOptions options_;
  const std::optional<size_t> limitBytes_;
  int multiprocessors_ = 1;
  cudaStream_t streams_[2] = {};
  // events_[s][i]: the event of stream s's (i+1)-th completion, when the other stream waits for it (null when
  // nothing does: recording an event per instruction would cost as much host time as the launch).
  std::vector<cudaEvent_t> events_[2];
  std::vector<uint8_t> waitedOn_[2];  // by count (prepare); empty: not told (every completion gets its event)
  std::vector<void*> reservations_;
  size_t reservedBytes_ = 0;
  void* workspace_[2] = {nullptr, nullptr};  // per stream, kernels' scratch: the largest any of its calls needs
  size_t workspaceBytes_[2] = {0, 0};
  std::unique_ptr<Blas> blas_[2];
  DeviceError* error_ = nullptr;  // device memory
  std::optional<DeviceFault> fault_;
  double timeoutSeconds_ = 60;
  // Traced runs: an event when the run starts (on the compute stream), and a start and an end event per
  // instruction (made on first use, timing enabled; an instruction not reached keeps none).
  bool tracing_ = false;
  cudaEvent_t traceOrigin_ = nullptr;
  std::vector<cudaEvent_t> traceEvents_;  // [2·i] start, [2·i + 1] end
  std::vector<uint8_t> traceMarked_;

  // Per-run event state: instructions each stream has enqueued (its records), and whether the run was aborted.
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t recorded_[2] = {0, 0};
  bool aborted_ = false;
};

/** What a device reserves besides its arena for a program's kernel calls (prepare): the largest scratch any
 *  call needs, the error record, and cuBLAS's workspace when a kernel uses it. */
struct Reservations {
  /** Per stream: the streams run at once, so their kernels' scratch must not share bytes. */
  size_t workspaceBytes[2] = {0, 0};
  bool blas = false;
  size_t total() const;
};
Reservations reservationsFor(const std::vector<const KernelCall*>& calls);

/** GPUs this process sees, and why none when there are none ("no CUDA device (driver: not loaded)"). */
struct CudaPresence {
  int count = 0;
  std::string why;
  int driverVersion = 0;
  int runtimeVersion = 0;
};
CudaPresence cudaPresence();
/** GPU `ordinal`'s name, memory, multiprocessors and compute capability. */
GpuKindInfo::Gpu deviceDescription(int ordinal);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
