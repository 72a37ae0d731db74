// Executor (executor.h): binding a program to its devices and communicator, the pool's threads, the per-stream
// loop (waits as events, guards, injected faults, tracing, busy marks), the host threads' turns, and the
// first-error abort.
#include "exec/executor.h"

#include "core/yield_wait.h"

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace fsm {

struct Executor::Local {
  DeviceProgram program;
  std::unique_ptr<Device> device;
  Arena arena;
  std::vector<Tensor> slots;  // over the arena
  /** Per instruction of the last traced run: start and end, seconds from the run's origin (empty if none). */
  std::vector<double> timings;
  // Per stream: the kernel instruction it is running (-1: none) and since when (steady-clock ns), so a
  // communicator timeout can say which devices were busy computing rather than waiting — the stuck one.
  std::atomic<int64_t> inKernel[kStreams] = {-1, -1};
  std::atomic<int64_t> kernelSince[kStreams] = {0, 0};
  // Host threads' turns (per run): the next instruction per stream, a deferred collective under way on the
  // communication stream, the instruction running (for a failure's location), done. Touched only by the host
  // thread that holds `claimed`.
  size_t next[kStreams] = {0, 0};
  bool inFlight = false;
  size_t current = 0;
  std::atomic<bool> claimed{false};
  std::atomic<bool> finished{false};

  ~Local() {
    if (device) device->release(arena);
  }
};

namespace {

int64_t nowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

Where whereOf(const DeviceProgram& p, size_t local, int64_t instruction = -1) {
  Where w;
  w.device = p.rank;
  w.localDevice = static_cast<int>(local);
  w.instruction = instruction;
  if (instruction >= 0) w.op = p.instructions[static_cast<size_t>(instruction)].op;
  return w;
}

// A failure raised below the executor (a device, the communicator) at `w`: its text gains the location.
FailureError located(const Failure& inner, const Where& w) {
  Failure f = inner;
  f.where = w;
  f.text = w.prefix() + ": " + inner.text;
  return FailureError(f);
}

// An injected NaN fault: every float output holds quiet NaNs (integer outputs have none to hold).
void poisonWithNaN(Device& device, int stream, const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs) {
    const size_t n = static_cast<size_t>(t.numel());
    if (t.dtype == DType::F32) {
      const std::vector<float> nan(n, std::numeric_limits<float>::quiet_NaN());
      device.copyIn(stream, t.data, nan.data(), t.bytes());
    } else if (t.dtype == DType::BF16 || t.dtype == DType::F16) {
      const std::vector<uint16_t> nan(n, t.dtype == DType::BF16 ? 0x7FC0 : 0x7E00);
      device.copyIn(stream, t.data, nan.data(), t.bytes());
    }
  }
}

}  // namespace

