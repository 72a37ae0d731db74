// The CPU device kind's kernel table, mirroring src/interp/kernels/kernel.ts: one function per registry op
// (forward and internal), reading its operands and writing outputs the caller allocated (zero-filled unless the
// instruction says otherwise: core/kernel_call.h) with the shapes the graph gives. Kernels self-register by op
// name (REGISTER_KERNEL, at namespace scope in the kernel's own file under device/cpu/kernels/), so each file
// owns its ops and nothing lists them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/kernel_call.h"
#include "core/tensor.h"

namespace fsm {

using KernelFn = std::function<void(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs)>;

/** The id of `op`'s kernel (an index into the table, stable within a process), or -1 when there is none. */
KernelId findCpuKernel(const std::string& op);
const KernelFn& cpuKernel(KernelId id);
/** Every registered op, sorted. */
std::vector<std::string> cpuKernelNames();

struct KernelRegistration {
  KernelRegistration(const char* op, KernelFn fn);
};

}  // namespace fsm

#define FSM_KERNEL_CONCAT2(a, b) a##b
#define FSM_KERNEL_CONCAT(a, b) FSM_KERNEL_CONCAT2(a, b)
/** REGISTER_KERNEL("relu", reluKernel); at namespace scope in the kernel's own file. */
#define REGISTER_KERNEL(op, fn) static ::fsm::KernelRegistration FSM_KERNEL_CONCAT(fsm_kernel_, __LINE__)(op, fn)
