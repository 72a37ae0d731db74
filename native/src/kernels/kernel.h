// The native kernel contract, mirroring src/interp/kernels/kernel.ts: one function per registry op (forward
// and internal), reading its operands and writing outputs the caller allocated (zero-filled) with the shapes
// the graph gives. Kernels self-register by op name (see REGISTER_KERNEL) so each file owns its ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

/** A tensor the kernel reads or writes; storage belongs to the caller. */
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

/** An op's attributes, already concrete: dims evaluated at the run's B and S by the caller. */
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

using KernelFn = std::function<void(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs)>;

/** Every registered kernel by op name. */
std::map<std::string, KernelFn>& kernelRegistry();

struct KernelRegistration {
  KernelRegistration(const char* op, KernelFn fn);
};

/** Python-style axis → index in [0, rank); throws when out of range. */
int64_t axisOf(double axis, int64_t rank);

}  // namespace fsm

#define FSM_KERNEL_CONCAT2(a, b) a##b
#define FSM_KERNEL_CONCAT(a, b) FSM_KERNEL_CONCAT2(a, b)
/** REGISTER_KERNEL("relu", reluKernel); at namespace scope in the kernel's own file. */
#define REGISTER_KERNEL(op, fn) static ::fsm::KernelRegistration FSM_KERNEL_CONCAT(fsm_kernel_, __LINE__)(op, fn)
