// Mixed precision: bf16/fp16 tensors are storage only, and every other kernel computes in f32. fsm_cast
// converts between the storage types (round to nearest even, by bit manipulation, so it builds on any
// compiler without _Float16 or F16C); fsm_scale_by multiplies by a scalar held in a tensor (a dynamic loss
// scale); fsm_nonfinite flags NaN or ±Inf in any of its inputs (an overflowed fp16 step, whose update a
// guarded instruction then skips).
#include <cstring>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float floatOf(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// f32 → bf16: the top 16 bits, rounded to nearest even on the 16 dropped (a finite value that rounds past the
// largest bf16 becomes ±Inf, as the carry runs into the exponent). NaN stays a quiet NaN with its sign.
uint16_t toBf16(float x) {
  uint32_t u = bitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// bf16 → f32: exact (a NaN comes back quiet).
float fromBf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
  return floatOf(u);
}

// f32 → f16 (1 sign, 5 exponent bits biased by 15, 10 mantissa bits), round to nearest even: |x| ≥ 65520
// (halfway past the largest, 65504) becomes ±Inf; below 2^-14 the result is subnormal (units of 2^-24), and
// at most 2^-25 (a tie with zero, which is even) it is ±0. NaN stays a quiet NaN with its sign.
uint16_t toF16(float x) {
  const uint32_t u = bitsOf(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 and up, Inf included
  if (a >= 0x38800000u) {                                                // 2^-14 and up: normal
    uint32_t m = a - (112u << 23);                                       // rebias the exponent: 127 → 15
    m += 0xfffu + ((m >> 13) & 1u);                                      // round the 13 dropped bits to even
    return static_cast<uint16_t>(sign | (m >> 13));                      // a carry moves into the exponent
  }
  // Subnormal: round(significand · 2^(e - 150) / 2^-24) = round(significand / 2^(126 - e)), shift ≥ 14.
  const uint32_t e = a >> 23;
  const uint32_t shift = 126u - e;
  if (shift >= 32) return sign;  // f32 zeros and subnormals, and anything else far below 2^-25
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) q++;  // may carry into 0x400: the smallest normal, 2^-14
  return static_cast<uint16_t>(sign | q);
}

// f16 → f32: exact; subnormals are normalized (f32 has the range), a NaN comes back quiet.
float fromF16(uint16_t h) {
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

// out = in converted to out's dtype: f32 → bf16/f16 (round to nearest even), bf16/f16 → f32 (exact), or a
// copy when both have the same dtype (out may be in: an output sharing an input's bytes is not zeroed
// first). Operands of different dtypes must not overlap.
void cast(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in.size() != 1 || out.size() != 1) throw std::invalid_argument("fsm_cast: takes one input and one output");
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (x.numel() != y.numel()) throw std::invalid_argument("fsm_cast: operands differ in size");
  const int64_t n = x.numel();
  if (x.dtype == y.dtype) {
    std::memmove(y.data, x.data, x.bytes());
    return;
  }
  if (x.dtype == DType::F32 && y.dtype == DType::BF16) {
    const float* s = x.f32();
    uint16_t* d = y.u16();
    for (int64_t i = 0; i < n; i++) d[i] = toBf16(s[i]);
  } else if (x.dtype == DType::F32 && y.dtype == DType::F16) {
    const float* s = x.f32();
    uint16_t* d = y.u16();
    for (int64_t i = 0; i < n; i++) d[i] = toF16(s[i]);
  } else if (x.dtype == DType::BF16 && y.dtype == DType::F32) {
    const uint16_t* s = x.u16();
    float* d = y.f32();
    for (int64_t i = 0; i < n; i++) d[i] = fromBf16(s[i]);
  } else if (x.dtype == DType::F16 && y.dtype == DType::F32) {
    const uint16_t* s = x.u16();
    float* d = y.f32();
    for (int64_t i = 0; i < n; i++) d[i] = fromF16(s[i]);
  } else {
    throw std::invalid_argument(std::string("fsm_cast: cannot convert ") + dtypeName(x.dtype) + " to " + dtypeName(y.dtype));
  }
}

// y = x · s[0] · attrs.scale (default 1), elementwise: f32(double(x) · (double(s[0]) · scale)), rounded once
// as fsm_scale's. y may be x (in place: an output sharing an input's bytes is not zeroed first).
void scaleBy(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  if (in.size() != 2 || out.size() != 1) throw std::invalid_argument("fsm_scale_by: takes inputs [x, s] and one output");
  if (in[0].numel() != out[0].numel()) throw std::invalid_argument("fsm_scale_by: x and y differ in size");
  if (in[1].numel() != 1) throw std::invalid_argument("fsm_scale_by: s must hold one element");
  const double k = static_cast<double>(in[1].f32()[0]) * (attrs.has("scale") ? attrs.number("scale") : 1.0);
  const float* x = in[0].f32();
  float* y = out[0].f32();
  const int64_t n = out[0].numel();
  for (int64_t i = 0; i < n; i++) y[i] = static_cast<float>(static_cast<double>(x[i]) * k);
}

// out[0] = 1 when any element of any input is NaN or ±Inf (exponent bits all ones), else 0.
void nonfinite(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (out.size() != 1 || out[0].numel() != 1) throw std::invalid_argument("fsm_nonfinite: the output must be one f32 element");
  float* y = out[0].f32();
  bool found = false;
  for (size_t k = 0; k < in.size() && !found; k++) {
    const float* x = in[k].f32();
    const int64_t n = in[k].numel();
    uint32_t bad = 0;  // no early exit inside a tensor: the loop stays branch-free (vectorizable)
    for (int64_t i = 0; i < n; i++) bad |= static_cast<uint32_t>((bitsOf(x[i]) & 0x7f800000u) == 0x7f800000u);
    found = bad != 0;
  }
  y[0] = found ? 1.0f : 0.0f;
}

}  // namespace

REGISTER_KERNEL("fsm_cast", cast);
REGISTER_KERNEL("fsm_scale_by", scaleBy);
REGISTER_KERNEL("fsm_nonfinite", nonfinite);

}  // namespace fsm
