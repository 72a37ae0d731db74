// JS entry points to single kernels: runKernel (one op on given operands on a device kind, synchronous; the
// reference executor's native kernels and the kernel parity tests use it), timeKernel (fsm calibrate),
// kernelNames, and deviceReservedBytes (what a GPU device reserves for a program's kernels).
#pragma once
#include <napi.h>

namespace fsm {
Napi::Value runKernel(const Napi::CallbackInfo& info);
Napi::Value kernelNames(const Napi::CallbackInfo& info);
Napi::Value timeKernel(const Napi::CallbackInfo& info);
Napi::Value deviceReservedBytes(const Napi::CallbackInfo& info);
}  // namespace fsm
