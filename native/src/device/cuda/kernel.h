// What a CUDA kernel file (device/cuda/kernels/*.cu) needs: the launch context a device hands each kernel, the
// kernel table (REGISTER_CUDA_KERNEL, as the CPU's REGISTER_KERNEL: each file registers its own ops under the
// registry's op names), float operands of any storage type, and the reductions and error report kernels share.
// Host launchers take the same (inputs, outputs, attrs) as the CPU kernels and keep their contracts: outputs
// arrive zero-filled unless they overlap an input (core/kernel_call.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/kernel_call.h"
#include "core/tensor.h"
#include "device/cuda/runtime.h"

namespace fsm {
namespace FSM_CUDA_NS {

struct Blas;  // blas.h

/** The first error a kernel found on the device (an index out of range), read back when the step ends. */
struct DeviceError {
  int code;
  int instruction;
  long long value;
  long long limit;
};
enum DeviceErrorCode : int { kErrorNone = 0, kErrorEmbeddingIndex = 1, kErrorTargetIndex = 2 };

/** What a kernel launcher gets besides its operands. */
struct KernelContext {
  cudaStream_t stream{};
  /** The device's multiprocessors: grid-stride kernels size their grids from it. */
  int multiprocessors = 1;
  /** This launch's scratch in device memory (its WorkspaceFn's bytes, 256-byte aligned), reserved when the
   *  program was bound: nothing is allocated during a step. */
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  /** cuBLAS for this stream (blas.h). */
  const Blas* blas = nullptr;
  /** Where kernels report errors (device memory), and the instruction to blame. */
  DeviceError* error = nullptr;
  int instruction = -1;
};

using LaunchFn = void (*)(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs);
/** Scratch bytes a launch needs for these operands (0 when it needs none). */
using WorkspaceFn = size_t (*)(const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs& attrs);

/** Whether a kernel calls cuBLAS (the device then binds a handle to the stream it runs on). */
enum class UsesBlas : bool { No = false, Yes = true };
/** Whether a kernel writes every element of every output: then the device skips zeroing them first (a memset
 *  launch and a pass over the bytes each) — the contract's zeros matter only to kernels that leave some. */
enum class FillsOutputs : bool { No = false, Yes = true };

struct KernelEntry {
  LaunchFn launch = nullptr;
  WorkspaceFn workspace = nullptr;
  UsesBlas blas = UsesBlas::No;
  FillsOutputs fills = FillsOutputs::No;
};

/** The kernel for `op` in this build's table, or -1. */
KernelId findKernel(const std::string& op);
const KernelEntry& kernelEntry(KernelId id);
/** Every registered op, sorted. */
std::vector<std::string> kernelNames();

struct KernelRegistration {
  KernelRegistration(const char* op, LaunchFn launch, WorkspaceFn workspace = nullptr, UsesBlas blas = UsesBlas::No,
                     FillsOutputs fills = FillsOutputs::No);
};

// --- float operands of any storage ----------------------------------------------------------------------

enum FloatType : int { kF32 = 0, kBF16 = 1, kF16 = 2 };

/** A float operand read as f32 whatever it is stored as (the branch is uniform across a launch). */
struct Floats {
  const void* data;
  int type;
  FSM_HD float operator[](int64_t i) const {
    if (type == kF32) return static_cast<const float*>(data)[i];
    const uint16_t h = static_cast<const uint16_t*>(data)[i];
    return type == kBF16 ? fromBf16(h) : fromF16(h);
  }
};

/** A float output written from f32 (rounded to nearest even into 16-bit storage). */
struct FloatsOut {
  void* data;
  int type;
  FSM_HD void set(int64_t i, float v) const {
    if (type == kF32) static_cast<float*>(data)[i] = v;
    else static_cast<uint16_t*>(data)[i] = type == kBF16 ? toBf16(v) : toF16(v);
  }
  FSM_HD float operator[](int64_t i) const { return Floats{data, type}[i]; }
};

/** The float type of a tensor; throws for i32 ("what" names the operand). */
int floatTypeOf(const Tensor& t, const char* what);
inline Floats floatsIn(const Tensor& t, const char* what = "operand") { return {t.data, floatTypeOf(t, what)}; }
inline FloatsOut floatsOut(const Tensor& t, const char* what = "output") { return {t.data, floatTypeOf(t, what)}; }
/** An i32 operand; throws for anything else. */
inline const int32_t* intsIn(const Tensor& t) { return t.i32(); }

// --- grids -----------------------------------------------------------------------------------------------

/** Blocks for a grid-stride loop over n items, `threads` a block: enough to fill the device (8 resident blocks
 *  a multiprocessor), no more than the items need. */
inline unsigned blocksFor(const KernelContext& ctx, int64_t n, int threads) {
  const int64_t need = (n + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(ctx.multiprocessors) * 8;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(need, cap)));
}

/** A CUDA grid dimension; throws past CUDA's limits (y and z: 65535). */
unsigned gridDimension(int64_t n, const char* what, int64_t limit = 65535);

}  // namespace FSM_CUDA_NS
}  // namespace fsm

#define FSM_CUDA_CONCAT2(a, b) a##b
#define FSM_CUDA_CONCAT(a, b) FSM_CUDA_CONCAT2(a, b)
/** REGISTER_CUDA_KERNEL("relu", launchRelu[, workspaceBytes[, UsesBlas::Yes[, FillsOutputs::Yes]]]); at
 *  namespace FSM_CUDA_NS scope in the kernel's own file. */
#define REGISTER_CUDA_KERNEL(op, ...) \
  static ::fsm::FSM_CUDA_NS::KernelRegistration FSM_CUDA_CONCAT(fsm_cuda_kernel_, __LINE__)(op, __VA_ARGS__)
