// Strides and broadcasting (strides.h).
#include "core/strides.h"

#include <stdexcept>

#include "core/tensor.h"

namespace fsm {

std::string shapeString(const std::vector<int64_t>& s) {
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

AroundAxis aroundAxis(const std::vector<int64_t>& shape, double dim) {
  const int64_t a = axisOf(dim, static_cast<int64_t>(shape.size()));
  AroundAxis r;
  for (int64_t i = 0; i < a; i++) r.outer *= shape[i];
  r.n = shape[a];
  for (size_t i = static_cast<size_t>(a) + 1; i < shape.size(); i++) r.inner *= shape[i];
  return r;
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

}  // namespace fsm
