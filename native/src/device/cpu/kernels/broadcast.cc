// The strided walk (broadcast.h).
#include "device/cpu/kernels/broadcast.h"

namespace fsm {

StridedWalk::StridedWalk(const std::vector<int64_t>& shape, std::vector<std::vector<int64_t>> strides)
    : shape_(shape), strides_(std::move(strides)), counter_(shape.size(), 0), offsets_(strides_.size(), 0) {}

void StridedWalk::next() {
  for (size_t d = shape_.size(); d-- > 0;) {
    for (size_t i = 0; i < strides_.size(); i++) offsets_[i] += strides_[i][d];
    if (++counter_[d] < shape_[d]) return;
    // This dim wrapped: rewind it and carry into the next slower one.
    for (size_t i = 0; i < strides_.size(); i++) offsets_[i] -= strides_[i][d] * shape_[d];
    counter_[d] = 0;
  }
}

}  // namespace fsm
