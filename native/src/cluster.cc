// NativeCluster (cluster.h): construction (every operand, wait and communication argument checked once, so a
// step only calls kernels and the communicator), slot access, and run() as one async worker that wakes a
// compute and a communication thread per device (started once, parked between steps) and waits for them. The
// first failure anywhere aborts the communicator and wakes every waiting thread, so a step rejects naming its
// root cause instead of hanging; nothing exits the process. injectFault arms one such failure (or NaN outputs)
// for a run, so tests exercise that path on real programs.
#include "cluster.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <new>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "comm/communicator.h"
#include "gemm.h"
#include "js_values.h"

namespace fsm {

namespace {

using Clock = std::chrono::steady_clock;

std::string where(size_t d, size_t i, const std::string& op) {
  return "device " + std::to_string(d) + " instruction " + std::to_string(i) + " (" + op + ")";
}

double secondsSince(Clock::time_point origin) { return std::chrono::duration<double>(Clock::now() - origin).count(); }

bool isInteger(double x) { return std::isfinite(x) && std::floor(x) == x; }

// An integer attribute of a communication op (root, peer, tag), in int range.
int intAttr(const Napi::Env& env, const Attrs& attrs, const std::string& name, const std::string& at) {
  auto it = attrs.numbers.find(name);
  if (it == attrs.numbers.end() || !isInteger(it->second) || std::fabs(it->second) > 2147483647.0) {
    throw Napi::TypeError::New(env, at + ": attrs." + name + " must be an integer");
  }
  return static_cast<int>(it->second);
}

const std::map<std::string, ClusterOp>& commOps() {
  static const std::map<std::string, ClusterOp> ops = {
      {"comm.allReduce", ClusterOp::AllReduce}, {"comm.reduceScatter", ClusterOp::ReduceScatter},
      {"comm.allGather", ClusterOp::AllGather}, {"comm.broadcast", ClusterOp::Broadcast},
      {"comm.reduce", ClusterOp::Reduce},       {"comm.send", ClusterOp::Send},
      {"comm.recv", ClusterOp::Recv}};
  return ops;
}

// Checks a communication instruction's operands and reads its group, root, peer and tag. Slot ids are compared
// (not only sizes) for the in-place collectives, since the communicator writes the result over its input.
void checkComm(const Napi::Env& env, ClusterInstruction& ins, const std::vector<uint32_t>& inIds,
               const std::vector<uint32_t>& outIds, size_t device, size_t worldSize, const std::string& at) {
  auto bad = [&](const std::string& why) { return Napi::RangeError::New(env, at + ": " + why); };
  for (const std::vector<Tensor>* operands : {&ins.inputs, &ins.outputs}) {
    for (const Tensor& t : *operands) {
      if (t.dtype != DType::F32) throw Napi::TypeError::New(env, at + ": communication ops take f32 slots only");
    }
  }
  const bool p2p = ins.kind == ClusterOp::Send || ins.kind == ClusterOp::Recv;
  const size_t wantIn = ins.kind == ClusterOp::Recv ? 0 : 1, wantOut = ins.kind == ClusterOp::Send ? 0 : 1;
  if (inIds.size() != wantIn || outIds.size() != wantOut) {
    throw bad("takes " + std::to_string(wantIn) + " input(s) and " + std::to_string(wantOut) + " output(s), got " +
              std::to_string(inIds.size()) + " and " + std::to_string(outIds.size()));
  }
  if (p2p) {
    ins.peer = intAttr(env, ins.attrs, "peer", at);
    ins.tag = intAttr(env, ins.attrs, "tag", at);
    if (ins.peer < 0 || static_cast<size_t>(ins.peer) >= worldSize) {
      throw bad("peer " + std::to_string(ins.peer) + " is not a device of the " + std::to_string(worldSize));
    }
    return;
  }
  if (!ins.attrs.shapes.count("group")) throw Napi::TypeError::New(env, at + ": attrs.group must be an array of global ranks");
  for (int64_t r : ins.attrs.shapes.at("group")) ins.group.push_back(static_cast<int>(r));
  const std::vector<int>& g = ins.group;
  for (size_t k = 0; k < g.size(); k++) {
    if (static_cast<size_t>(g[k]) >= worldSize || (k > 0 && g[k] <= g[k - 1])) {
      throw bad("the group must be strictly ascending ranks in [0, " + std::to_string(worldSize) + ")");
    }
  }
  if (!std::binary_search(g.begin(), g.end(), static_cast<int>(device))) throw bad("the group does not contain the device");
  const int64_t inN = ins.inputs[0].numel(), outN = ins.outputs[0].numel();
  const int64_t n = static_cast<int64_t>(g.size());
  switch (ins.kind) {
    case ClusterOp::AllReduce:
    case ClusterOp::Broadcast:
    case ClusterOp::Reduce:
      if (inIds[0] != outIds[0]) throw bad("works in place: the input and the output must be the same slot");
      if (ins.kind != ClusterOp::AllReduce) {
        ins.root = intAttr(env, ins.attrs, "root", at);
        if (!std::binary_search(g.begin(), g.end(), ins.root)) throw bad("root " + std::to_string(ins.root) + " is not in the group");
      }
      break;
    case ClusterOp::ReduceScatter:
      if (inN != n * outN) {
        throw bad("the input has " + std::to_string(inN) + " elements, not group size " + std::to_string(n) +
                  " x the output's " + std::to_string(outN));
      }
      break;
    case ClusterOp::AllGather:
      if (outN != n * inN) {
        throw bad("the output has " + std::to_string(outN) + " elements, not group size " + std::to_string(n) +
                  " x the input's " + std::to_string(inN));
      }
      break;
    default:
      break;
  }
}

// Replays the streams as the threads would (each stream in order, an instruction once its waits on the other
// stream are met): if both stall before the end, the waits form a cycle and the step would never finish.
void checkAcyclic(const Napi::Env& env, const ClusterDevice& dev, size_t d) {
  size_t next[2] = {0, 0};
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < 2; s++) {
      while (next[s] < dev.streams[s].size()) {
        const ClusterInstruction& ins = dev.instructions[dev.streams[s][next[s]]];
        if (next[1 - s] < ins.need[1 - s]) break;
        next[s]++;
        moved = true;
      }
    }
  }
  for (int s = 0; s < 2; s++) {
    if (next[s] < dev.streams[s].size()) {
      const size_t i = dev.streams[s][next[s]];
      throw Napi::RangeError::New(env, where(d, i, dev.instructions[i].op) +
                                           ": its waits form a cycle with the other stream, so it could never start");
    }
  }
}

