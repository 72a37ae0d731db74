// The native kernel contract, mirroring src/interp/kernels/kernel.ts: one function per registry op (forward
// and internal), reading its operands and writing outputs the caller allocated (zero-filled) with the shapes
// the graph gives. Kernels self-register by op name (see REGISTER_KERNEL) so each file owns its ops.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsm {

enum class DType { F32, I32 };

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
  float* f32() const {
    if (dtype != DType::F32) throw std::invalid_argument("kernel operand is not f32");
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    if (dtype != DType::I32) throw std::invalid_argument("kernel operand is not i32");
    return static_cast<int32_t*>(data);
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
