// Device: what the executor needs from one device (a CPU virtual device, later a GPU) — its memory (an arena),
// its kernels by id, and its two streams with completion events. The executor knows no device kind
// concretely: kinds implement this interface and are named in one place (device/create.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_call.h"
#include "core/program.h"
#include "core/tensor.h"

namespace fsm {

/** A device's memory for one program: `bytes` from `base` (an address in the device's memory, which is not
 *  the host's on a GPU), 64-byte aligned and zero-filled. `handle` is the kind's own bookkeeping. */
struct Arena {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  size_t handle = 0;
};

/** An error a device found only once its streams finished (a GPU kernel's index check, an asynchronous CUDA
 *  error): the instruction to blame (-1 when unknown) and the root cause. */
struct DeviceFault {
  int64_t instruction = -1;
  std::string message;
};

class Device {
 public:
  virtual ~Device() = default;

  /** "cpu": the kind named in descriptions and messages. */
  virtual const char* kind() const = 0;
  /** Whether its arena's addresses are host memory a communicator may read and write directly (a CPU's); a GPU's
   *  buffers reach a host communicator through copies (comm/staged.h). */
  virtual bool hostAddressable() const { return true; }

  // --- memory ---
  /** A zero-filled arena, ready so a step never faults pages in. Throws FailureError kind oom (arenaBytes, and
   *  limitBytes when over the device's memory limit); the caller adds which device. */
  virtual Arena allocate(size_t bytes) = 0;
  /** Throws the oom FailureError every kind gives for an arena over the device's memory limit (when one is set). */
  static void refuseOverLimit(size_t bytes, std::optional<size_t> limitBytes);
  virtual void release(Arena& arena) = 0;
  /** Zeroes `bytes` at `data` (device memory), ordered on `stream`. */
  virtual void zero(int stream, void* data, size_t bytes) = 0;
  /** Host ↔ device copies, ordered after `stream`'s earlier work; they return once the bytes are in place. */
  virtual void copyIn(int stream, void* device, const void* host, size_t bytes) = 0;
  virtual void copyOut(int stream, void* host, const void* device, size_t bytes) = 0;

  // --- kernels ---
  /** The kernel for `op`; throws FailureError (kind description) "not implemented: native kernel for op 'X' on
   *  device kind K" when this kind has none. Called once per instruction, when a program is bound. */
  virtual KernelId resolve(const std::string& op) const = 0;
  /** Runs (or enqueues) a resolved call (call.kernel) on `stream`; a kernel's own check failing throws
   *  std::exception. Outputs are not zeroed here (run() does that). */
  virtual void launch(int stream, KernelCall& call) = 0;
  /** The kernel contract in one place: zeroes the outputs `call.zero` flags (outputsToZero) unless the kernel
   *  writes them all anyway (fillsOutputs), then launches. */
  void run(int stream, KernelCall& call);
  /** Whether `kernel` writes every element of every output, so zeroing them first is wasted work. */
  virtual bool fillsOutputs(KernelId kernel) const { (void)kernel; return false; }
  /** What the device is told of its program once it is bound, before any run. */
  struct Preparation {
    /** Every kernel call, operands over the arena: a kind reserves what its kernels need besides the arena (a
     *  GPU's scratch and cuBLAS workspaces), so nothing is allocated during a step. */
    std::vector<const KernelCall*> calls;
    /** Per stream, ascending: the completion counts of it the other stream waits for (a kind that records an
     *  event per completion, CUDA, records only these). */
    std::vector<size_t> waitedFor[kStreams];
    /** How long a run may go without progress before the device gives up on it (a GPU waiting on a peer that
     *  never comes): the communicator's timeout. */
    double timeoutSeconds = 60;
  };
  /** Throws FailureError (oom) when the reservations do not fit. */
  virtual void prepare(const Preparation& p) { (void)p; }
  /** Bytes the device holds besides its arenas (prepare's reservations). */
  virtual size_t reservedBytes() const { return 0; }

  // --- for communicators that enqueue on the device's streams (NCCL) ---
  /** The kind's own handle of `stream` (a cudaStream_t), or null when its streams are host threads. */
  virtual void* nativeStream(int stream) { (void)stream; return nullptr; }
  /** Makes this device the calling thread's current one (cudaSetDevice). */
  virtual void bindThread() {}

  // --- streams and events: stream 0 computes, stream 1 communicates; each is driven by its own host thread ---
  /** A run begins: every stream's completion count restarts at 0 and a previous abort is cleared. Also the
   *  place for per-run settings a kind holds while a step runs (the CPU's BLAS threads). `traced`: the run's
   *  instructions are timed (a device that times them itself marks the run's start). */
  virtual void beginRun(bool traced) = 0;
  /** The run is over (every stream stopped): undoes beginRun's settings. A kind whose streams run
   *  asynchronously (CUDA) waits for them here. */
  virtual void endRun() = 0;
  // --- traces: a kind whose streams run asynchronously (CUDA) times instructions itself ---
  /** Whether instruction timings come from the device (the host's clock would time enqueueing only). */
  virtual bool timesOnDevice() const { return false; }
  /** Marks where instruction i of `stream` starts (begin) or ends on the device. */
  virtual void traceMark(int stream, size_t instruction, bool begin) { (void)stream; (void)instruction; (void)begin; }
  /** After endRun: per instruction [start, end] in seconds from the run's start on the device. */
  virtual void traceTimings(std::vector<double>& timings) { (void)timings; }
  /** An error found by endRun (nothing for kinds whose kernels throw where they fail), cleared by the call. */
  virtual std::optional<DeviceFault> takeFault() { return std::nullopt; }
  /** Marks the next instruction of `stream` complete (a CUDA device records the stream's next event). */
  virtual void record(int stream) = 0;
  /** Makes `stream` wait until `other` has recorded `count` completions (a CUDA device waits on that event with
   *  cudaStreamWaitEvent; the CPU blocks the calling host thread). False when woken by abortWaits instead. */
  virtual bool wait(int stream, int other, size_t count) = 0;
  /** Wakes every wait of this run, which then returns false: the step failed elsewhere. Any thread. */
  virtual void abortWaits() = 0;
};

}  // namespace fsm
