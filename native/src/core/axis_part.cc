#include "core/axis_part.h"

#include <stdexcept>
#include <string>

#include "core/strides.h"

namespace fsm {

AxisPart axisPart(const Tensor& in, const Tensor& out, const Attrs& attrs, const char* op) {
  const int64_t parts = static_cast<int64_t>(attrs.number("parts"));
  const int64_t rank = static_cast<int64_t>(attrs.number("tensor_rank"));
  const AroundAxis g = aroundAxis(in.shape, attrs.has("axis") ? attrs.number("axis") : -1);
  const int64_t whole = g.n * g.inner;
  if (parts < 1 || whole % parts != 0 || rank < 0 || rank >= parts) {
    throw std::invalid_argument(std::string(op) + ": a block of " + std::to_string(whole) + " elements has no part " + std::to_string(rank) + " of " + std::to_string(parts));
  }
  const AxisPart p{g.outer, whole, whole / parts, rank * (whole / parts)};
  if (out.numel() != p.rows * p.part || in.dtype != out.dtype) throw std::invalid_argument(std::string(op) + ": the output is not one part of the operand");
  return p;
}

}  // namespace fsm
