// The data vocabulary every role shares: element types, Tensor (a typed view of bytes some device owns) and a
// kernel's concrete attributes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsm {

/** Element types. BF16 and F16 are storage only: kernels compute in f32, and fsm_cast converts to and from
 *  them, so only that kernel (and fsm_copy, which moves bits) reads or writes 16-bit tensors. */
enum class DType { F32, I32, BF16, F16 };

/** Bytes per element: 4 for F32 and I32, 2 for BF16 and F16. */
inline size_t elementBytes(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16 ? 2 : 4; }

/** "f32", "i32", "bf16" or "f16": the name JS descriptions use. */
inline const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
  }
  return "?";
}

/** The dtype named `name` ("f32", "i32", "bf16", "f16"); false for any other name. */
inline bool parseDType(const std::string& name, DType& out) {
  if (name == "f32") out = DType::F32;
  else if (name == "i32") out = DType::I32;
  else if (name == "bf16") out = DType::BF16;
  else if (name == "f16") out = DType::F16;
  else return false;
  return true;
}

/** A tensor a kernel reads or writes; its storage belongs to the caller (a device's arena, or JS arrays). */
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  void* data = nullptr;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /** numel · elementBytes(dtype). */
  size_t bytes() const { return static_cast<size_t>(numel()) * elementBytes(dtype); }
  float* f32() const {
    if (dtype != DType::F32) throw std::invalid_argument("kernel operand is not f32");
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    if (dtype != DType::I32) throw std::invalid_argument("kernel operand is not i32");
    return static_cast<int32_t*>(data);
  }
  /** The raw bits of a BF16 or F16 tensor. */
  uint16_t* u16() const {
    if (dtype != DType::BF16 && dtype != DType::F16) throw std::invalid_argument("kernel operand is not bf16 or f16");
    return static_cast<uint16_t*>(data);
  }
};

/** Whether two byte ranges share a byte (empty ones share none). */
inline bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto* a0 = static_cast<const uint8_t*>(a);
  const auto* b0 = static_cast<const uint8_t*>(b);
  return aBytes > 0 && bBytes > 0 && a0 < b0 + bBytes && b0 < a0 + aBytes;
}

/** An op's attributes, already concrete: dims evaluated at the run's B and S by the caller. Also the options
 *  of a device or communicator kind in a description (`device: {kind, ...}`). */
struct Attrs {
  std::map<std::string, double> numbers;
  std::map<std::string, bool> bools;
  std::map<std::string, std::string> strings;
  std::map<std::string, std::vector<int64_t>> shapes;

  double number(const std::string& name) const;
  bool boolean(const std::string& name) const;
  const std::string& string(const std::string& name) const;
  const std::vector<int64_t>& shape(const std::string& name) const;
  bool has(const std::string& name) const;
};

/** Python-style axis → index in [0, rank); throws when out of range. */
int64_t axisOf(double axis, int64_t rank);

}  // namespace fsm
