// JS entry points to single kernels on the CPU device: runKernel (one op on given operands, synchronous; the
// reference executor's native kernels and the kernel parity tests use it), timeKernel (fsm calibrate) and
// kernelNames.
#pragma once
#include <napi.h>

namespace fsm {
Napi::Value runKernel(const Napi::CallbackInfo& info);
Napi::Value kernelNames(const Napi::CallbackInfo& info);
Napi::Value timeKernel(const Napi::CallbackInfo& info);
}  // namespace fsm
