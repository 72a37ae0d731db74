// Device::run (device.h): zero the flagged outputs, then launch — the one place a kernel call happens.
#include "device/device.h"

namespace fsm {

void Device::run(int stream, KernelCall& call) {
  const bool fills = fillsOutputs(call.kernel);
  for (size_t k = 0; k < call.outputs.size() && !fills; k++) {
    if (call.zero[k]) zero(stream, call.outputs[k].data, call.outputs[k].bytes());
  }
  launch(stream, call);
}

}  // namespace fsm
