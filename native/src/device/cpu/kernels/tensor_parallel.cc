// The per-device tensor-parallel ops (src/interp/kernels/tensor-parallel.ts): tp_copy (Megatron's "f": the
// value passes into a tensor-parallel region unchanged) and tp_slice (a device keeps its part of a replicated
// tensor's last dimension). The group's collectives (tp_all_reduce, tp_all_gather) are no kernels: lowering
// turns them into communicator calls (src/lower/tensor-parallel.ts).
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

// Moves bits, so it copies any element type (16-bit storage included).
void tpCopy(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].numel() != out[0].numel() || in[0].dtype != out[0].dtype) throw std::invalid_argument("tp_copy: operands differ in size or type");
  std::memcpy(out[0].data, in[0].data, in[0].bytes());
}

// Part `rank` of every row of x along `axis` (the last by default: columns [rank·n, (rank+1)·n) of x [...,
// parts·n]; the sequence's under sequence parallelism); `tensor_rank` is the device's rank in its group,
// which lowering adds (the graph's op is the same on every rank).
void tpSlice(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t parts = static_cast<int64_t>(attrs.number("parts"));
  const int64_t rank = static_cast<int64_t>(attrs.number("tensor_rank"));
  // Along `axis` (default the last): a row is everything from the axis on, of which the rank keeps 1/parts.
  const int64_t rank0 = in[0].rank();
  const int64_t axis = attrs.has("axis") ? static_cast<int64_t>(attrs.number("axis")) : rank0 - 1;
  if (rank0 > 0 && (axis < 0 || axis >= rank0)) throw std::invalid_argument("tp_slice: axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank0) + " operand");
  int64_t whole = 1;
  for (int64_t i = std::max<int64_t>(axis, 0); i < rank0; i++) whole *= in[0].shape[static_cast<size_t>(i)];
  if (parts < 1 || whole % parts != 0 || rank < 0 || rank >= parts) {
    throw std::invalid_argument("tp_slice: a last dimension of " + std::to_string(whole) + " has no part " + std::to_string(rank) + " of " + std::to_string(parts));
  }
  const int64_t n = whole / parts;
  const int64_t rows = in[0].numel() / whole;
  if (out[0].numel() != rows * n || in[0].dtype != out[0].dtype) throw std::invalid_argument("tp_slice: the output is not one part of the operand");
  const size_t e = elementBytes(in[0].dtype);
  const auto* x = static_cast<const uint8_t*>(in[0].data);
  auto* y = static_cast<uint8_t*>(out[0].data);
  for (int64_t r = 0; r < rows; r++) std::memcpy(y + static_cast<size_t>(r * n) * e, x + static_cast<size_t>(r * whole + rank * n) * e, static_cast<size_t>(n) * e);
}

}  // namespace

REGISTER_KERNEL("tp_copy", tpCopy);
REGISTER_KERNEL("tp_slice", tpSlice);

}  // namespace fsm
