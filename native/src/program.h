// NativeProgram: a lowered training step (src/runtime/step-program.ts) held natively — one arena allocated
// once, every instruction's kernel and operands resolved once — run as a whole on a worker thread.
#pragma once
#include <napi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernel.h"

namespace fsm {

struct ProgramInstruction {
  std::string op;
  KernelFn kernel;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
  /** Its output is an input (fsm_add_inplace): not zeroed before the kernel runs. */
  bool inPlace = false;
};

class NativeProgram : public Napi::ObjectWrap<NativeProgram> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit NativeProgram(const Napi::CallbackInfo& info);

 private:
  friend class ProgramWorker;
  Napi::Value Set(const Napi::CallbackInfo& info);
  Napi::Value Get(const Napi::CallbackInfo& info);
  Napi::Value Run(const Napi::CallbackInfo& info);
  Napi::Value ArenaBytes(const Napi::CallbackInfo& info);
  Napi::Value Timings(const Napi::CallbackInfo& info);
  const Tensor& slot(const Napi::Env& env, const Napi::Value& v) const;
  void checkIdle(const Napi::Env& env) const;

  std::vector<uint8_t> storage_;
  uint8_t* arena_ = nullptr;  // storage_ aligned up to 64 bytes
  size_t arenaBytes_ = 0;
  std::vector<Tensor> slots_;
  std::vector<ProgramInstruction> instructions_;
  std::atomic<bool> running_{false};
  bool tracing_ = false;
  /** Per instruction of the last traced run: start and end, seconds from the run's start. */
  std::vector<double> timings_;
};

}  // namespace fsm