// An injected NaN fault: every float output holds quiet NaNs (integer outputs have none to hold).
void poisonWithNaN(std::vector<Tensor>& outputs) {
  for (Tensor& t : outputs) {
    const size_t n = static_cast<size_t>(t.numel());
    if (t.dtype == DType::F32) std::fill_n(t.f32(), n, std::numeric_limits<float>::quiet_NaN());
    if (t.dtype == DType::BF16) std::fill_n(t.u16(), n, static_cast<uint16_t>(0x7FC0));
    if (t.dtype == DType::F16) std::fill_n(t.u16(), n, static_cast<uint16_t>(0x7E00));
  }
}

}  // namespace

class ClusterWorker : public Napi::AsyncWorker {
 public:
  ClusterWorker(Napi::Env env, NativeCluster* cluster, Napi::Object keepAlive)
      : Napi::AsyncWorker(env), cluster_(cluster), deferred_(Napi::Promise::Deferred::New(env)) {
    keepAlive_ = Napi::Persistent(keepAlive);  // the cluster lives until the step is done
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    const std::string error = cluster_->runStep();
    if (!error.empty()) SetError(error);
  }
  void OnOK() override {
    cluster_->running_ = false;
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& e) override {
    cluster_->running_ = false;
    deferred_.Reject(e.Value());
  }

 private:
  NativeCluster* cluster_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference keepAlive_;
};

Napi::Function NativeCluster::Define(Napi::Env env) {
  return DefineClass(env, "NativeCluster",
                     {InstanceMethod("set", &NativeCluster::Set), InstanceMethod("get", &NativeCluster::Get),
                      InstanceMethod("run", &NativeCluster::Run), InstanceMethod("timings", &NativeCluster::Timings),
                      InstanceMethod("arenaBytes", &NativeCluster::ArenaBytes),
                      InstanceMethod("deviceCount", &NativeCluster::DeviceCount),
                      InstanceMethod("injectFault", &NativeCluster::InjectFault)});
}

