// The per-device tensor-parallel ops on the CUDA device, as device/cpu/kernels/tensor_parallel.cc: tp_copy
// (bits copied on the stream) and tp_slice (a device's part of a replicated tensor's last dimension). The
// group's collectives are communicator calls, not kernels (src/lower/tensor-parallel.ts).
#include <algorithm>

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
  // Along `axis` (default the last): a row is everything from the axis on, of which the rank keeps 1/parts.
  const int64_t rank0 = in[0].rank();
  const int64_t axis = attrs.has("axis") ? static_cast<int64_t>(attrs.number("axis")) : rank0 - 1;
  if (rank0 > 0 && (axis < 0 || axis >= rank0)) throw std::invalid_argument("tp_slice: axis " + std::to_string(axis) + " of a rank-" + std::to_string(rank0) + " operand");
  int64_t whole = 1;
  for (int64_t i = std::max<int64_t>(axis, 0); i < rank0; i++) whole *= in[0].shape[static_cast<size_t>(i)];
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
