// Device code every kernel file shares (included only by device/cuda/kernels/*.cu): launching a kernel on the
// context's stream, warp and block reductions, and the error report. Reductions are fixed trees (the same
// order every run), so results are deterministic; no kernel uses floating-point atomics.
#pragma once

#include <string>

#include "device/cuda/kernel.h"

namespace fsm {
namespace FSM_CUDA_NS {

/** kernel<<<grid, block, sharedBytes, ctx.stream>>>(args...); a launch the driver refuses throws. */
template <typename... Params, typename... Args>
void launch(const KernelContext& ctx, void (*kernel)(Params...), dim3 grid, dim3 block, size_t sharedBytes, Args... args) {
#ifdef FSM_SIMT
  (void)ctx;
  launchOn(kernel, grid, block, sharedBytes, args...);
#else
  kernel<<<grid, block, sharedBytes, ctx.stream>>>(args...);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA kernel launch failed: ") + cudaGetErrorString(e));
#endif
}

/** `bytes` of device memory from `from` to `to` on the context's stream (a copy kernel of the driver's). */
inline void copyOnDevice(const KernelContext& ctx, void* to, const void* from, size_t bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, ctx.stream);
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA copy failed: ") + cudaGetErrorString(e));
}

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

/** The sum of v over a 1-D block whose size is a multiple of 32, returned to every thread; `scratch` is 32
 *  floats of shared memory. Every thread must call it (it holds barriers). */
__device__ __forceinline__ float blockSum(float v, float* scratch) {
  v = warpSum(v);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (unsigned w = 0; w < warps; w++) total += scratch[w];
  return total;
}

/** blockSum in double (sums the CPU forms in double); `scratch` is 32 doubles of shared memory. */
__device__ __forceinline__ double blockSumDouble(double v, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (unsigned w = 0; w < warps; w++) total += scratch[w];
  return total;
}

/** The max of v over the block, as blockSum. */
__device__ __forceinline__ float blockMax(float v, float* scratch) {
  v = warpMax(v);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = scratch[0];
  for (unsigned w = 1; w < warps; w++) m = fmaxf(m, scratch[w]);
  return m;
}

/** Records the step's first device-side error (later ones are dropped). */
__device__ __forceinline__ void reportError(DeviceError* e, int code, int instruction, long long value, long long limit) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->instruction = instruction;
    e->value = value;
    e->limit = limit;
  }
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