NativeCluster::NativeCluster(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeCluster>(info) {
  Napi::Env env = info.Env();
  if (info.Length() != 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "NativeCluster({devices, timeoutSeconds?, blasThreads?, memoryLimitBytes?})");
  Napi::Object desc = info[0].As<Napi::Object>();
  if (!desc.Get("timeoutSeconds").IsUndefined()) {
    const Napi::Value t = desc.Get("timeoutSeconds");
    // Bounded so the communicator's deadline (now + timeout in clock ticks) cannot overflow.
    if (!t.IsNumber() || !(t.As<Napi::Number>().DoubleValue() > 0) || !(t.As<Napi::Number>().DoubleValue() <= 1e6)) {
      throw Napi::TypeError::New(env, "timeoutSeconds must be a number of seconds in (0, 1e6]");
    }
    timeoutSeconds_ = t.As<Napi::Number>().DoubleValue();
  }
  if (!desc.Get("blasThreads").IsUndefined()) {
    const size_t b = sizeOf(env, desc.Get("blasThreads"), "blasThreads");
    if (b < 1 || b > 1024) throw Napi::RangeError::New(env, "blasThreads must be between 1 and 1024");
    blasThreads_ = static_cast<int>(b);
  }
  Napi::Array devices = arrayOf(env, desc.Get("devices"), "devices");
  const size_t worldSize = devices.Length();
  if (worldSize < 1) throw Napi::RangeError::New(env, "a cluster needs at least one device");
  // Each device's memory: an arena larger than its device's is refused before it is allocated.
  std::vector<size_t> limits;
  if (!desc.Get("memoryLimitBytes").IsUndefined()) {
    Napi::Array a = arrayOf(env, desc.Get("memoryLimitBytes"), "memoryLimitBytes");
    if (a.Length() != worldSize) {
      throw Napi::RangeError::New(env, "memoryLimitBytes has " + std::to_string(a.Length()) + " entries for " + std::to_string(worldSize) + " devices");
    }
    for (uint32_t d = 0; d < a.Length(); d++) limits.push_back(sizeOf(env, a.Get(d), "memoryLimitBytes[" + std::to_string(d) + "]"));
  }

  for (size_t d = 0; d < worldSize; d++) {
    const std::string dn = "device " + std::to_string(d);
    Napi::Object dv = objectOf(env, devices.Get(d), dn);
    auto dev = std::make_unique<ClusterDevice>();
    dev->arenaBytes = sizeOf(env, dv.Get("arenaBytes"), dn + ": arenaBytes");
    if (!limits.empty() && dev->arenaBytes > limits[d]) {
      throw Napi::RangeError::New(env, dn + ": its arena of " + std::to_string(dev->arenaBytes) + " bytes exceeds its memory limit of " +
                                           std::to_string(limits[d]) + " bytes");
    }
    // One allocation per device, 64-byte aligned; touched once here so the hot path never faults. Running out
    // of memory is an error naming the device, never a crash.
    try {
      dev->storage.assign(dev->arenaBytes + 64, 0);
    } catch (const std::bad_alloc&) {
      throw Napi::Error::New(env, dn + ": cannot allocate its arena of " + std::to_string(dev->arenaBytes) + " bytes: out of memory");
    }
    const auto base = reinterpret_cast<uintptr_t>(dev->storage.data());
    dev->arena = dev->storage.data() + ((64 - base % 64) % 64);

    Napi::Array slots = arrayOf(env, dv.Get("slots"), dn + ": slots");
    for (uint32_t i = 0; i < slots.Length(); i++) {
      const std::string sn = dn + " slot " + std::to_string(i);
      const Tensor t = slotOf(env, slots.Get(i), sn, dev->arena, dev->arenaBytes);
      dev->slots.push_back(t);
    }

    // First pass: each instruction's own fields; waits need every instruction's stream, so they come second.
    Napi::Array list = arrayOf(env, dv.Get("instructions"), dn + ": instructions");
    std::vector<size_t> position(list.Length());  // index within its stream
    for (uint32_t i = 0; i < list.Length(); i++) {
      Napi::Object o = objectOf(env, list.Get(i), dn + " instruction " + std::to_string(i));
      ClusterInstruction ins;
      const Napi::Value op = o.Get("op");
      if (!op.IsString()) throw Napi::TypeError::New(env, dn + " instruction " + std::to_string(i) + ": op must be a string");
      ins.op = op.As<Napi::String>().Utf8Value();
      const std::string at = where(d, i, ins.op);
      const Napi::Value stream = o.Get("stream");
      if (!stream.IsNumber() || (stream.As<Napi::Number>().DoubleValue() != 0 && stream.As<Napi::Number>().DoubleValue() != 1)) {
        throw Napi::TypeError::New(env, at + ": stream must be 0 (compute) or 1 (communication)");
      }
      ins.stream = static_cast<int>(stream.As<Napi::Number>().DoubleValue());
      std::vector<uint32_t> ids[2];  // inputs, outputs
      const char* keys[2] = {"inputs", "outputs"};
      for (int k = 0; k < 2; k++) {
        Napi::Array a = arrayOf(env, o.Get(keys[k]), at + ": " + keys[k]);
        for (uint32_t j = 0; j < a.Length(); j++) {
          const size_t id = sizeOf(env, a.Get(j), at + ": " + keys[k] + "[" + std::to_string(j) + "]");
          if (id >= dev->slots.size()) throw Napi::RangeError::New(env, at + " uses unknown slot " + std::to_string(id));
          ids[k].push_back(static_cast<uint32_t>(id));
          (k == 0 ? ins.inputs : ins.outputs).push_back(dev->slots[id]);
        }
      }
      ins.attrs = attrsOf(env, o.Get("attrs"), at);
      auto comm = commOps().find(ins.op);
      if (comm != commOps().end()) {
        ins.kind = comm->second;
        checkComm(env, ins, ids[0], ids[1], d, worldSize, at);
      } else {
        auto it = kernelRegistry().find(ins.op);
        if (it == kernelRegistry().end()) throw Napi::Error::New(env, at + ": not implemented: native kernel for op '" + ins.op + "'");
        ins.kernel = it->second;
        // In place: the kernel updates its operands (an accumulator, a gradient scaled, an optimizer update
        // written over the parameter and its state), so its outputs must not be zeroed first.
        ins.inPlace = ins.op == "fsm_add_inplace" || o.Get("inPlace").ToBoolean().Value();
      }
      const Napi::Value guard = o.Get("guard");
      if (!guard.IsUndefined()) {
        const size_t g = sizeOf(env, guard, at + ": guard");
        if (g >= dev->slots.size()) throw Napi::RangeError::New(env, at + ": guard slot " + std::to_string(g) + " does not exist");
        const Tensor& gs = dev->slots[g];
        if (gs.dtype != DType::F32 || gs.numel() != 1) {
          throw Napi::TypeError::New(env, at + ": guard slot " + std::to_string(g) + " must be an f32 scalar (one element), not " +
                                              dtypeName(gs.dtype) + " with " + std::to_string(gs.numel()) + " elements");
        }
        // A collective or a send/recv skipped on one device would leave its peers waiting: guards gate kernels.
        if (ins.kind != ClusterOp::Kernel) throw Napi::TypeError::New(env, at + ": only kernel instructions can have a guard");
        // Read, never written, by the instruction it guards: no output may share its bytes (slots can be views).
        const auto* g0 = static_cast<const uint8_t*>(gs.data);
        for (size_t k = 0; k < ins.outputs.size(); k++) {
          const auto* o0 = static_cast<const uint8_t*>(ins.outputs[k].data);
          if (o0 < g0 + gs.bytes() && g0 < o0 + ins.outputs[k].bytes()) {
            throw Napi::RangeError::New(env, at + ": guard slot " + std::to_string(g) + " shares bytes with output " + std::to_string(k) +
                                                 " (slot " + std::to_string(ids[1][k]) + "): the guard is only read");
          }
        }
        ins.guard = gs;
      }
      position[i] = dev->streams[ins.stream].size();
      dev->streams[ins.stream].push_back(i);
      dev->instructions.push_back(std::move(ins));
    }

    // Waits fold into need[]: within a stream, order already implies completion, so only earlier instructions
    // may be named there (a later one would deadlock the stream on itself).
    for (uint32_t i = 0; i < list.Length(); i++) {
      ClusterInstruction& ins = dev->instructions[i];
      const std::string at = where(d, i, ins.op);
      Napi::Array waits = arrayOf(env, list.Get(i).As<Napi::Object>().Get("waits"), at + ": waits");
      for (uint32_t k = 0; k < waits.Length(); k++) {
        const size_t w = sizeOf(env, waits.Get(k), at + ": waits[" + std::to_string(k) + "]");
        if (w >= list.Length()) throw Napi::RangeError::New(env, at + " waits on instruction " + std::to_string(w) + ", which does not exist");
        if (w == i) throw Napi::RangeError::New(env, at + " waits on itself");
        const int s = dev->instructions[w].stream;
        if (s == ins.stream && w > i) {
          throw Napi::RangeError::New(env, at + " waits on instruction " + std::to_string(w) +
                                               ", which comes later on the same stream");
        }
        ins.need[s] = std::max(ins.need[s], position[w] + 1);
      }
    }
    checkAcyclic(env, *dev, d);
    devices_.push_back(std::move(dev));
  }
}

// The threads are started here, on the worker thread, so the first run() does not block JS either; a step with
// no error allocates nothing here (timings keep their capacity, the communicator is built in place).
std::string NativeCluster::runStep() {
  if (threads_.empty()) {
    std::string error = startThreads();
    if (!error.empty()) {
      fault_ = Fault::None;  // armed for this run only, which did not happen
      return error;
    }
  }
  failed_ = false;
  firstError_.clear();
  for (auto& dev : devices_) {
    dev->completed[0] = dev->completed[1] = 0;
    dev->inKernel[0] = dev->inKernel[1] = -1;  // a stream aborted mid-kernel last run left its mark
    if (tracing_) dev->timings.assign(dev->instructions.size() * 2, 0.0);
  }
  // A fresh communicator each step: an aborted one stays aborted, and meetings are matched by call order.
  comm_.emplace(static_cast<int>(devices_.size()), std::chrono::duration<double>(timeoutSeconds_));
  {
    // Held from before the threads wake until they have all finished, so it covers every kernel of the step.
    ScopedBlasThreads blas(blasThreads_);
    origin_ = Clock::now();
    {
      std::lock_guard<std::mutex> lk(poolMutex_);
      remaining_ = threads_.size();
      generation_++;
    }
    poolWake_.notify_all();
    std::unique_lock<std::mutex> lk(poolMutex_);
    poolDone_.wait(lk, [&] { return remaining_ == 0; });
  }
  comm_.reset();
  fault_ = Fault::None;  // the threads are parked again: an injected fault strikes one run only
  return failed_ ? firstError_ : std::string();
}

std::string NativeCluster::startThreads() {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lk(poolMutex_);
    seen = generation_;  // each thread waits for the next generation, even if it starts after the bump
  }
  try {
    threads_.reserve(devices_.size() * 2);
    for (size_t d = 0; d < devices_.size(); d++) {
      for (int s = 0; s < 2; s++) threads_.emplace_back(&NativeCluster::deviceThread, this, d, s, seen);
    }
  } catch (const std::exception& e) {
    stopThreads();  // the started ones are parked: stop them, and the next run tries again
    return std::string("cannot start the device threads: ") + e.what();
  }
  return std::string();
}

