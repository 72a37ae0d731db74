// Slot helpers and Plugin::allowOnly (program.h).
#include "core/program.h"

#include "core/failure.h"

namespace fsm {

size_t Slot::bytes() const {
  size_t n = elementBytes(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

Tensor Slot::at(uint8_t* base) const {
  Tensor t;
  t.dtype = dtype;
  t.shape = shape;
  t.data = base + offset;
  return t;
}

void Plugin::allowOnly(std::initializer_list<const char*> known) const {
  auto check = [&](const std::string& name) {
    for (const char* k : known) {
      if (name == k) return;
    }
    refuse(JsClass::TypeError, {}, field + ": " + field + " kind " + kind + " has no option '" + name + "'");
  };
  for (const auto& [k, v] : options.numbers) check(k);
  for (const auto& [k, v] : options.bools) check(k);
  for (const auto& [k, v] : options.strings) check(k);
  for (const auto& [k, v] : options.shapes) check(k);
}

}  // namespace fsm
