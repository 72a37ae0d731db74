// The zeroing rule (kernel_call.h).
#include "core/kernel_call.h"

namespace fsm {

std::vector<uint8_t> outputsToZero(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, bool inPlace) {
  std::vector<uint8_t> zero(outputs.size(), inPlace ? 0 : 1);
  for (size_t k = 0; k < outputs.size() && !inPlace; k++) {
    for (const Tensor& in : inputs) {
      if (overlaps(outputs[k].data, outputs[k].bytes(), in.data, in.bytes())) zero[k] = 0;
    }
  }
  return zero;
}

}  // namespace fsm
