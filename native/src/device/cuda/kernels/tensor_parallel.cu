// The per-device tensor-parallel ops on the CUDA device, as device/cpu/kernels/tensor_parallel.cc: tp_copy
// (bits copied on the stream) and tp_slice (a device's part of a replicated tensor's last dimension). The
// group's collectives are communicator calls, not kernels (src/lower/tensor-parallel.ts).
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

void tpCopy(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].numel() != out[0].numel() || in[0].dtype != out[0].dtype) throw std::invalid_argument("tp_copy: operands differ in size or type");
  if (in[0].data != out[0].data) copyOnDevice(ctx, out[0].data, in[0].data, in[0].bytes());
}

// Element k of the output (row r, column c of n) is x's column part·n + c of row r; moved as raw bytes of
// `e` each (f32, or 16-bit bits), so one kernel serves every storage type.
__global__ void sliceKernel(const uint8_t* x, uint8_t* y, int64_t rows, int64_t whole, int64_t n, int64_t first, int64_t e) {
  const int64_t total = rows * n;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / n, c = k % n;
    const uint8_t* from = x + (r * whole + first + c) * e;
    uint8_t* to = y + k * e;
    for (int64_t b = 0; b < e; b++) to[b] = from[b];
  }
}

void tpSlice(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t parts = static_cast<int64_t>(attrs.number("parts"));
  const int64_t rank = static_cast<int64_t>(attrs.number("tensor_rank"));
  const int64_t whole = in[0].shape.empty() ? 1 : in[0].shape.back();
  if (parts < 1 || whole % parts != 0 || rank < 0 || rank >= parts) {
    throw std::invalid_argument("tp_slice: a last dimension of " + std::to_string(whole) + " has no part " + std::to_string(rank) + " of " + std::to_string(parts));
  }
  const int64_t n = whole / parts;
  const int64_t rows = whole == 0 ? 0 : in[0].numel() / whole;
  if (out[0].numel() != rows * n || in[0].dtype != out[0].dtype) throw std::invalid_argument("tp_slice: the output is not one part of the operand");
  if (rows * n == 0) return;
  const int64_t e = static_cast<int64_t>(elementBytes(in[0].dtype));
  launch(ctx, sliceKernel, dim3(blocksFor(ctx, rows * n, kThreads)), dim3(kThreads), 0, static_cast<const uint8_t*>(in[0].data), static_cast<uint8_t*>(out[0].data), rows, whole, n,
         rank * n, e);
}

}  // namespace

REGISTER_CUDA_KERNEL("tp_copy", tpCopy, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("tp_slice", tpSlice, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
