// The per-device tensor-parallel ops (src/interp/kernels/tensor-parallel.ts): tp_copy (Megatron's "f": the
// value passes into a tensor-parallel region unchanged) and tp_slice (a device keeps its part of a replicated
// tensor's last dimension). The group's collectives (tp_all_reduce, tp_all_gather) are no kernels: lowering
// turns them into communicator calls (src/lower/tensor-parallel.ts).
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

// Columns [rank·n, (rank+1)·n) of every row of x [..., parts·n]; `tensor_rank` is the device's rank in its
// group, which lowering adds (the graph's op is the same on every rank).
void tpSlice(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t parts = static_cast<int64_t>(attrs.number("parts"));
  const int64_t rank = static_cast<int64_t>(attrs.number("tensor_rank"));
  const int64_t whole = in[0].shape.empty() ? 1 : in[0].shape.back();
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
