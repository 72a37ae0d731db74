// bf16 and f16 as raw bits, converted to and from f32 by bit manipulation (round to nearest even; NaN stays a
// quiet NaN with its sign; f16: overflow to ±Inf from 65520, subnormals both ways) — one definition for every
// device kind: the CPU's fsm_cast and the CUDA kernels (compiled by nvcc for the GPU, and by the host compiler
// for the CPU and the SIMT emulator), so a value converted on any of them has the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define FSM_BITS_FN __host__ __device__ __forceinline__
#else
#define FSM_BITS_FN inline
#endif

namespace fsm {

FSM_BITS_FN uint32_t bitsOf(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

FSM_BITS_FN float floatOf(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// f32 → bf16: the top 16 bits, rounded to nearest even on the 16 dropped (a finite value that rounds past the
// largest bf16 becomes ±Inf, as the carry runs into the exponent). NaN stays a quiet NaN with its sign.
FSM_BITS_FN uint16_t toBf16(float x) {
  uint32_t u = bitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// bf16 → f32: exact (a NaN comes back quiet).
FSM_BITS_FN float fromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
  return floatOf(u);
}

// f32 → f16 (1 sign, 5 exponent bits biased by 15, 10 mantissa bits), round to nearest even: |x| ≥ 65520
// (halfway past the largest, 65504) becomes ±Inf; below 2^-14 the result is subnormal (units of 2^-24), and
// at most 2^-25 (a tie with zero, which is even) it is ±0.
FSM_BITS_FN uint16_t toF16(float x) {
  const uint32_t u = bitsOf(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up, Inf included
  if (a >= 0x38800000u) {  // 2^-14 and up: normal
    uint32_t m = a - (112u << 23);  // rebias the exponent: 127 → 15
    m += 0xfffu + ((m >> 13) & 1u);  // round the 13 dropped bits to even; a carry moves into the exponent
    return static_cast<uint16_t>(sign | (m >> 13));
  }
  // Subnormal: round(significand · 2^(e - 150) / 2^-24) = round(significand / 2^(126 - e)), shift ≥ 14.
  const uint32_t e = a >> 23;
  const uint32_t shift = 126u - e;
  if (shift >= 32) return sign;  // f32 zeros and subnormals, and anything else far below 2^-25
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) q++;
  return static_cast<uint16_t>(sign | q);
}

// f16 → f32: exact; subnormals are normalized (f32 has the range), a NaN comes back quiet.
FSM_BITS_FN float fromF16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return floatOf(sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x00400000u : 0u));
  if (e != 0) return floatOf(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return floatOf(sign);
  uint32_t k = 0;  // m · 2^-24 = 1.f · 2^(-14 - k) once m's leading one reaches bit 10
  while (!(m & 0x400u)) {
    m <<= 1;
    k++;
  }
  return floatOf(sign | ((113u - k) << 23) | ((m & 0x3ffu) << 13));
}

}  // namespace fsm
