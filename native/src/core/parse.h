// The one parser of a program description (src/native/binding.ts: NativeClusterDescription): every slot,
// instruction, wait, guard and communication operand checked once, so a step only calls kernels and the
// communicator. Kernel names and the device / communicator options are the kinds' to check (device/create.h,
// comm/create.h): they depend on the kind.
#pragma once
#include <napi.h>

#include "core/program.h"

namespace fsm {

/** Throws FailureError (kind description, with the device and instruction when known) for anything malformed. */
Program parseProgram(const Napi::Object& description);

}  // namespace fsm
