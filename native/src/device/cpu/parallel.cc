// Kernel threads (parallel.h): workers that sleep on a condition variable until a loop is posted, then take
// chunks from a shared counter until none are left.
#include "device/cpu/parallel.h"

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fsm {

namespace {
thread_local KernelThreads* current = nullptr;
}  // namespace

KernelThreads* currentKernelThreads() { return current; }

ScopedKernelThreads::ScopedKernelThreads(KernelThreads* threads) : previous_(current) { current = threads; }

ScopedKernelThreads::~ScopedKernelThreads() { current = previous_; }

struct KernelThreads::State {
  std::mutex mutex;
  std::condition_variable wake;  // workers: a loop was posted, or stop
  std::condition_variable idle;  // the caller: the last worker inside the loop left it
  std::mutex busy;               // one loop at a time; a second caller runs inline
  const std::function<void(int64_t)>* body = nullptr;  // the posted loop, null once the caller has finished it
  int64_t chunks = 0;
  std::atomic<int64_t> next{0};
  uint64_t generation = 0;  // loops posted so far
  int active = 0;           // workers inside the posted loop
  bool stop = false;
  std::exception_ptr error;
  std::vector<std::thread> workers;

  /** Takes chunks until none are left; a throwing chunk records the first error and ends the handing out. */
  void work(const std::function<void(int64_t)>& fn, int64_t count) {
    for (int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < count;) {
      try {
        fn(c);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mutex);
        if (!error) error = std::current_exception();
        next.store(count, std::memory_order_relaxed);
      }
    }
  }

  void loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mutex);
    for (;;) {
      // A worker that wakes after the caller finished the loop alone finds no body and sleeps again.
      wake.wait(lk, [&] { return stop || (generation != seen && body != nullptr); });
      if (stop) return;
      seen = generation;
      const std::function<void(int64_t)>* fn = body;
      const int64_t count = chunks;
      active++;
      lk.unlock();
      work(*fn, count);
      lk.lock();
      if (--active == 0) idle.notify_one();
    }
  }
};

KernelThreads::KernelThreads(int threads) : s_(std::make_unique<State>()), threads_(std::max(1, threads)) {
  for (int i = 1; i < threads_; i++) s_->workers.emplace_back([st = s_.get()] { st->loop(); });
}

KernelThreads::~KernelThreads() {
  {
    std::lock_guard<std::mutex> lk(s_->mutex);
    s_->stop = true;
  }
  s_->wake.notify_all();
  for (std::thread& t : s_->workers) t.join();
}

void KernelThreads::run(int64_t chunks, const std::function<void(int64_t)>& body) {
  State& s = *s_;
  ScopedKernelThreads nested(nullptr);  // loops inside a chunk run inline (workers have none already)
  std::unique_lock<std::mutex> mine(s.busy, std::try_to_lock);
  if (!mine.owns_lock() || s.workers.empty() || chunks < 2) {
    for (int64_t c = 0; c < chunks; c++) body(c);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(s.mutex);
    s.body = &body;
    s.chunks = chunks;
    s.next.store(0, std::memory_order_relaxed);
    s.generation++;
  }
  s.wake.notify_all();
  s.work(body, chunks);
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lk(s.mutex);
    s.body = nullptr;
    s.idle.wait(lk, [&] { return s.active == 0; });
    error = s.error;
    s.error = nullptr;
  }
  if (error) std::rethrow_exception(error);
}


}  // namespace fsm
