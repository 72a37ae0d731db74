// Mixed precision: bf16/fp16 tensors are storage only, and every other kernel computes in f32. fsm_cast
// converts between the storage types (core/half.h: round to nearest even by bit manipulation, so it builds on
// any compiler without _Float16 or F16C, and the CUDA device gets the same bits); fsm_scale_by multiplies by a
// scalar held in a tensor (a dynamic loss scale); fsm_nonfinite flags NaN or ±Inf in any of its inputs (an
// overflowed fp16 step, whose update a guarded instruction then skips).
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FSM_F16C 1
#endif

#include "core/half.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

// The F16C instructions convert 8 values at a time with IEEE round to nearest even, the same bits as toF16 and
// fromF16 (overflow to ±Inf, subnormals both ways, a NaN quieted with its sign and top payload bits: the
// precision tests hold both paths to the same bits), about 10× faster than the bit manipulation. Dispatched by
// hand rather than with FSM_CPU_CLONES (vectorize.h): the intrinsics need F16C, which its avx2 clone does not
// include. Each returns how many leading elements it converted, and is called only where the CPU has F16C
// (kHasF16c: even its return may use AVX); the scalar loop does the rest.
#ifdef FSM_F16C
const bool kHasF16c = __builtin_cpu_supports("f16c");

__attribute__((target("avx,f16c"))) int64_t toF16Wide(const float* s, uint16_t* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
  }
  return i;
}

__attribute__((target("avx,f16c"))) int64_t fromF16Wide(const uint16_t* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  return i;
}
#else
constexpr bool kHasF16c = false;
int64_t toF16Wide(const float*, uint16_t*, int64_t) { return 0; }
int64_t fromF16Wide(const uint16_t*, float*, int64_t) { return 0; }
#endif

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
    for (int64_t i = kHasF16c ? toF16Wide(s, d, n) : 0; i < n; i++) d[i] = toF16(s[i]);
  } else if (x.dtype == DType::BF16 && y.dtype == DType::F32) {
    const uint16_t* s = x.u16();
    float* d = y.f32();
    for (int64_t i = 0; i < n; i++) d[i] = fromBf16(s[i]);
  } else if (x.dtype == DType::F16 && y.dtype == DType::F32) {
    const uint16_t* s = x.u16();
    float* d = y.f32();
    for (int64_t i = kHasF16c ? fromF16Wide(s, d, n) : 0; i < n; i++) d[i] = fromF16(s[i]);
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

REGISTER_KERNEL("fsm_cast", cast, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_scale_by", scaleBy, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_nonfinite", nonfinite, FillsOutputs::Yes);

}  // namespace fsm