Executor::Executor(Program program, std::vector<std::unique_ptr<Device>> devices, std::unique_ptr<Communicator> comm)
    : comm_(std::move(comm)), timeoutSeconds_(program.timeoutSeconds) {
  for (size_t d = 0; d < program.devices.size(); d++) {
    auto local = std::make_unique<Local>();
    local->program = std::move(program.devices[d]);
    local->device = std::move(devices[d]);
    locals_.push_back(std::move(local));
  }
  // Kernels first: a program whose device kind lacks an op is refused before any memory is taken.
  for (size_t d = 0; d < locals_.size(); d++) {
    Local& L = *locals_[d];
    for (size_t i = 0; i < L.program.instructions.size(); i++) {
      Instruction& ins = L.program.instructions[i];
      if (ins.kind != OpKind::Kernel) continue;
      try {
        ins.call.kernel = L.device->resolve(ins.op);
      } catch (const FailureError& e) {
        throw located(e.failure(), whereOf(L.program, d, static_cast<int64_t>(i)));
      }
    }
  }
  for (size_t d = 0; d < locals_.size(); d++) {
    Local& L = *locals_[d];
    try {
      L.arena = L.device->allocate(L.program.arenaBytes);
    } catch (const FailureError& e) {
      throw located(e.failure(), whereOf(L.program, d));
    }
    for (const Slot& s : L.program.slots) L.slots.push_back(s.at(L.arena.base));
    Device::Preparation prep;
    prep.timeoutSeconds = timeoutSeconds_;
    for (size_t i = 0; i < L.program.instructions.size(); i++) {
      Instruction& ins = L.program.instructions[i];
      for (uint32_t id : ins.inputSlots) ins.call.inputs.push_back(L.slots[id]);
      for (uint32_t id : ins.outputSlots) ins.call.outputs.push_back(L.slots[id]);
      // Communication ops write only what the communicator writes: nothing is zeroed for them.
      ins.call.zero = ins.kind == OpKind::Kernel ? outputsToZero(ins.call.inputs, ins.call.outputs, ins.inPlace)
                                                 : std::vector<uint8_t>(ins.call.outputs.size(), 0);
      ins.call.instruction = static_cast<int64_t>(i);
      ins.call.stream = ins.stream;
      if (ins.guardSlot >= 0) ins.guard = L.slots[static_cast<size_t>(ins.guardSlot)];
      if (ins.kind == OpKind::Kernel) prep.calls.push_back(&ins.call);
    }
    // The waits a stream makes: where an instruction needs more of the other stream than any before it (so each
    // list comes out ascending).
    for (int s = 0; s < kStreams; s++) {
      size_t waited = 0;
      for (size_t i : L.program.streams[s]) {
        Instruction& ins = L.program.instructions[i];
        if (ins.need[1 - s] > waited) prep.waitedFor[1 - s].push_back(ins.waitFor = waited = ins.need[1 - s]);
      }
    }
    try {
      L.device->prepare(prep);
    } catch (const FailureError& e) {
      throw located(e.failure(), whereOf(L.program, d));
    }
  }
  // Every distinct group once, in ascending order: members of a group register it in the same order.
  std::set<std::vector<int>> groups;
  for (const auto& L : locals_) {
    for (const Instruction& ins : L->program.instructions) {
      if (!ins.group.empty()) groups.insert(ins.group);
    }
  }
  std::map<std::vector<int>, GroupHandle> handles;
  for (const std::vector<int>& g : groups) {
    try {
      handles[g] = comm_->registerGroup(g);
    } catch (const CommError& e) {
      refuse(JsClass::RangeError, {}, std::string("the communicator refused a group: ") + e.what());
    }
  }
  for (const auto& L : locals_) {
    for (Instruction& ins : L->program.instructions) {
      if (!ins.group.empty()) ins.groupHandle = handles.at(ins.group);
    }
  }
  try {
    comm_->ready();
  } catch (const CommError& e) {
    refuse(JsClass::Error, {}, std::string("the communicator could not set up its groups: ") + e.what());
  }
  direct_ = locals_.size() == 1 && locals_[0]->program.streams[kCommStream].empty();
  bool cpu = true;
  for (const auto& L : locals_) cpu = cpu && std::string(L->device->kind()) == "cpu";
  if (!direct_ && cpu && program.hostThreads > 0) {
    deferring_ = comm_->canDefer() && static_cast<size_t>(program.hostThreads) < locals_.size();
    hostThreads_ = deferring_ ? static_cast<size_t>(program.hostThreads) : locals_.size();
    comm_->defer(deferring_);
  }
  // Another process failed: stop every local stream with its cause (an echo: a root cause found here wins),
  // including streams waiting on an event or stuck, which no communicator call would wake.
  comm_->onRemoteAbort([this](const std::string& text) { fail(fsm::failureAt(FailureKind::Aborted, JsClass::Error, {}, text), true); });
}

// The communicator goes first, before the failure state its remote-abort handler uses is destroyed.
Executor::~Executor() {
  stopThreads();
  comm_.reset();
}

size_t Executor::arenaBytes(size_t local) const { return locals_[local]->program.arenaBytes; }
size_t Executor::reservedBytes(size_t local) const { return locals_[local]->device->reservedBytes(); }
size_t Executor::slotCount(size_t local) const { return locals_[local]->slots.size(); }
size_t Executor::instructionCount(size_t local) const { return locals_[local]->program.instructions.size(); }
const Tensor& Executor::slot(size_t local, size_t id) const { return locals_[local]->slots[id]; }
const std::vector<double>& Executor::timings(size_t local) const { return locals_[local]->timings; }

void Executor::write(size_t local, size_t id, const void* host) {
  Local& L = *locals_[local];
  L.device->copyIn(kComputeStream, L.slots[id].data, host, L.slots[id].bytes());
}

void Executor::read(size_t local, size_t id, void* host) const {
  const Local& L = *locals_[local];
  L.device->copyOut(kComputeStream, host, L.slots[id].data, L.slots[id].bytes());
}

void Executor::arm(size_t local, size_t instruction, Fault fault) {
  faultDevice_ = local;
  faultInstruction_ = instruction;
  fault_ = fault;
}

