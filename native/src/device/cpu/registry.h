// The CPU device kind's kernel table, mirroring src/interp/kernels/kernel.ts: one function per registry op
// (forward and internal), reading its operands and writing outputs the caller allocated (zero-filled unless the
// instruction says otherwise: core/kernel_call.h, or the kernel is registered as writing every element of
// every output: FillsOutputs::Yes, when the device skips the zeroing) with the shapes the graph gives. Kernels
// self-register by op name (REGISTER_KERNEL, at namespace scope in the kernel's own file under
// device/cpu/kernels/), so each file owns its ops and nothing lists them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/kernel_call.h"
#include "core/tensor.h"

namespace fsm {

using KernelFn = std::function<void(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs)>;

/** Whether a kernel writes every element of every output whatever its operands' values: then the device skips
 *  zeroing them first (Device::fillsOutputs). A kernel that adds into its output or leaves parts of it (a
 *  scatter-add, an accumulator) relies on the zeros and says No. */
enum class FillsOutputs : bool { No = false, Yes = true };

/** The id of `op`'s kernel (an index into the table, stable within a process), or -1 when there is none. */
KernelId findCpuKernel(const std::string& op);
const KernelFn& cpuKernel(KernelId id);
/** Whether the kernel was registered with FillsOutputs::Yes. */
bool cpuKernelFillsOutputs(KernelId id);
/** Every registered op, sorted. */
std::vector<std::string> cpuKernelNames();

struct KernelRegistration {
  KernelRegistration(const char* op, KernelFn fn, FillsOutputs fills = FillsOutputs::No);
};

}  // namespace fsm

#define FSM_KERNEL_CONCAT2(a, b) a##b
#define FSM_KERNEL_CONCAT(a, b) FSM_KERNEL_CONCAT2(a, b)
/** REGISTER_KERNEL("relu", reluKernel[, FillsOutputs::Yes]); at namespace scope in the kernel's own file. */
#define REGISTER_KERNEL(op, ...) static ::fsm::KernelRegistration FSM_KERNEL_CONCAT(fsm_kernel_, __LINE__)(op, __VA_ARGS__)
