// Index maps for CUDA kernels over shapes: an output's row-major linear index decoded into up to two
// operands' element offsets through per-dim strides (broadcast strides from core/strides.h, or permuted
// ones for a transpose). Built on the host, passed to kernels by value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/strides.h"
#include "device/cuda/dialect.h"

namespace fsm {
namespace FSM_CUDA_NS {

constexpr int kMaxRank = 8;

struct IndexMap {
  int rank;
  int64_t shape[kMaxRank];
  int64_t stride[2][kMaxRank];

  /** Offsets of output element k in operands 0 and 1. */
  FSM_HD void offsets(int64_t k, int64_t& o0, int64_t& o1) const {
    o0 = 0;
    o1 = 0;
    for (int d = rank - 1; d >= 0; d--) {
      const int64_t i = k % shape[d];
      k /= shape[d];
      o0 += i * stride[0][d];
      o1 += i * stride[1][d];
    }
  }
};

/** The map over `shape` with operand strides s0 and s1 (s1 may be empty: then all zero). Throws past
 *  kMaxRank dims. */
inline IndexMap indexMap(const std::vector<int64_t>& shape, const std::vector<int64_t>& s0, const std::vector<int64_t>& s1 = {}) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    throw std::invalid_argument("not implemented: CUDA kernels over tensors of more than " + std::to_string(kMaxRank) + " dimensions");
  }
  IndexMap m{};
  m.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); d++) {
    m.shape[d] = shape[d];
    m.stride[0][d] = s0[d];
    m.stride[1][d] = s1.empty() ? 0 : s1[d];
  }
  return m;
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