// The threads are started here, on the worker thread, so the first run does not block JS either; a step with
// no error allocates nothing here (timings keep their capacity).
std::optional<Failure> Executor::run(bool trace) {
  tracing_ = trace;
  failed_ = false;
  echo_ = false;
  first_ = Failure();
  for (auto& L : locals_) {
    L->device->beginRun(tracing_);
    L->inKernel[0] = L->inKernel[1] = -1;  // a stream aborted mid-kernel last run left its mark
    if (tracing_) L->timings.assign(L->program.instructions.size() * 2, 0.0);
    L->next[0] = L->next[1] = 0;
    L->inFlight = false;
    L->claimed = false;
    L->finished = false;
  }
  finished_ = 0;
  origin_ = Clock::now();
  std::optional<Failure> notStarted;
  if (direct_) {
    // One device and nothing on its communication stream: no thread to wake, no event to wait on.
    runStream(0, kComputeStream);
  } else if (!started_ && (notStarted = startThreads())) {
    // nothing ran
  } else {
    {
      std::lock_guard<std::mutex> lk(poolMutex_);
      remaining_ = threads_.size();
      generation_++;
    }
    poolWake_.notify_all();
    // Host thread 0 is this one: a thread fewer to wake, and none waiting idle for the others.
    if (hostThreads_ > 0) takeTurns(0);
    std::unique_lock<std::mutex> lk(poolMutex_);
    yieldBeforeSleep(lk, [&] { return remaining_ == 0; });
    poolDone_.wait(lk, [&] { return remaining_ == 0; });
  }
  for (size_t d = 0; d < locals_.size(); d++) {
    Local& L = *locals_[d];
    L.device->endRun();
    // A device that runs asynchronously timed its instructions itself (the host saw only their enqueueing).
    if (tracing_ && L.device->timesOnDevice()) L.device->traceTimings(L.timings);
    // Found only now that the device's streams are done (a GPU kernel's check): a failure like any other,
    // unless the step failed already (then it is likely that failure's consequence).
    if (std::optional<DeviceFault> f = L.device->takeFault(); f && !failed_) {
      fail(f->instruction >= 0 ? failureOf(d, static_cast<size_t>(f->instruction), FailureKind::Kernel, f->message)
                               : fsm::failureAt(FailureKind::Kernel, JsClass::Error, whereOf(L.program, d), whereOf(L.program, d).prefix() + ": " + f->message));
    }
  }
  // Every stream has stopped, so no rank is inside the communicator: an aborted one starts fresh for the next
  // step; a clean one carries on as it is.
  if (failed_) comm_->reset();
  fault_ = Fault::None;  // an injected fault strikes one run only
  if (notStarted) return notStarted;
  if (failed_) return first_;
  return std::nullopt;
}

std::optional<Failure> Executor::startThreads() {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lk(poolMutex_);
    seen = generation_;  // each thread waits for the next generation, even if it starts after the bump
  }
  try {
    const size_t n = hostThreads_ > 0 ? hostThreads_ - 1 : locals_.size() * kStreams;
    threads_.reserve(n);
    for (size_t t = 0; t < n; t++) threads_.emplace_back(&Executor::poolThread, this, t, seen);
    started_ = true;
  } catch (const std::exception& e) {
    stopThreads();  // the started ones are parked: stop them, and the next run tries again
    return fsm::failureAt(FailureKind::Aborted, JsClass::Error, {}, std::string("cannot start the device threads: ") + e.what());
  }
  return std::nullopt;
}

void Executor::stopThreads() {
  {
    std::lock_guard<std::mutex> lk(poolMutex_);
    stopping_ = true;
  }
  poolWake_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  started_ = false;
  std::lock_guard<std::mutex> lk(poolMutex_);
  stopping_ = false;
}

void Executor::poolThread(size_t index, uint64_t seen) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(poolMutex_);
      yieldBeforeSleep(lk, [&] { return stopping_ || generation_ != seen; });
      poolWake_.wait(lk, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    if (hostThreads_ > 0) takeTurns(index + 1);
    else runStream(index / kStreams, static_cast<int>(index % kStreams));
    std::lock_guard<std::mutex> lk(poolMutex_);
    if (--remaining_ == 0) poolDone_.notify_one();  // the last of the run wakes run()
  }
}

Failure Executor::failureOf(size_t d, size_t i, FailureKind kind, const std::string& message) const {
  const Where w = whereOf(locals_[d]->program, d, static_cast<int64_t>(i));
  return fsm::failureAt(kind, JsClass::Error, w, w.prefix() + ": " + message);
}

