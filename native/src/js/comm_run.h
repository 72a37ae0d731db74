// commRun: drives the in-process communicator from JS for tests — one std::thread per rank running a script of
// collectives, sends and receives on a worker thread, behind a Promise (with jitter, through the delay
// decorator of comm/testing).
#pragma once

#include <napi.h>

namespace fsm {

// commRun(worldSize, script, options?) -> Promise<(Float32Array | null)[][]>. script[r] is rank r's list of
// operations ({op: "allReduce" | "reduceScatter" | "allGather" | "broadcast" | "reduce" | "send" | "recv" |
// "abort" | "sleep", ...}, see src/native/binding.ts); options: {timeoutMs, jitterMicros, seed}. Resolves with
// each rank's per-operation outputs (null for operations without one); rejects with the communicator's first
// abort message (an Error with failure fields: kind timeout / comm / aborted) when it was aborted. A malformed
// script throws synchronously.
Napi::Value commRun(const Napi::CallbackInfo& info);

}  // namespace fsm
