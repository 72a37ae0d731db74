// Kernel scratch: buffers a CPU kernel needs besides its operands (attention's head-major q, k, v and their
// gradients, a loss's per-row terms), kept and reused from call to call. A fresh multi-MiB allocation is an
// mmap whose every page faults on first touch — on a virtual machine that costs more than the kernel's
// arithmetic — so a step allocates nothing once each stream has run its largest call. A program's device keeps
// one set per stream (a stream runs one kernel at a time) for its lifetime; elsewhere (runKernel's host device,
// a kernel thread running a task) the calling thread keeps its own.
#pragma once

#include <cstddef>

namespace fsm {

class KernelScratch {
 public:
  static constexpr int kSlots = 8;
  KernelScratch() = default;
  ~KernelScratch();
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;
  /** Slot `slot`'s buffer, grown to at least `bytes` (64-byte aligned; its contents left from earlier calls). */
  void* get(int slot, size_t bytes);

 private:
  void* data_[kSlots] = {};
  size_t bytes_[kSlots] = {};
};

/** Makes `s` (may be null: the thread's own) the calling thread's scratch while it lives. */
class ScopedKernelScratch {
 public:
  explicit ScopedKernelScratch(KernelScratch* s);
  ~ScopedKernelScratch();
  ScopedKernelScratch(const ScopedKernelScratch&) = delete;
  ScopedKernelScratch& operator=(const ScopedKernelScratch&) = delete;

 private:
  KernelScratch* previous_;
};

/** The slot sgemm keeps a transposed operand in (gemm.cc): kernels that call sgemm keep theirs in others. */
constexpr int kScratchTransposedB = KernelScratch::kSlots - 1;

/** The current scratch's buffer number `slot` (0..7) as at least `count` elements of T, contents unspecified:
 *  a kernel fills what it reads. Valid until the same slot is asked for again on this thread. */
void* scratchBytes(int slot, size_t bytes);
template <typename T>
T* scratch(int slot, size_t count) {
  return static_cast<T*>(scratchBytes(slot, count * sizeof(T)));
}

}  // namespace fsm
