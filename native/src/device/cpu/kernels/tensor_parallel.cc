// tp_slice (src/interp/kernels/tensor-parallel.ts): a device keeps its part of a replicated tensor along an
// axis (the last, or the sequence's under sequence parallelism); `tensor_rank` is the device's rank in its
// group, which lowering adds (the graph's op is the same on every rank). tp_copy is fsm_copy
// (program_ops.cc); the group's collectives are no kernels: lowering turns them into communicator calls
// (src/lower/tensor-parallel.ts).
#include <cstring>

#include "core/axis_part.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

// Moves bytes, so it copies any element type (16-bit storage included).
void tpSlice(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AxisPart p = axisPart(in[0], out[0], attrs, "tp_slice");
  const size_t e = elementBytes(in[0].dtype);
  const auto* x = static_cast<const uint8_t*>(in[0].data);
  auto* y = static_cast<uint8_t*>(out[0].data);
  for (int64_t r = 0; r < p.rows; r++) std::memcpy(y + static_cast<size_t>(r * p.part) * e, x + static_cast<size_t>(r * p.whole + p.first) * e, static_cast<size_t>(p.part) * e);
}

}  // namespace

REGISTER_KERNEL("tp_slice", tpSlice, FillsOutputs::Yes);

}  // namespace fsm
