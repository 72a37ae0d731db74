// Tensor cores as device/cuda/kernels/ spell them in both builds: `fsmwmma` names nvcuda::wmma (<mma.h>) under
// nvcc and the SIMT emulator's (simt/wmma.h) with FSM_SIMT; the 16-bit element types are __nv_bfloat16 and
// __half (CUDA's, or the emulator's structs of the bits), filled from f32 by core/half.h's rounding so both
// builds store the same bits. FSM_WMMA16 says whether the device code being compiled has 16-bit WMMA (bf16
// needs sm_80): kernels guard their bodies with it, and the host asks wmma16Loaded before launching one.
#pragma once

#include <cstdint>

#include "core/half.h"
#include "device/cuda/dialect.h"

#ifdef FSM_SIMT
namespace fsmwmma = ::fsm::simt::wmma;
#else
#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
namespace fsmwmma = ::nvcuda::wmma;
#endif

#if defined(FSM_SIMT) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define FSM_WMMA16 1
#else
#define FSM_WMMA16 0
#endif

namespace fsm {
namespace FSM_CUDA_NS {

/** The bits of a WMMA element type for an f32 value, rounded to nearest even, and back. Device code for sm_80
 *  and later converts with one instruction (cvt.rn), which gives core/half.h's bits but for a NaN's payload. */
template <typename E>
struct Bits16;
template <>
struct Bits16<__nv_bfloat16> {
  static FSM_HD uint16_t of(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#else
    return toBf16(v);
#endif
  }
  static FSM_HD float value(uint16_t bits) { return fromBf16(bits); }
};
template <>
struct Bits16<__half> {
  static FSM_HD uint16_t of(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __half_as_ushort(__float2half_rn(v));
#else
    return toF16(v);
#endif
  }
  static FSM_HD float value(uint16_t bits) { return fromF16(bits); }
};

/** Whether the image of `kernel` loaded for the current device was compiled with 16-bit WMMA, i.e. from PTX for
 *  sm_80 or later (a build for sm_75 and sm_90 runs its sm_75 code on an sm_80 or sm_89 GPU, whose capability
 *  alone would say yes). Asked once per device; always so on the emulator. */
template <typename Kernel>
bool wmma16Loaded(Kernel kernel) {
#ifdef FSM_SIMT
  (void)kernel;
  return true;
#else
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0: not asked yet, 1: no, 2: yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    cudaGetLastError();
    return false;
  }
  int k = known[device].load(std::memory_order_relaxed);
  if (k == 0) {
    cudaFuncAttributes a{};
    const bool ok = cudaFuncGetAttributes(&a, kernel) == cudaSuccess && a.ptxVersion >= 80;
    cudaGetLastError();  // a refusal must not surface as the next launch's error
    k = ok ? 2 : 1;
    known[device].store(k, std::memory_order_relaxed);
  }
  return k == 2;
#endif
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
