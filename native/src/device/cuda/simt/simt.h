// The CUDA C++ that device/cuda/kernels/ use, for the host: keywords, built-in variables, barriers, warp
// shuffles and votes, atomics and the float intrinsics, mapped onto the SIMT emulator (fiber.h). Included by
// device/cuda/dialect.h when FSM_SIMT is defined (never by nvcc). What a kernel may use is what is here;
// anything else fails to compile in the emulated build, so both builds stay in step.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "device/cuda/simt/fiber.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// Block-shared: one copy per host thread, which runs a block's fibers and nothing else meanwhile.
#define __shared__ static thread_local

#define threadIdx (::fsm::simt::current().threadIdx)
#define blockIdx (::fsm::simt::current().blockIdx)
#define blockDim (::fsm::simt::current().blockDim)
#define gridDim (::fsm::simt::current().gridDim)

namespace fsm {
namespace simt {

constexpr int warpSize = 32;

inline void __syncthreads() { syncBlock(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { warpExchange(mask, nullptr, 0, 0, nullptr); }
inline void __threadfence() {}
inline void __threadfence_block() {}

template <typename T>
T shuffleFrom(unsigned mask, T v, int from) {
  static_assert(sizeof(T) <= 16, "a warp shuffle moves at most 16 bytes");
  T out;
  warpExchange(mask, &v, sizeof(T), from, &out);
  return out;
}

// Lanes are split into segments of `width`; a source outside the caller's segment gives the caller's own value.
template <typename T>
T __shfl_sync(unsigned mask, T v, int src, int width = warpSize) {
  const int lane = static_cast<int>(laneId());
  return shuffleFrom(mask, v, lane / width * width + ((src % width) + width) % width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = warpSize) {
  const int lane = static_cast<int>(laneId());
  const int src = lane ^ laneMask;
  return shuffleFrom(mask, v, src / width == lane / width ? src : lane);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = static_cast<int>(laneId());
  const int src = lane + static_cast<int>(delta);
  return shuffleFrom(mask, v, src / width == lane / width ? src : lane);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = static_cast<int>(laneId());
  const int src = lane - static_cast<int>(delta);
  return shuffleFrom(mask, v, src >= 0 && src / width == lane / width ? src : lane);
}

/** The lanes of `mask` whose predicate is nonzero (every lane of the mask must call). */
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const unsigned lanes = mask & warpLanes();
  unsigned bits = 0;
  for (int l = 0; l < warpSize; l++) {
    const int p = shuffleFrom(mask, predicate != 0 ? 1 : 0, l);
    if ((lanes >> l & 1u) && p) bits |= 1u << l;
  }
  return bits;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) == (mask & warpLanes()); }
inline unsigned __activemask() { return warpLanes(); }

// One host thread runs a grid, and streams never share the bytes they write (the executor's waits see to
// it), so atomics need no locking; __atomic keeps them correct even so.
inline float atomicAdd(float* p, float v) { float old = *p; *p = old + v; return old; }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline int atomicCAS(int* p, int compare, int value) {
  __atomic_compare_exchange_n(p, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return compare;
}
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
inline int atomicMax(int* p, int v) {
  int old = *p;
  if (v > old) *p = v;
  return old;
}

template <typename T>
T __ldg(const T* p) { return *p; }

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline void sincosf(float x, float* s, float* c) {
  *s = std::sin(x);
  *c = std::cos(x);
}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline int __float_as_int(float x) { return static_cast<int>(__float_as_uint(x)); }
inline float __int_as_float(int i) { return __uint_as_float(static_cast<unsigned>(i)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

/** kernel<<<grid, block, sharedBytes>>>(args...) on the calling host thread (streams are host threads here). */
template <typename... Params, typename... Args>
void launchOn(void (*kernel)(Params...), dim3 grid, dim3 block, size_t sharedBytes, Args&&... args) {
  runGrid(grid, block, sharedBytes, [&] { kernel(args...); });
}

}  // namespace simt
}  // namespace fsm

// nvcuda::wmma's tile products (device/cuda/tensor_cores.h names them for kernels).
#include "device/cuda/simt/wmma.h"
