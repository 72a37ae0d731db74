// The CUDA runtime API as device/cuda/ sees it: cudart (linked statically) for the GPU build, the emulator's
// host stand-ins (simt/runtime.h) for FSM_SIMT. Code in namespace FSM_CUDA_NS calls it unqualified.
#pragma once

#include "device/cuda/dialect.h"

#ifdef FSM_SIMT
#include "device/cuda/simt/runtime.h"
#else
#include <cuda_runtime.h>
#endif
