// NumPy broadcasting for the CPU kernels, mirroring src/interp/kernels/broadcast.ts without its per-element
// index maps: a row-major walk over an output shape that carries each operand's flat offset along (strides
// from core/strides.h), so the binary ops, sum_to, matmul's batch dims and transpose share one loop and
// allocate nothing per element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/strides.h"

namespace fsm {

/** Visits every index of `shape` in row-major order; offset(i) is operand i's flat offset there, given its
 *  per-dim strides (from broadcastStrides, or permuted strides for transpose). */
class StridedWalk {
 public:
  StridedWalk(const std::vector<int64_t>& shape, std::vector<std::vector<int64_t>> strides);
  int64_t offset(std::size_t operand) const { return offsets_[operand]; }
  /** Moves to the next index (an odometer over the dims, last dim fastest). */
  void next();

 private:
  std::vector<int64_t> shape_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> counter_;
  std::vector<int64_t> offsets_;
};

}  // namespace fsm
