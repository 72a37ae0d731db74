// Broadcast strides and the strided walk (broadcast.h).
#include "device/cpu/kernels/broadcast.h"

#include <stdexcept>
#include <string>

namespace fsm {

static std::string shapeString(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); i++) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t>& from, const std::vector<int64_t>& out) {
  const size_t r = out.size();
  if (from.size() > r) throw std::invalid_argument("internal: cannot broadcast " + shapeString(from) + " to " + shapeString(out));
  const size_t off = r - from.size();
  std::vector<int64_t> st(r, 0);
  int64_t s = 1;
  for (size_t i = from.size(); i-- > 0;) {
    const int64_t f = from[i];
    if (f != 1 && f != out[i + off]) throw std::invalid_argument("internal: cannot broadcast " + shapeString(from) + " to " + shapeString(out));
    st[i + off] = f == 1 ? 0 : s;
    s *= f;
  }
  return st;
}

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = s;
    s *= shape[i];
  }
  return st;
}

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
