// Device::run (device.h): zero the flagged outputs, then launch — the one place a kernel call happens; and the
// memory-limit refusal every kind shares.
#include "device/device.h"

#include "core/failure.h"

namespace fsm {

void Device::refuseOverLimit(size_t bytes, std::optional<size_t> limitBytes) {
  if (!limitBytes || bytes <= *limitBytes) return;
  Failure f = failureAt(FailureKind::Oom, JsClass::RangeError, {},
                        "its arena of " + std::to_string(bytes) + " bytes exceeds its memory limit of " + std::to_string(*limitBytes) + " bytes");
  f.arenaBytes = bytes;
  f.limitBytes = *limitBytes;
  throw FailureError(f);
}

void Device::run(int stream, KernelCall& call) {
  const bool fills = fillsOutputs(call.kernel);
  for (size_t k = 0; k < call.outputs.size() && !fills; k++) {
    if (call.zero[k]) zero(stream, call.outputs[k].data, call.outputs[k].bytes());
  }
  launch(stream, call);
}

}  // namespace fsm
