// NativeCluster (cluster.h): every method's body runs inside atBoundary, so any Failure reaches JS as an Error
// with fields.
#include "js/cluster.h"

#include <string>
#include <vector>

#include "comm/create.h"
#include "comm/staged.h"
#include "core/async.h"
#include "core/js_error.h"
#include "core/parse.h"
#include "core/values.h"
#include "device/create.h"
#include "js/js_values.h"

namespace fsm {

Napi::Function NativeCluster::Define(Napi::Env env) {
  return DefineClass(env, "NativeCluster",
                     {InstanceMethod("set", &NativeCluster::Set), InstanceMethod("get", &NativeCluster::Get),
                      InstanceMethod("run", &NativeCluster::Run), InstanceMethod("runSync", &NativeCluster::RunSync),
                      InstanceMethod("timings", &NativeCluster::Timings),
                      InstanceMethod("arenaBytes", &NativeCluster::ArenaBytes),
                      InstanceMethod("reservedBytes", &NativeCluster::ReservedBytes),
                      InstanceMethod("deviceCount", &NativeCluster::DeviceCount),
                      InstanceMethod("injectFault", &NativeCluster::InjectFault),
                      InstanceMethod("communicatorCalls", &NativeCluster::CommunicatorCalls),
                      InstanceMethod("communicatorBytes", &NativeCluster::CommunicatorBytes)});
}

NativeCluster::NativeCluster(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeCluster>(info) {
  atBoundary(info.Env(), [&] {
    if (info.Length() != 1 || !info[0].IsObject()) {
      refuse(JsClass::TypeError, {}, "NativeCluster({devices, worldSize?, ranks?, device?, communicator?, timeoutSeconds?, blasThreads?, hostThreads?, memoryLimitBytes?})");
    }
    Program program = parseProgram(info[0].As<Napi::Object>());
    std::vector<std::unique_ptr<Device>> devices;
    std::vector<int> ranks;
    for (const DeviceProgram& d : program.devices) {
      devices.push_back(createDevice(program.device, devices.size(), d.memoryLimitBytes, program.blasThreads));
      ranks.push_back(d.rank);
    }
    std::map<int, Device*> byRank;
    for (size_t i = 0; i < devices.size(); i++) byRank[ranks[i]] = devices[i].get();
    std::unique_ptr<Communicator> comm = createCommunicator(program.communicator, program.worldSize, ranks, program.timeoutSeconds, byRank);
    // GPU buffers reach a host communicator through host copies.
    if (!devices.empty() && !devices.front()->hostAddressable() && !comm->takesDeviceMemory()) {
      comm = std::make_unique<StagedCommunicator>(std::move(comm), std::move(byRank));
    }
    executor_ = std::make_unique<Executor>(std::move(program), std::move(devices), std::move(comm));
  });
}

void NativeCluster::checkIdle() const {
  if (running_) refuse(JsClass::Error, {}, "the cluster is running a step: wait for run() to settle");
}

size_t NativeCluster::device(const Napi::Value& v) const {
  if (!v.IsNumber()) refuse(JsClass::TypeError, {}, "device must be a number");
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!isInteger(d) || d < 0 || d >= static_cast<double>(executor_->localDevices())) {
    refuse(JsClass::RangeError, {}, "unknown device " + v.ToString().Utf8Value() + " (the cluster has " + std::to_string(executor_->localDevices()) + ")");
  }
  return static_cast<size_t>(d);
}

size_t NativeCluster::slot(size_t device, const Napi::Value& v) const {
  if (!v.IsNumber()) refuse(JsClass::TypeError, {}, "slot must be a number");
  const double id = v.As<Napi::Number>().DoubleValue();
  if (!isInteger(id) || id < 0 || id >= static_cast<double>(executor_->slotCount(device))) {
    refuse(JsClass::RangeError, {}, "unknown slot " + v.ToString().Utf8Value());
  }
  return static_cast<size_t>(id);
}

Napi::Value NativeCluster::Set(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&] {
    checkIdle();
    const size_t d = device(info[0]), s = slot(d, info[1]);
    executor_->write(d, s, bytesFor(executor_->slot(d, s), info[2], "set(device, slot, data)"));
    return info.Env().Undefined();
  });
}