void NativeCluster::stopThreads() {
  {
    std::lock_guard<std::mutex> lk(poolMutex_);
    stopping_ = true;
  }
  poolWake_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  std::lock_guard<std::mutex> lk(poolMutex_);
  stopping_ = false;
}

NativeCluster::~NativeCluster() { stopThreads(); }

void NativeCluster::deviceThread(size_t d, int s, uint64_t seen) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(poolMutex_);
      poolWake_.wait(lk, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    runStream(d, s, *comm_, origin_);  // catches everything: it always returns
    std::lock_guard<std::mutex> lk(poolMutex_);
    if (--remaining_ == 0) poolDone_.notify_one();  // the last of the step wakes runStep
  }
}

// One stream of one device. Every exception ends here: one escaping a std::thread would terminate the process.
void NativeCluster::runStream(size_t d, int s, Communicator& comm, Clock::time_point origin) {
  ClusterDevice& dev = *devices_[d];
  const int other = 1 - s;
  size_t current = 0;
  try {
    for (size_t i : dev.streams[s]) {
      current = i;
      ClusterInstruction& ins = dev.instructions[i];
      {
        std::unique_lock<std::mutex> lk(dev.mutex);
        // The other stream either gets there (construction ruled out cycles) or fails, which sets failed_
        // and wakes everyone: a stream never ends early otherwise.
        dev.cv.wait(lk, [&] { return failed_ || dev.completed[other] >= ins.need[other]; });
        if (failed_) break;
      }
      if (tracing_) dev.timings[2 * i] = secondsSince(origin);
      if (ins.kind == ClusterOp::Kernel) {
        dev.kernelSince[s] = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
        dev.inKernel[s] = static_cast<int64_t>(i);
      }
      const bool injected = fault_ != Fault::None && d == faultDevice_ && i == faultInstruction_;
      // Fails as a real error would, where it would: peers waiting on this device are woken by the abort.
      if (injected && fault_ == Fault::Fail) throw std::runtime_error("injected fault");
      if (injected && fault_ == Fault::Hang) {
        // Stuck, as a device in a dead loop or a lost node would be: only the abort wakes it (a peer's
        // timeout, which reports it busy); with nobody waiting on it, it gives up itself — after three
        // timeouts, so that peers waiting on it always time out first.
        std::unique_lock<std::mutex> lk(dev.mutex);
        const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(3 * timeoutSeconds_));
        if (dev.cv.wait_until(lk, deadline, [&] { return failed_.load(); })) break;
        std::ostringstream msg;
        msg << "injected hang: stopped responding for " << 3 * timeoutSeconds_ << " s and nothing waited on it";
        throw std::runtime_error(msg.str());
      }
      // A guarded instruction whose guard is set (nonzero, NaN included) is skipped but counts as completed.
      const bool skip = ins.guard.data != nullptr && *static_cast<const float*>(ins.guard.data) != 0.0f;
      if (!skip) execute(d, ins, comm);
      if (injected && fault_ == Fault::NaN) poisonWithNaN(ins.outputs);
      dev.inKernel[s] = -1;
      if (tracing_) dev.timings[2 * i + 1] = skip ? dev.timings[2 * i] : secondsSince(origin);
      {
        std::lock_guard<std::mutex> lk(dev.mutex);
        dev.completed[s]++;
      }
      dev.cv.notify_all();
    }
  } catch (const std::exception& e) {
    fail(where(d, current, dev.instructions[current].op) + ": " + e.what(), comm);
  } catch (...) {
    fail(where(d, current, dev.instructions[current].op) + ": unknown error", comm);
  }
}

