// Executor: THE executor of device programs — the local ranks of a world (this process's devices), each with
// a compute and a communication stream run by persistent host threads (started by the first run, parked
// between runs, joined on destruction) and ordered by the device's events. It reaches memory and kernels only
// through Device and other ranks only through Communicator. The first failure anywhere aborts the communicator
// and wakes every waiting stream, so a step fails with its root cause instead of hanging; nothing exits the
// process. One device with an empty communication stream runs its compute stream on the calling thread. CPU
// devices that would outnumber the cores with a thread per stream instead take turns on a few host threads
// (Program::hostThreads): each thread runs whichever device can go, as far as it goes without waiting for
// another device, its collectives split in two (Communicator::defer) so that no thread waits for a member
// that only a thread could run.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "core/failure.h"
#include "core/program.h"
#include "device/device.h"

namespace fsm {

/** A fault armed for the next run only (tests of failure handling): the instruction throws "injected fault"
 *  instead of running (Fail), has its float outputs set to NaN after it runs (NaN), or stops responding there
 *  (Hang: until the run is aborted — a peer's communicator timeout — or, with nobody waiting on it, after three
 *  timeouts, so that peers waiting on it always time out first). */
enum class Fault { None, Fail, NaN, Hang };

class Executor {
 public:
  /** Binds `program` to one device per local device (kernels resolved, arenas allocated, slots and operands
   *  bound) and registers every group with `comm`. Throws FailureError: description (an op the device kind
   *  lacks), oom (an arena), both naming the device. */
  Executor(Program program, std::vector<std::unique_ptr<Device>> devices, std::unique_ptr<Communicator> comm);
  /** Stops and joins the pool's threads (parked: the owner outlives every run). */
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /** One step of every local device (a worker thread; one run at a time, and none of the accessors below
   *  meanwhile). Returns the first failure, or nothing when every instruction ran. With `trace`, records each
   *  instruction's start and end (timings()). */
  std::optional<Failure> run(bool trace);