// Every exception ends here: one escaping a std::thread would terminate the process.
template <typename Body>
void Executor::guarded(size_t d, const size_t& current, Body body) {
  Local& L = *locals_[d];
  try {
    body();
  } catch (const CommError& e) {
    const FailureKind kind = e.kind() == CommError::Kind::Timeout ? FailureKind::Timeout
                             : e.kind() == CommError::Kind::Aborted ? FailureKind::Aborted
                                                                     : FailureKind::Comm;
    Failure f = failureOf(d, current, kind, e.what());
    f.peers = e.peers();
    fail(std::move(f), e.kind() == CommError::Kind::Aborted);
  } catch (const std::exception& e) {
    const bool kernel = L.program.instructions[current].kind == OpKind::Kernel;
    fail(failureOf(d, current, kernel ? FailureKind::Kernel : FailureKind::Comm, e.what()));
  } catch (...) {
    fail(failureOf(d, current, FailureKind::Kernel, "unknown error"));
  }
}

void Executor::runStream(size_t d, int s) {
  Local& L = *locals_[d];
  size_t current = 0;
  guarded(d, current, [&] {
    const int other = 1 - s;
    for (size_t i : L.program.streams[s]) {
      current = i;
      // The other stream either gets there (parsing ruled out cycles) or the run fails, which wakes this wait.
      if (L.program.instructions[i].waitFor > 0 && !L.device->wait(s, other, L.program.instructions[i].waitFor)) break;
      if (!runInstruction(d, s, i)) break;
    }
  });
}

bool Executor::claim(Local& L) {
  if (L.finished.load(std::memory_order_acquire) || L.claimed.exchange(true, std::memory_order_acquire)) return false;
  // Finished by another thread between the two checks: it must not be advanced (and counted) again.
  if (!L.finished.load(std::memory_order_acquire)) return true;
  L.claimed.store(false, std::memory_order_release);
  return false;
}

void Executor::takeTurns(size_t w) {
  const size_t n = locals_.size();
  size_t from = w * n / hostThreads_;  // threads start on different devices, then go round
  for (;;) {
    const uint64_t seen = progress_.load();
    if (failed_.load(std::memory_order_acquire) || finished_.load() == n) return;
    bool ran = false;
    for (size_t k = 0; k < n; k++) {
      const size_t d = (from + k) % n;
      Local& L = *locals_[d];
      if (!claim(L)) continue;
      guarded(d, L.current, [&] { ran = advance(d) || ran; });
      L.claimed.store(false, std::memory_order_release);
      if (ran) {
        from = d + 1;
        break;
      }
    }
    if (!ran) awaitProgress(seen);
  }
}

bool Executor::advance(size_t d) {
  Local& L = *locals_[d];
  const int rank = L.program.rank;
  const std::vector<size_t>* streams = L.program.streams;
  size_t* next = L.next;
  auto at = [&](int c) -> const Instruction& { return L.program.instructions[streams[c][next[c]]]; };
  bool ran = false;
  for (;;) {
    if (failed_.load(std::memory_order_acquire)) return ran;
    if (L.inFlight && !comm_->pending(rank)) {
      L.inFlight = false;
      endInstruction(d, kCommStream, streams[kCommStream][next[kCommStream]], false);
      next[kCommStream]++;
      ran = true;
    }
    auto canGo = [&](int c) { return !(c == kCommStream && L.inFlight) && next[c] < streams[c].size() && at(c).waitFor <= next[1 - c]; };
    int go = canGo(kCommStream) ? kCommStream : canGo(kComputeStream) ? kComputeStream : -1;
    bool awaitsMessage = false;
    if (go == kCommStream && at(kCommStream).kind == OpKind::Recv && !comm_->recvReady(rank, at(kCommStream).peer, at(kCommStream).tag)) {
      // Waiting for the message would leave the compute stream's work undone; where collectives defer,
      // another device (which may need this thread) sends it.
      awaitsMessage = deferring_;
      if (canGo(kComputeStream)) go = kComputeStream;
      else if (deferring_) go = -1;
    }
    if (go < 0) {
      if (L.inFlight || awaitsMessage) return ran;
      if (next[kCommStream] < streams[kCommStream].size() || next[kComputeStream] < streams[kComputeStream].size()) {
        fail(failureOf(d, L.current, FailureKind::Aborted, "internal: the device's two streams wait on each other"));
        return ran;
      }
      // Counted by whoever marks it, once: the run ends when the count reaches the devices.
      if (!L.finished.exchange(true, std::memory_order_acq_rel)) {
        finished_++;
        progress();
      }
      return true;
    }
    const size_t i = L.current = streams[go][next[go]];
    bool skip = false;
    if (!beginInstruction(d, go, i, skip)) return ran;
    if (!skip) execute(L, go, L.program.instructions[i]);
    ran = true;
    if (go == kCommStream) {
      if (deferring_ && !skip && comm_->pending(rank)) {
        L.inFlight = true;  // ends when the meeting does: its last member delivers
        progress();
        continue;
      }
      progress();
    }
    endInstruction(d, go, i, skip);
    next[go]++;
  }
}

