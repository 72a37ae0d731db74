// NativeCluster: N virtual CPU devices, each with its own arena and an instruction list split over a compute
// stream and a communication stream joined by completion events, run as one step on 2·N persistent threads
// (started by the first run, parked between runs, joined when the cluster is finalized) that share one
// in-process Communicator, fresh each step.
#pragma once
#include <napi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "kernels/kernel.h"

namespace fsm {

enum class ClusterOp { Kernel, AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Send, Recv };

struct ClusterInstruction {
  std::string op;
  int stream = 0;  // 0: compute, 1: communication
  ClusterOp kind = ClusterOp::Kernel;
  KernelFn kernel;  // kind == Kernel only
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
  /** Its output is an input (fsm_add_inplace): not zeroed before the kernel runs. */
  bool inPlace = false;
  /** A kernel instruction skipped when this f32 scalar slot of its device holds a nonzero value (read once its
   *  waits are met, never written by it); data == nullptr: unguarded. */
  Tensor guard;
  // Communication operands, checked at construction so the hot path only calls the communicator.
  std::vector<int> group;
  int root = -1;
  int peer = -1;
  int tag = 0;
  /** The waits folded per stream: it may start once completed[s] >= need[s] for both streams. */
  size_t need[2] = {0, 0};
};

struct ClusterDevice {
  std::vector<uint8_t> storage;
  uint8_t* arena = nullptr;  // storage aligned up to 64 bytes
  size_t arenaBytes = 0;
  std::vector<Tensor> slots;
  std::vector<ClusterInstruction> instructions;
  std::vector<size_t> streams[2];  // instruction indices of each stream, in list order
  /** Per instruction of the last traced run: start and end, seconds from the run's common origin (empty if none). */
  std::vector<double> timings;

  // Per-run event state, guarded by mutex: how many instructions of each stream have completed, and whether a
  // stream's thread has stopped (done or failed), so nothing waits on a stream that will never move again.
  std::mutex mutex;
  std::condition_variable cv;
  size_t completed[2] = {0, 0};
  // Per stream: the kernel instruction it is running (-1: none) and since when (steady-clock ns), so a
  // communicator timeout can say which devices were busy computing rather than waiting — the stuck one.
  std::atomic<int64_t> inKernel[2] = {-1, -1};
  std::atomic<int64_t> kernelSince[2] = {0, 0};
};

class NativeCluster : public Napi::ObjectWrap<NativeCluster> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit NativeCluster(const Napi::CallbackInfo& info);
  /** Stops and joins the device threads (parked: the JS object, and so this, outlives every run). */
  ~NativeCluster() override;

 private:
  friend class ClusterWorker;
  Napi::Value Set(const Napi::CallbackInfo& info);
  Napi::Value Get(const Napi::CallbackInfo& info);
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value Timings(const Napi::CallbackInfo& info);
  Napi::Value ArenaBytes(const Napi::CallbackInfo& info);
  Napi::Value DeviceCount(const Napi::CallbackInfo& info);
  Napi::Value InjectFault(const Napi::CallbackInfo& info);
  ClusterDevice& device(const Napi::Env& env, const Napi::Value& v) const;
  const Tensor& slot(const Napi::Env& env, const ClusterDevice& dev, const Napi::Value& v) const;
  void checkIdle(const Napi::Env& env) const;

  /** One step on the 2·N device threads (worker thread: wakes them and waits until each has finished the step);
   *  returns the first error, empty when every instruction ran. */
  std::string runStep();
  /** Starts the 2·N device threads if they are not running (worker thread, no step in flight); returns an error. */
  std::string startThreads();
  /** Stops and joins the device threads; they must be parked (no step in flight). */
  void stopThreads();
  /** Device thread (d, s): parked until the run generation passes `seen`, runs its stream, reports, parks again. */
  void deviceThread(size_t d, int s, uint64_t seen);
  void runStream(size_t d, int s, Communicator& comm, std::chrono::steady_clock::time_point origin);
  void execute(size_t d, ClusterInstruction& ins, Communicator& comm);
  void fail(const std::string& message, Communicator& comm);
  /** "; busy computing, not waiting: device D instruction I (op) for T s, ..." (empty when none is). */
  std::string busyNote() const;

  /** A fault armed for the next run only (injectFault; tests of failure handling): instruction `instruction` of
   *  device `device` throws "injected fault" instead of running (Fail), has its float outputs set to NaN
   *  after it runs (NaN), or stops responding there (Hang: until the run is aborted — a peer's communicator
   *  timeout — or, with nobody waiting on it, its own timeout). Set and cleared only while no step runs, so the
   *  device threads just read it. */
  enum class Fault { None, Fail, NaN, Hang };
  Fault fault_ = Fault::None;
  size_t faultDevice_ = 0;
  size_t faultInstruction_ = 0;

  std::vector<std::unique_ptr<ClusterDevice>> devices_;  // unique_ptr: a device's mutex cannot move
  double timeoutSeconds_ = 60;
  int blasThreads_ = 1;
  std::atomic<bool> running_{false};
  bool tracing_ = false;

  // Per-run failure state: the first error is the root cause; later ones (ranks woken by the abort) are echoes.
  std::atomic<bool> failed_{false};
  std::mutex failMutex_;
  std::string firstError_;

  // The device threads: threads_[2·d + s] runs stream s of device d. A step sets comm_ and origin_, then (under
  // poolMutex_) remaining_ = 2·N and ++generation_, and wakes them on poolWake_; each runs its stream, and the
  // last to finish wakes the step on poolDone_. stopping_ ends the parked threads (destructor).
  std::vector<std::thread> threads_;
  std::mutex poolMutex_;
  std::condition_variable poolWake_;
  std::condition_variable poolDone_;
  uint64_t generation_ = 0;
  size_t remaining_ = 0;
  bool stopping_ = false;
  std::optional<Communicator> comm_;  // this step's communicator, built in place (an aborted one is never reused)
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace fsm
