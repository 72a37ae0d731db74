// buildInfo(): how this addon was built (BLAS kind, Node-API version, compiler) and the host's thread count.
#pragma once

#include <napi.h>

namespace fsm {

// buildInfo() -> { blas: "openblas" | "fallback", napiVersion, compiler, threads }
Napi::Value buildInfo(const Napi::CallbackInfo& info);

}  // namespace fsm
