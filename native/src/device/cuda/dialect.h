// The CUDA dialect of device/cuda/: with nvcc, CUDA itself; with FSM_SIMT, the same sources compiled as C++
// for the SIMT emulator (simt/simt.h). FSM_CUDA_NS names the namespace the code lands in — fsm::cuda for the
// GPU build, fsm::simt for the emulated one — so both builds link into one addon side by side.
#pragma once

#ifdef FSM_SIMT
#include "device/cuda/simt/simt.h"
#define FSM_CUDA_NS simt
#define FSM_CUDA_KIND "simt"
#else
#include <cuda_runtime.h>
#define FSM_CUDA_NS cuda
#define FSM_CUDA_KIND "cuda"
#endif

/** A function kernels call, compiled for the GPU (and the host: the emulator, and tests of the helpers). */
#define FSM_HD __host__ __device__ __forceinline__

#ifdef FSM_SIMT
/** The block's dynamic shared memory as a T*. */
#define FSM_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::fsm::simt::dynamicShared())
#else
#define FSM_DYNAMIC_SHARED(T, name)                            \
  extern __shared__ __align__(16) unsigned char fsm_shared_[]; \
  T* name = reinterpret_cast<T*>(fsm_shared_)
#endif
