// buildInfo(): how this addon was built (BLAS kind, Node-API version, compiler) and the host's thread count.
#pragma once

#include <napi.h>

namespace fsm {

// buildInfo() -> { blas: "openblas" | "fallback", napiVersion, compiler, threads, mpi, cuda }
Napi::Value buildInfo(const Napi::CallbackInfo& info);

// gpuKind(kind) -> { devices, none, driverVersion, runtimeVersion, gpus: [{name, memoryBytes, multiprocessors,
// major, minor}] } for "simt" or "cuda" (null when this addon has no cuda build).
Napi::Value gpuKind(const Napi::CallbackInfo& info);

// gpuMemory(kind, ordinal) -> { freeBytes, totalBytes } of a GPU as the driver reports it now.
Napi::Value gpuMemory(const Napi::CallbackInfo& info);

}  // namespace fsm
