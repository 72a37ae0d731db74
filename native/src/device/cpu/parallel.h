// Kernel threads: a CPU device's helpers for its kernels' long loops (elementwise ops, per-column sums), as
// many threads as the device's share of the cores (its OpenBLAS threads, cpu_device.h), the launching thread
// one of them. A kernel reaches them through parallelFor while its device has made them the calling thread's
// (ScopedKernelThreads, around each launch); elsewhere (runKernel's host device, a device given one core)
// parallelFor runs its loop inline. Chunks never change what a loop computes: each index is one chunk's, and
// a reduction is split only along what it keeps (every sum still adds in its own order), so results are the
// same bits whatever the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>

namespace fsm {

class KernelThreads {
 public:
  /** `threads` in all: threads − 1 workers, waiting on a condition variable between loops. */
  explicit KernelThreads(int threads);
  ~KernelThreads();
  KernelThreads(const KernelThreads&) = delete;
  KernelThreads& operator=(const KernelThreads&) = delete;

  int threads() const { return threads_; }
  /** body(c) for every c in [0, chunks), returning once all are done. The caller takes chunks too, and each
   *  chunk goes to whichever thread asks first, so a worker slow to wake (a shared machine) costs only the
   *  chunks it never took. A call while another is running (the device's other stream) runs its chunks on
   *  the caller, and so does a loop nested in a chunk (no thread has kernel threads while it runs one). The
   *  first exception a chunk throws is rethrown here, after the chunks under way finish. */
  void run(int64_t chunks, const std::function<void(int64_t)>& body);

 private:
  struct State;
  std::unique_ptr<State> s_;
  int threads_;
};

/** The calling thread's kernel threads, or null (loops run inline). */
KernelThreads* currentKernelThreads();

/** Makes `threads` (may be null) the calling thread's kernel threads while it lives. */
class ScopedKernelThreads {
 public:
  explicit ScopedKernelThreads(KernelThreads* threads);
  ~ScopedKernelThreads();
  ScopedKernelThreads(const ScopedKernelThreads&) = delete;
  ScopedKernelThreads& operator=(const ScopedKernelThreads&) = delete;

 private:
  KernelThreads* previous_;
};

/** body(begin, end) over [0, n) in contiguous chunks (about four per thread, each a multiple of 16 elements
 *  and at least `grain`) on the current kernel threads; one call body(0, n) on this thread when there are
 *  none or n < 2·grain. Every index is in exactly one chunk. */
template <typename Body>
void parallelFor(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  KernelThreads* pool = currentKernelThreads();
  grain = std::max<int64_t>(grain, 16);
  if (pool == nullptr || pool->threads() < 2 || n < 2 * grain) {
    body(int64_t{0}, n);
    return;
  }
  const int64_t wanted = std::min<int64_t>(n / grain, 4 * static_cast<int64_t>(pool->threads()));
  const int64_t size = ((n + wanted - 1) / wanted + 15) / 16 * 16;
  const int64_t chunks = (n + size - 1) / size;
  pool->run(chunks, [&](int64_t c) { body(c * size, std::min(n, (c + 1) * size)); });
}

/** Floating-point operations below which a loop of tasks stays on its thread, the work too little for a
 *  kernel thread's wake-up and join: gpt-tiny's attention at [8,16,32] took 1.25–1.8× as long on 2 threads as
 *  on one, forward and backward, when its 16 tasks of 16 kFLOP each went to both, and the same as one thread
 *  under this bound. */
constexpr double kThreadedTaskFlops = 1 << 20;

/** body(i) for every i in [0, n), each task on one of the current kernel threads (all on this thread when
 *  there are none, or when the `flops` they do in all are too few to be worth a wake-up): for a few dozen
 *  independent pieces of work. */
template <typename Body>
void parallelTasks(int64_t n, double flops, Body&& body) {
  KernelThreads* pool = currentKernelThreads();
  if (pool == nullptr || pool->threads() < 2 || n < 2 || flops < kThreadedTaskFlops) {
    for (int64_t i = 0; i < n; i++) body(i);
    return;
  }
  pool->run(n, [&](int64_t i) { body(i); });
}

}  // namespace fsm