void NativeCluster::execute(size_t d, ClusterInstruction& ins, Communicator& comm) {
  const int rank = static_cast<int>(d);
  switch (ins.kind) {
    case ClusterOp::Kernel:
      if (!ins.inPlace)
        for (Tensor& t : ins.outputs) std::memset(t.data, 0, t.bytes());
      ins.kernel(ins.inputs, ins.outputs, ins.attrs);
      return;
    case ClusterOp::AllReduce:
      comm.allReduce(rank, ins.group, ins.outputs[0].f32(), static_cast<size_t>(ins.outputs[0].numel()));
      return;
    case ClusterOp::ReduceScatter:
      comm.reduceScatter(rank, ins.group, ins.inputs[0].f32(), ins.outputs[0].f32(), static_cast<size_t>(ins.outputs[0].numel()));
      return;
    case ClusterOp::AllGather:
      comm.allGather(rank, ins.group, ins.inputs[0].f32(), ins.outputs[0].f32(), static_cast<size_t>(ins.inputs[0].numel()));
      return;
    case ClusterOp::Broadcast:
      comm.broadcast(rank, ins.group, ins.root, ins.outputs[0].f32(), static_cast<size_t>(ins.outputs[0].numel()));
      return;
    case ClusterOp::Reduce:
      comm.reduce(rank, ins.group, ins.root, ins.outputs[0].f32(), static_cast<size_t>(ins.outputs[0].numel()));
      return;
    case ClusterOp::Send:
      comm.send(rank, ins.peer, ins.tag, ins.inputs[0].f32(), static_cast<size_t>(ins.inputs[0].numel()));
      return;
    case ClusterOp::Recv:
      comm.recv(rank, ins.peer, ins.tag, ins.outputs[0].f32(), static_cast<size_t>(ins.outputs[0].numel()));
      return;
  }
}

