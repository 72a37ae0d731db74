// NativeCluster: the JS face of one Executor (exec/executor.h) — built from a description (parse, then a device
// per local device and the communicator, by kind), slot access, run() as a PromiseWorker, timings, injected
// faults and the communicator's call counts.
#pragma once
#include <napi.h>

#include <atomic>
#include <memory>

#include "exec/executor.h"

namespace fsm {

class NativeCluster : public Napi::ObjectWrap<NativeCluster> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit NativeCluster(const Napi::CallbackInfo& info);

 private:
  Napi::Value Set(const Napi::CallbackInfo& info);
  Napi::Value Get(const Napi::CallbackInfo& info);
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value RunSync(const Napi::CallbackInfo& info);
  Napi::Value Timings(const Napi::CallbackInfo& info);
  Napi::Value ArenaBytes(const Napi::CallbackInfo& info);
  Napi::Value ReservedBytes(const Napi::CallbackInfo& info);
  Napi::Value DeviceCount(const Napi::CallbackInfo& info);
  Napi::Value InjectFault(const Napi::CallbackInfo& info);
  Napi::Value CommunicatorCalls(const Napi::CallbackInfo& info);
  Napi::Value CommunicatorBytes(const Napi::CallbackInfo& info);
  /** The local device index `v` names (0..deviceCount-1), or a RangeError. */
  size_t device(const Napi::Value& v) const;
  size_t slot(size_t device, const Napi::Value& v) const;
  void checkIdle() const;

  std::unique_ptr<Executor> executor_;
  std::atomic<bool> running_{false};
};

}  // namespace fsm
