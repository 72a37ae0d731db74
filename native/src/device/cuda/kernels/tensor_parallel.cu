// tp_slice on the CUDA device, as device/cpu/kernels/tensor_parallel.cc: a device's part of a replicated
// tensor along an axis. tp_copy is fsm_copy (program_ops.cu); the group's collectives are communicator calls,
// not kernels (src/lower/tensor-parallel.ts).
#include "core/axis_part.h"
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// Element k of the output (row r, position c of the part) is x's element first + c of row r; moved as raw
// bytes of `e` each (f32, or 16-bit bits), so one kernel serves every storage type.
__global__ void sliceKernel(const uint8_t* x, uint8_t* y, int64_t rows, int64_t whole, int64_t part, int64_t first, int64_t e) {
  const int64_t total = rows * part;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / part, c = k % part;
    const uint8_t* from = x + (r * whole + first + c) * e;
    uint8_t* to = y + k * e;
    for (int64_t b = 0; b < e; b++) to[b] = from[b];
  }
}

void tpSlice(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AxisPart p = axisPart(in[0], out[0], attrs, "tp_slice");
  if (p.rows * p.part == 0) return;
  launch(ctx, sliceKernel, dim3(blocksFor(ctx, p.rows * p.part, kThreads)), dim3(kThreads), 0, static_cast<const uint8_t*>(in[0].data), static_cast<uint8_t*>(out[0].data), p.rows,
         p.whole, p.part, p.first, static_cast<int64_t>(elementBytes(in[0].dtype)));
}

}  // namespace

REGISTER_CUDA_KERNEL("tp_slice", tpSlice, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