// Keeps the first message (a rank woken by the abort throws CommAborted echoing it), then stops everyone:
// the abort wakes threads inside the communicator, the notifications those waiting on events.
void NativeCluster::fail(const std::string& message, Communicator& comm) {
  {
    std::lock_guard<std::mutex> lk(failMutex_);
    if (failed_) return;
    // A timeout names the ranks that never came, which may themselves be waiting on the stuck one; the
    // devices busy in a kernel all along are the likelier cause, so they are named too.
    firstError_ = message.find("timed out") != std::string::npos ? message + busyNote() : message;
    failed_ = true;
  }
  comm.abort(message);
  for (auto& dev : devices_) {
    { std::lock_guard<std::mutex> lk(dev->mutex); }  // a waiter between its check and its wait cannot miss this
    dev->cv.notify_all();
  }
}

std::string NativeCluster::busyNote() const {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  std::ostringstream note;
  note << std::fixed << std::setprecision(1);
  for (size_t d = 0; d < devices_.size(); d++) {
    for (int s = 0; s < 2; s++) {
      const int64_t i = devices_[d]->inKernel[s];
      if (i < 0) continue;
      note << (note.tellp() == 0 ? "; busy computing, not waiting: " : ", ") << where(d, static_cast<size_t>(i), devices_[d]->instructions[static_cast<size_t>(i)].op)
           << " for " << static_cast<double>(now - devices_[d]->kernelSince[s]) / 1e9 << " s";
    }
  }
  return note.str();
}