Napi::Value NativeCluster::Get(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    checkIdle();
    const size_t d = device(info[0]), s = slot(d, info[1]);
    const Tensor& t = executor_->slot(d, s);
    void* data = nullptr;
    Napi::TypedArray out = newTypedArray(info.Env(), t.dtype, static_cast<size_t>(t.numel()), data);
    executor_->read(d, s, data);
    return out;
  });
}

Napi::Value NativeCluster::Run(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&]() -> Napi::Value {
    checkIdle();
    // run(trace?): with trace, every instruction's start and end are recorded (timings(device)).
    const bool trace = info.Length() > 0 && info[0].ToBoolean().Value();
    running_ = true;
    Executor* executor = executor_.get();
    return PromiseWorker<Done>::queue(
        info.Env(), "fsm:cluster.run",
        [executor, trace] {
          if (std::optional<Failure> f = executor->run(trace)) throw FailureError(*f);
          return Done{};
        },
        [](Napi::Env env, Done&) -> Napi::Value { return env.Undefined(); }, [this] { running_ = false; },
        info.This().As<Napi::Object>());  // the cluster, and so its executor, lives until the step is done
  });
}

// Run's work on this (the JS) thread: no hand-off to a worker and back, which a short step pays more for than
// the batch the caller would make meanwhile (src/runtime/step-mode.ts).
Napi::Value NativeCluster::RunSync(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&] {
    checkIdle();
    const bool trace = info.Length() > 0 && info[0].ToBoolean().Value();
    if (std::optional<Failure> f = executor_->run(trace)) throw FailureError(*f);
    return info.Env().Undefined();
  });
}

Napi::Value NativeCluster::Timings(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&] {
    checkIdle();
    return timingsArray(info.Env(), executor_->timings(device(info[0])));
  });
}

Napi::Value NativeCluster::ArenaBytes(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&] { return Napi::Number::New(info.Env(), static_cast<double>(executor_->arenaBytes(device(info[0])))); });
}

Napi::Value NativeCluster::ReservedBytes(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&] { return Napi::Number::New(info.Env(), static_cast<double>(executor_->reservedBytes(device(info[0])))); });
}

Napi::Value NativeCluster::DeviceCount(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(executor_->localDevices()));
}

Napi::Value NativeCluster::InjectFault(const Napi::CallbackInfo& info) {
  return atBoundary(info.Env(), [&] {
    checkIdle();
    // injectFault(device, instruction, "fail" | "nan" | "hang"): armed for the next run only.
    const size_t d = device(info[0]);
    const size_t i = sizeOf(info[1], "instruction");
    if (i >= executor_->instructionCount(d)) {
      refuse(JsClass::RangeError, {}, "device " + info[0].ToString().Utf8Value() + " has no instruction " + std::to_string(i) + " (it has " +
                                          std::to_string(executor_->instructionCount(d)) + ")");
    }
    const std::string kind = info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
    if (kind != "fail" && kind != "nan" && kind != "hang") refuse(JsClass::TypeError, {}, "the fault kind must be 'fail', 'nan' or 'hang'");
    executor_->arm(d, i, kind == "fail" ? Fault::Fail : kind == "nan" ? Fault::NaN : Fault::Hang);
    return info.Env().Undefined();
  });
}

Napi::Value NativeCluster::CommunicatorCalls(const Napi::CallbackInfo& info) {
  Napi::Object out = Napi::Object::New(info.Env());
  const std::array<uint64_t, kCommCalls> calls = executor_->communicatorCalls();
  for (size_t k = 0; k < kCommCalls; k++) out.Set(commCallName(static_cast<CommCall>(k)), static_cast<double>(calls[k]));
  return out;
}

Napi::Value NativeCluster::CommunicatorBytes(const Napi::CallbackInfo& info) {
  Napi::Object out = Napi::Object::New(info.Env());
  const Communicator::BytesSent b = executor_->communicatorBytes();
  out.Set("inProcess", static_cast<double>(b.inProcess));
  out.Set("betweenProcesses", static_cast<double>(b.betweenProcesses));
  return out;
}

}  // namespace fsm
