// One rank's part of a tensor split over a tensor-parallel group along an axis (tp_slice's `parts`, `axis`
// and `tensor_rank`), as the CPU and CUDA kernels both copy it: every row of everything from the axis on keeps
// its rank's contiguous part.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace fsm {

struct AxisPart {
  int64_t rows = 0;   // blocks before the axis
  int64_t whole = 0;  // elements of one block (the axis and after)
  int64_t part = 0;   // the elements one rank keeps of a block
  int64_t first = 0;  // where this rank's part starts in a block
};

/** `in`'s part for attrs `parts`, `tensor_rank` and `axis` (default the last); checks that `out` holds exactly
 *  it, in `in`'s element type (throws std::invalid_argument naming `op`). */
AxisPart axisPart(const Tensor& in, const Tensor& out, const Attrs& attrs, const char* op);

}  // namespace fsm
