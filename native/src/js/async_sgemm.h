// sgemmAsync: repeated sgemm on a libuv worker thread behind a Promise (a PromiseWorker: core/async.h).
#pragma once

#include <napi.h>

namespace fsm {

// sgemmAsync(transA, transB, M, N, K, alpha, A, B, beta, C, repeats) -> Promise<number>: applies the sgemm
// update to C `repeats` times off the main thread and resolves with the elapsed seconds of those calls.
Napi::Value sgemmAsync(const Napi::CallbackInfo& info);

}  // namespace fsm