void NativeCluster::checkIdle(const Napi::Env& env) const {
  if (running_) throw Napi::Error::New(env, "the cluster is running a step: wait for run() to settle");
}

ClusterDevice& NativeCluster::device(const Napi::Env& env, const Napi::Value& v) const {
  if (!v.IsNumber()) throw Napi::TypeError::New(env, "device must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!isInteger(d) || d < 0 || d >= static_cast<double>(devices_.size())) {
    throw Napi::RangeError::New(env, "unknown device " + v.ToString().Utf8Value() + " (the cluster has " + std::to_string(devices_.size()) + ")");
  }
  return *devices_[static_cast<size_t>(d)];
}

const Tensor& NativeCluster::slot(const Napi::Env& env, const ClusterDevice& dev, const Napi::Value& v) const {
  if (!v.IsNumber()) throw Napi::TypeError::New(env, "slot must be a number");
  const double id = v.As<Napi::Number>().DoubleValue();
  if (!isInteger(id) || id < 0 || id >= static_cast<double>(dev.slots.size())) {
    throw Napi::RangeError::New(env, "unknown slot " + v.ToString().Utf8Value());
  }
  return dev.slots[static_cast<size_t>(id)];
}

Napi::Value NativeCluster::Set(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  copyIntoTensor(env, slot(env, device(env, info[0]), info[1]), info[2], "set(device, slot, data)");
  return env.Undefined();
}

Napi::Value NativeCluster::Get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  return tensorCopy(env, slot(env, device(env, info[0]), info[1]));
}

Napi::Value NativeCluster::Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  // run(trace?): with trace, every instruction's start and end are recorded (timings(device)).
  tracing_ = info.Length() > 0 && info[0].ToBoolean().Value();
  running_ = true;
  auto* worker = new ClusterWorker(env, this, info.This().As<Napi::Object>());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value NativeCluster::Timings(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  return timingsArray(env, device(env, info[0]).timings);
}

Napi::Value NativeCluster::ArenaBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(device(info.Env(), info[0]).arenaBytes));
}

Napi::Value NativeCluster::DeviceCount(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(devices_.size()));
}

Napi::Value NativeCluster::InjectFault(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  // injectFault(device, instruction, "fail" | "nan" | "hang"): armed for the next run only.
  const ClusterDevice& dev = device(env, info[0]);
  const size_t i = sizeOf(env, info[1], "instruction");
  if (i >= dev.instructions.size()) {
    throw Napi::RangeError::New(env, "device " + info[0].ToString().Utf8Value() + " has no instruction " + std::to_string(i) + " (it has " +
                                         std::to_string(dev.instructions.size()) + ")");
  }
  const std::string kind = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
  if (kind != "fail" && kind != "nan" && kind != "hang") throw Napi::TypeError::New(env, "the fault kind must be 'fail', 'nan' or 'hang'");
  faultDevice_ = static_cast<size_t>(info[0].As<Napi::Number>().DoubleValue());
  faultInstruction_ = i;
  fault_ = kind == "fail" ? Fault::Fail : kind == "nan" ? Fault::NaN : Fault::Hang;
  return env.Undefined();
}

}  // namespace fsm
