// KernelCall: one kernel launch as a device receives it (kernel id, operands, attributes) with which outputs to
// zero first; outputsToZero is the one rule for that.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace fsm {

/** A kernel as a device resolved it (Device::resolve): an index into that device kind's kernel table. */
using KernelId = int32_t;

struct KernelCall {
  KernelId kernel = -1;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  Attrs attrs;
  /** Per output: zeroed before the kernel runs (the kernel contract: outputs arrive zero-filled). */
  std::vector<uint8_t> zero;
  /** Its instruction in the device's program (-1 outside one): what a device reports an error against. */
  int64_t instruction = -1;
  /** The stream it runs on (compute 0, communication 1): the two run at once, so a device keeps their
   *  kernels' scratch apart. */
  int stream = 0;
};

/** Which outputs to zero before the kernel runs: all of them, except when the call updates its operands in
 *  place (`inPlace`: an optimizer writing over the parameter) and except an output whose bytes overlap any
 *  input's (an accumulator that is also its first operand): zeroing it would destroy that input. */
std::vector<uint8_t> outputsToZero(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, bool inPlace);

}  // namespace fsm
