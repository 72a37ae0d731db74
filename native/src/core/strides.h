// Row-major strides and NumPy broadcasting as strides: the shape arithmetic every device kind's kernels share
// (the CPU's strided walk, the CUDA launchers' index maps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fsm {

/** Strides of a `from`-shaped row-major tensor as read from each index of `out`: right-aligned, 0 along
 *  size-1 and missing dims (they repeat). Throws when `from` does not broadcast to `out`. */
std::vector<int64_t> broadcastStrides(const std::vector<int64_t>& from, const std::vector<int64_t>& out);

/** Row-major strides of a shape. */
std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape);

/** A tensor viewed as [outer, n, inner] around one axis: element i of line (o, j) is at (o·n + i)·inner + j. */
struct AroundAxis {
  int64_t outer = 1, n = 1, inner = 1;
};
/** `shape` around axis `dim` (negative counts from the end; throws when out of range). */
AroundAxis aroundAxis(const std::vector<int64_t>& shape, double dim);

/** "[2,3]". */
std::string shapeString(const std::vector<int64_t>& shape);

}  // namespace fsm
