// The process world for JS (src/runtime/world.ts): whether MPI was built, this process's place (MPI started on
// first ask), and the host exchanges between processes, each off the main thread with a deadline. Without an
// MPI build every call but mpiBuilt throws "built without MPI".
#pragma once

#include <napi.h>

namespace fsm {

// mpiBuilt() -> boolean
Napi::Value mpiBuilt(const Napi::CallbackInfo& info);
// mpiWorld() -> { size, rank, library }
Napi::Value mpiWorld(const Napi::CallbackInfo& info);
// mpiAllGather(bytes: Uint8Array, timeoutSeconds) -> Promise<Uint8Array[]> (one per process, in order)
Napi::Value mpiAllGather(const Napi::CallbackInfo& info);
// mpiBarrier(timeoutSeconds) -> Promise<void>
Napi::Value mpiBarrier(const Napi::CallbackInfo& info);
// mpiFinalize(): MPI_Finalize once (after stopping every communicator's listener); a no-op when never started.
Napi::Value mpiFinalize(const Napi::CallbackInfo& info);

}  // namespace fsm
