// NativeProgram (program.h): construction from the lowered description, slot access, and run() as an async
// worker: outputs are zeroed (the kernel contract) and kernels called in order; a failing kernel rejects the
// promise naming the instruction, and nothing ever exits the process.
#include "program.h"

#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "js_values.h"

namespace fsm {

class ProgramWorker : public Napi::AsyncWorker {
 public:
  ProgramWorker(Napi::Env env, NativeProgram* program, Napi::Object keepAlive)
      : Napi::AsyncWorker(env), program_(program), deferred_(Napi::Promise::Deferred::New(env)) {
    keepAlive_ = Napi::Persistent(keepAlive);  // the program lives until the step is done
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    auto& list = program_->instructions_;
    const bool tracing = program_->tracing_;
    std::vector<double>& timings = program_->timings_;
    if (tracing) timings.assign(list.size() * 2, 0.0);
    const auto origin = std::chrono::steady_clock::now();
    for (size_t i = 0; i < list.size(); i++) {
      ProgramInstruction& ins = list[i];
      if (tracing) timings[2 * i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
      if (!ins.inPlace)
        for (Tensor& t : ins.outputs) std::memset(t.data, 0, t.bytes());
      try {
        ins.kernel(ins.inputs, ins.outputs, ins.attrs);
      } catch (const std::exception& e) {
        SetError("instruction " + std::to_string(i) + " (" + ins.op + "): " + e.what());
        return;
      }
      if (tracing) timings[2 * i + 1] = std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count();
    }
  }
  void OnOK() override {
    program_->running_ = false;
    deferred_.Resolve(Env().Undefined());
  }
  void OnError(const Napi::Error& e) override {
    program_->running_ = false;
    deferred_.Reject(e.Value());
  }

 private:
  NativeProgram* program_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference keepAlive_;
};

Napi::Function NativeProgram::Define(Napi::Env env) {
  return DefineClass(env, "NativeProgram",
                     {InstanceMethod("set", &NativeProgram::Set), InstanceMethod("get", &NativeProgram::Get),
                      InstanceMethod("run", &NativeProgram::Run), InstanceMethod("arenaBytes", &NativeProgram::ArenaBytes),
                      InstanceMethod("timings", &NativeProgram::Timings)});
}

NativeProgram::NativeProgram(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeProgram>(info) {
  Napi::Env env = info.Env();
  if (info.Length() != 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "NativeProgram({arenaBytes, slots, instructions})");
  Napi::Object desc = info[0].As<Napi::Object>();
  arenaBytes_ = sizeOf(env, desc.Get("arenaBytes"), "arenaBytes");
  // One allocation for the whole step, 64-byte aligned; touched once here so the hot path never faults. Running
  // out of memory is an error, never a crash.
  try {
    storage_.assign(arenaBytes_ + 64, 0);
  } catch (const std::bad_alloc&) {
    throw Napi::Error::New(env, "cannot allocate the program's arena of " + std::to_string(arenaBytes_) + " bytes: out of memory");
  }
  const auto base = reinterpret_cast<uintptr_t>(storage_.data());
  arena_ = storage_.data() + ((64 - base % 64) % 64);
  Napi::Array slots = arrayOf(env, desc.Get("slots"), "slots");
  for (uint32_t i = 0; i < slots.Length(); i++) slots_.push_back(slotOf(env, slots.Get(i), "slot " + std::to_string(i), arena_, arenaBytes_));
  Napi::Array list = arrayOf(env, desc.Get("instructions"), "instructions");
  for (uint32_t i = 0; i < list.Length(); i++) {
    const std::string at = "instruction " + std::to_string(i);
    Napi::Object o = objectOf(env, list.Get(i), at);
    ProgramInstruction ins;
    if (!o.Get("op").IsString()) throw Napi::TypeError::New(env, at + ": op must be a string");
    ins.op = o.Get("op").As<Napi::String>().Utf8Value();
    auto it = kernelRegistry().find(ins.op);
    if (it == kernelRegistry().end()) throw Napi::Error::New(env, "not implemented: native kernel for op '" + ins.op + "'");
    ins.kernel = it->second;
    for (const char* key : {"inputs", "outputs"}) {
      Napi::Array ids = arrayOf(env, o.Get(key), at + ": " + key);
      for (uint32_t k = 0; k < ids.Length(); k++) {
        const size_t id = sizeOf(env, ids.Get(k), at + ": " + key + "[" + std::to_string(k) + "]");
        if (id >= slots_.size()) throw Napi::RangeError::New(env, at + " uses unknown slot " + std::to_string(id));
        (std::strcmp(key, "inputs") == 0 ? ins.inputs : ins.outputs).push_back(slots_[id]);
      }
    }
    ins.attrs = attrsOf(env, o.Get("attrs"), "instruction " + std::to_string(i));
    ins.inPlace = ins.op == "fsm_add_inplace";
    instructions_.push_back(std::move(ins));
  }
}

void NativeProgram::checkIdle(const Napi::Env& env) const {
  if (running_) throw Napi::Error::New(env, "the program is running a step: wait for run() to settle");
}

const Tensor& NativeProgram::slot(const Napi::Env& env, const Napi::Value& v) const {
  if (!v.IsNumber()) throw Napi::TypeError::New(env, "slot must be a number");
  const uint32_t id = v.As<Napi::Number>().Uint32Value();
  if (id >= slots_.size()) throw Napi::RangeError::New(env, "unknown slot " + std::to_string(id));
  return slots_[id];
}

Napi::Value NativeProgram::Set(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  copyIntoTensor(env, slot(env, info[0]), info[1], "set(slot, data)");
  return env.Undefined();
}

Napi::Value NativeProgram::Get(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  return tensorCopy(env, slot(env, info[0]));
}

Napi::Value NativeProgram::Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  // run(trace?): with trace, every instruction's start and end are recorded (timings()).
  tracing_ = info.Length() > 0 && info[0].ToBoolean().Value();
  running_ = true;
  auto* worker = new ProgramWorker(env, this, info.This().As<Napi::Object>());
  Napi::Promise p = worker->Promise();
  worker->Queue();
  return p;
}

Napi::Value NativeProgram::Timings(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  checkIdle(env);
  return timingsArray(env, timings_);
}

Napi::Value NativeProgram::ArenaBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(arenaBytes_));
}

}  // namespace fsm
