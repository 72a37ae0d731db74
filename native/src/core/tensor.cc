// Attribute accessors and axis normalization (tensor.h): a missing attribute is an internal error naming it.
#include "core/tensor.h"

namespace fsm {

static std::invalid_argument missing(const std::string& name, const char* what) {
  return std::invalid_argument("internal: kernel attribute '" + name + "' must be " + what);
}

double Attrs::number(const std::string& name) const {
  auto it = numbers.find(name);
  if (it == numbers.end()) throw missing(name, "a number");
  return it->second;
}
bool Attrs::boolean(const std::string& name) const {
  auto it = bools.find(name);
  if (it == bools.end()) throw missing(name, "a bool");
  return it->second;
}
const std::string& Attrs::string(const std::string& name) const {
  auto it = strings.find(name);
  if (it == strings.end()) throw missing(name, "a string");
  return it->second;
}
const std::vector<int64_t>& Attrs::shape(const std::string& name) const {
  auto it = shapes.find(name);
  if (it == shapes.end()) throw missing(name, "a shape");
  return it->second;
}
bool Attrs::has(const std::string& name) const {
  return numbers.count(name) || bools.count(name) || strings.count(name) || shapes.count(name);
}

int64_t axisOf(double axis, int64_t rank) {
  int64_t a = static_cast<int64_t>(axis);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) throw std::invalid_argument("internal: axis " + std::to_string(static_cast<int64_t>(axis)) + " out of range for rank " + std::to_string(rank));
  return a;
}

}  // namespace fsm