void Executor::progress() {
  progress_.fetch_add(1);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lk(progressMutex_); }  // a sleeper between its check and its wait cannot miss this
    progressCv_.notify_all();
  }
}

void Executor::awaitProgress(uint64_t seen) {
  auto moved = [&] { return progress_.load() != seen || failed_.load(); };
  for (int i = 0; i < kYieldsBeforeSleep && !moved(); i++) sched_yield();
  if (moved()) return;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSeconds_));
  bool late = false;
  {
    sleepers_++;
    std::unique_lock<std::mutex> lk(progressMutex_);
    late = !progressCv_.wait_until(lk, deadline, moved);
    sleepers_--;
  }
  if (!late) return;
  // Nothing moved for the timeout: a device waits for a collective's members or a message that never came.
  // Only a device no thread holds is named: one held is running, or stuck (an injected hang).
  for (size_t d = 0; d < locals_.size(); d++) {
    Local& L = *locals_[d];
    if (!claim(L)) continue;
    const std::vector<size_t>& comm = L.program.streams[kCommStream];
    const size_t i = L.next[kCommStream] < comm.size() ? comm[L.next[kCommStream]] : L.current;
    guarded(d, i, [&] {
      if (L.inFlight) comm_->expire(L.program.rank);
      const Instruction& ins = L.program.instructions[i];
      if (ins.kind == OpKind::Recv) {
        std::ostringstream msg;
        msg << "recv at rank " << L.program.rank << " from rank " << ins.peer << " (tag " << ins.tag << "): timed out after " << timeoutSeconds_ << " s; rank " << ins.peer << " never sent";
        Failure f = failureOf(d, i, FailureKind::Timeout, msg.str());
        f.peers = {ins.peer};
        fail(std::move(f));
      }
    });
    L.claimed = false;
    if (failed_) return;
  }
}

bool Executor::runInstruction(size_t d, int s, size_t i) {
  bool skip = false;
  if (!beginInstruction(d, s, i, skip)) return false;
  if (!skip) execute(*locals_[d], s, locals_[d]->program.instructions[i]);
  endInstruction(d, s, i, skip);
  return true;
}

bool Executor::beginInstruction(size_t d, int s, size_t i, bool& skip) {
  Local& L = *locals_[d];
  Device& dev = *L.device;
  Instruction& ins = L.program.instructions[i];
  if (failed_.load(std::memory_order_acquire)) return false;
  if (tracing_) L.timings[2 * i] = std::chrono::duration<double>(Clock::now() - origin_).count();
  if (tracing_ && dev.timesOnDevice()) dev.traceMark(s, i, true);
  if (ins.kind == OpKind::Kernel) {
    L.kernelSince[s] = nowNs();
    L.inKernel[s] = static_cast<int64_t>(i);
  }
  const bool injected = fault_ != Fault::None && d == faultDevice_ && i == faultInstruction_;
  // Fails as a real error would, where it would: peers waiting on this device are woken by the abort.
  if (injected && fault_ == Fault::Fail) {
    fail(failureOf(d, i, ins.kind == OpKind::Kernel ? FailureKind::Kernel : FailureKind::Comm, "injected fault"));
    return false;
  }
  if (injected && fault_ == Fault::Hang) {
    hang(d, i);
    return false;
  }
  // A guarded instruction whose guard is set (nonzero, NaN included) is skipped but counts as completed.
  skip = false;
  if (ins.guard.data != nullptr) {
    float guard = 0;
    dev.copyOut(s, &guard, ins.guard.data, sizeof guard);
    skip = guard != 0.0f;
  }
  return true;
}