  size_t localDevices() const { return locals_.size(); }
  size_t arenaBytes(size_t local) const;
  /** What the device holds besides its arena (Device::reservedBytes: a GPU's scratch and workspaces). */
  size_t reservedBytes(size_t local) const;
  size_t slotCount(size_t local) const;
  size_t instructionCount(size_t local) const;
  const Tensor& slot(size_t local, size_t id) const;
  /** Copies a slot's bytes in from / out to host memory, through the device. */
  void write(size_t local, size_t id, const void* host);
  void read(size_t local, size_t id, void* host) const;
  /** The last traced run: start and end per instruction, seconds from the run's origin shared by all devices. */
  const std::vector<double>& timings(size_t local) const;
  void arm(size_t local, size_t instruction, Fault fault);
  std::array<uint64_t, kCommCalls> communicatorCalls() const { return comm_->calls(); }
  Communicator::BytesSent communicatorBytes() const { return comm_->bytesSent(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Local;

  /** Starts the pool's threads (no run in flight): 2·N stream threads, or the host threads that take turns on
   *  the devices; a failure to start is returned. */
  std::optional<Failure> startThreads();
  /** Stops and joins the pool's threads; they must be parked. */
  void stopThreads();
  /** Pool thread `index`: parked until the run generation passes `seen`, runs its share of the step (stream
   *  index mod 2 of device index / 2, or the turns of host thread index + 1), reports, parks again. */
  void poolThread(size_t index, uint64_t seen);
  /** Runs stream s of local device d to its end or the run's failure. */
  void runStream(size_t d, int s);
  /** Host thread w's turns: runs devices that can go (advance) until every device is done or the run fails;
   *  waits for progress when none can go. */
  void takeTurns(size_t w);
  /** Takes a device no other host thread holds and that has not finished (false: neither). */
  bool claim(Local& L);
  /** Runs local device d's two streams as far as they go without waiting for another device (blocking in
   *  the communicator instead where it cannot defer): the communication stream's next instruction when the
   *  compute stream has done what it needs (it releases peers), unless it is a receive whose message is not
   *  there yet; else the compute stream's. Returns whether anything ran or completed. */
  bool advance(size_t d);
  /** Waits until another thread makes progress (a communication instruction ran, a device finished, the run
   *  failed) after `seen`; with none for the timeout, fails the run as timed out, naming what a device waits
   *  for. */
  void awaitProgress(uint64_t seen);
  /** Tells the host threads that something another device may wait for has happened. */
  void progress();
  /** Runs `body`, turning whatever it throws at instruction `current` of local device d into the run's
   *  failure: nothing escapes a pool thread. */
  template <typename Body>
  void guarded(size_t d, const size_t& current, Body body);
  /** Instruction i of stream s of local device d, its wait for the other stream done: false when the run
   *  stops there (failed, or an injected fault struck). */
  bool runInstruction(size_t d, int s, size_t i);
  /** runInstruction's halves around execute: begin (false: stop there; skip: a guard is set) and end. */
  bool beginInstruction(size_t d, int s, size_t i, bool& skip);
  void endInstruction(size_t d, int s, size_t i, bool skip);
  void execute(Local& local, int stream, Instruction& ins);
  /** Stays stuck (an injected hang) until the run fails elsewhere or three timeouts pass. */
  void hang(size_t d, size_t i);
  /** Keeps the first failure (a root cause replaces an earlier echo: a rank woken by an abort whose cause is
   *  still on its way), then stops everyone: aborts the communicator and wakes every waiting stream. */
  void fail(Failure failure, bool echo = false);
  /** The devices inside a kernel now, for a timeout's busy note. */
  std::vector<BusyDevice> busyNow() const;
  /** A failure of instruction i of local device d, its text "device D instruction I (op): message". */
  Failure failureOf(size_t d, size_t i, FailureKind kind, const std::string& message) const;

  std::vector<std::unique_ptr<Local>> locals_;  // unique_ptr: a Local's atomics cannot move
  std::unique_ptr<Communicator> comm_;
  double timeoutSeconds_ = 60;
  bool direct_ = false;  // one device, empty communication stream: its compute stream runs on run()'s thread
  // CPU devices, as Program::hostThreads asks (where a thread per stream would outnumber the cores): this many
  // host threads take turns on the devices (0: a thread per stream). With a communicator that defers, as few
  // as the cores: a device whose collective has not met is set aside, not waited for. Otherwise one per
  // device, since a device may then block its thread in a collective. Threads that would only take turns on
  // the cores pay a hand-off at every event between streams and at every meeting of a group.
  size_t hostThreads_ = 0;
  bool deferring_ = false;  // the communicator defers collectives (hostThreads_ may be below the devices)
  bool tracing_ = false;
  Clock::time_point origin_;

  // Set and cleared only while no run is in flight, so the pool's threads just read it.
  Fault fault_ = Fault::None;
  size_t faultDevice_ = 0;
  size_t faultInstruction_ = 0;

  // Per-run failure state.
  std::atomic<bool> failed_{false};
  std::mutex failMutex_;
  Failure first_;
  bool echo_ = false;
  std::mutex hangMutex_;  // with hangCv_: an injected hang waits to be woken by the run's failure
  std::condition_variable hangCv_;

  // Host threads' turns (per run): how many devices have finished; a counter bumped by progress() with the
  // threads that sleep on it.
  std::atomic<size_t> finished_{0};
  std::atomic<uint64_t> progress_{0};
  std::atomic<int> sleepers_{0};
  std::mutex progressMutex_;
  std::condition_variable progressCv_;

  // The pool: threads_[2·d + s] runs stream s of device d, or threads_[w − 1] host thread w's turns (host
  // thread 0 is run()'s own). A run (under poolMutex_) sets remaining_ to their number and bumps generation_,
  // and wakes them on poolWake_; the last to finish wakes it on poolDone_. stopping_ ends the parked threads
  // (destructor).
  std::vector<std::thread> threads_;
  bool started_ = false;
  std::mutex poolMutex_;
  std::condition_variable poolWake_;
  std::condition_variable poolDone_;
  uint64_t generation_ = 0;
  size_t remaining_ = 0;
  bool stopping_ = false;
};

}  // namespace fsm