void Executor::endInstruction(size_t d, int s, size_t i, bool skip) {
  Local& L = *locals_[d];
  Device& dev = *L.device;
  Instruction& ins = L.program.instructions[i];
  const bool injected = fault_ != Fault::None && d == faultDevice_ && i == faultInstruction_;
  if (injected && fault_ == Fault::NaN) poisonWithNaN(dev, s, ins.call.outputs);
  L.inKernel[s] = -1;
  if (tracing_) L.timings[2 * i + 1] = skip ? L.timings[2 * i] : std::chrono::duration<double>(Clock::now() - origin_).count();
  if (tracing_ && dev.timesOnDevice()) dev.traceMark(s, i, false);
  dev.record(s);
}

void Executor::execute(Local& L, int s, Instruction& ins) {
  const int rank = L.program.rank;
  KernelCall& k = ins.call;
  Communicator& comm = *comm_;
  auto count = [](const Tensor& t) { return static_cast<size_t>(t.numel()); };
  switch (ins.kind) {
    case OpKind::Kernel:
      L.device->run(s, k);
      return;
    case OpKind::AllReduce:
      comm.allReduce(rank, ins.groupHandle, k.outputs[0].f32(), count(k.outputs[0]));
      return;
    case OpKind::ReduceScatter:
      comm.reduceScatter(rank, ins.groupHandle, k.inputs[0].f32(), k.outputs[0].f32(), count(k.outputs[0]));
      return;
    case OpKind::AllGather:
      comm.allGather(rank, ins.groupHandle, k.inputs[0].f32(), k.outputs[0].f32(), count(k.inputs[0]));
      return;
    case OpKind::Broadcast:
      comm.broadcast(rank, ins.groupHandle, ins.root, k.outputs[0].f32(), count(k.outputs[0]));
      return;
    case OpKind::Reduce:
      comm.reduce(rank, ins.groupHandle, ins.root, k.outputs[0].f32(), count(k.outputs[0]));
      return;
    case OpKind::Send:
      comm.send(rank, ins.peer, ins.tag, k.inputs[0].f32(), count(k.inputs[0]));
      return;
    case OpKind::Recv:
      comm.recv(rank, ins.peer, ins.tag, k.outputs[0].f32(), count(k.outputs[0]));
      return;
  }
}

// Stuck, as a device in a dead loop or a lost node would be: only the run's failure wakes it (a peer's timeout,
// which reports it busy); with nobody waiting on it, it gives up itself — after three timeouts, so that peers
// waiting on it always time out first.
void Executor::hang(size_t d, size_t i) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(3 * timeoutSeconds_));
  {
    std::unique_lock<std::mutex> lk(hangMutex_);
    if (hangCv_.wait_until(lk, deadline, [&] { return failed_.load(); })) return;
  }
  std::ostringstream msg;
  msg << "injected hang: stopped responding for " << 3 * timeoutSeconds_ << " s and nothing waited on it";
  fail(failureOf(d, i, FailureKind::Hang, msg.str()));
}

void Executor::fail(Failure failure, bool echo) {
  std::string abortText;
  {
    std::lock_guard<std::mutex> lk(failMutex_);
    const bool replacesEcho = failed_ && echo_ && !echo;
    if (failed_ && !replacesEcho) return;
    // A timeout names the ranks that never came, which may themselves be waiting on the stuck one; the
    // devices busy in a kernel all along are the likelier cause, so they are named too.
    if (failure.kind == FailureKind::Timeout) {
      failure.busy = busyNow();
      failure.text += busyNote(failure.busy);
    }
    first_ = std::move(failure);
    echo_ = echo;
    if (replacesEcho) return;  // everyone is stopping already
    failed_ = true;
    abortText = first_.text;
  }
  comm_->abort(abortText);
  for (auto& L : locals_) L->device->abortWaits();
  progress();  // host threads waiting for progress stop
  { std::lock_guard<std::mutex> lk(hangMutex_); }  // a hang between its check and its wait cannot miss this
  hangCv_.notify_all();
}

std::vector<BusyDevice> Executor::busyNow() const {
  const int64_t now = nowNs();
  std::vector<BusyDevice> busy;
  for (const auto& L : locals_) {
    for (int s = 0; s < kStreams; s++) {
      const int64_t i = L->inKernel[s];
      if (i < 0) continue;
      busy.push_back({L->program.rank, i, L->program.instructions[static_cast<size_t>(i)].op, static_cast<double>(now - L->kernelSince[s]) / 1e9});
    }
  }
  return busy;
}

}  // namespace fsm
