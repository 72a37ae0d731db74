// Activation kernels (src/interp/kernels/elementwise.ts): relu, gelu, silu and their gradients, split over the
// device's kernel threads (parallel.h). relu is a comparison, exact in f32. gelu and silu are computed in f32
// in loops the compiler vectorizes (as PyTorch computes them in f32), within a few f32 ulp of the
// interpreter's double.
#include <cmath>

#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"
#include "device/cpu/vectorize.h"

namespace fsm {
namespace {

using vec::asBits;
using vec::asFloat;
using vec::select;

/** Elements per chunk of a loop over the kernel threads: an exp-heavy element costs ~1–3 ns, a comparison
 *  well under 1 ns; a chunk is worth a worker's wake-up at tens of microseconds. (At 8192, gpt-tiny's gelu
 *  over 16k elements took 1.4× as long on 2 threads as on one, forward and backward.) */
constexpr int64_t kHeavyGrain = 16384;
constexpr int64_t kLightGrain = 65536;

// --- GELU in f32 ----------------------------------------------------------------------------------------
// Exact GELU x·Φ(x), Φ(x) = (1 + erf(x/√2))/2 (PyTorch's default, not the tanh approximation). With a = |x|
// and e = exp(−a²/2), both halves come from the tail Φ(−a), which never cancels:
//   Φ(−a) = e·t·S(t),  t = 1/(1 + 0.3·a),   and Φ(x) = Φ(−a) for x < 0, 1 − Φ(−a) otherwise;
//   gelu'(x) = Φ(x) + x·φ(x) = e·D(a) for x < 0 and 1 − e·D(a) otherwise, D(a) = t·S(t) − a/√(2π).
// D changes sign at a₀ ≈ 0.7518 (gelu' = 0 at x = −a₀): it is computed as (a₀ − a)·G(t), with a₀ in two parts,
// so gelu' stays accurate relative to itself near its zero instead of to the terms that cancel there.
// S and G are polynomials in t fitted (least squares, reweighted towards minimax) to relative errors of 3.4e-9
// and 1.1e-8 over a ∈ [0, 13.2]; beyond 13.2, e underflows f32 and is taken as 0, so gelu(−∞) is NaN and
// gelu(∞) = ∞ as in double. The exponent −a²/2 is formed exactly (a split in 12-bit halves) and e^y comes
// from 2^k · p(r), |r| ≤ ln2/2, p a degree-6 fit (relative error 3.1e-9). Against the double formula:
// gelu within 4.3e-7 relative, gelu' within 1.5e-7 absolute (3.1e-7 relative where |gelu'| > 1e-3).

constexpr float kTailLimit = 13.2f;
constexpr float kInvSqrt2Pi = 0.398942280401432677940f;

/** exp(−a²/2) for a ≥ 0 (NaN gives garbage: callers' results are NaN through a anyway), 0 beyond kTailLimit. */
inline float expHalfSquare(float a) {
  const bool under = a > kTailLimit;
  const float ac = select(under, kTailLimit, a);
  const float ah = asFloat(asBits(ac) & 0xFFFFF000u);  // 12 significant bits: ah·ah is exact
  const float yh = -0.5f * (ah * ah);
  const float yl = -0.5f * ((ac - ah) * (ac + ah));
  // k = round((yh + yl)/ln2); r = y − k·ln2 with ln2 in two parts (k·ln2hi and yh − k·ln2hi are exact).
  const float kf = vec::roundLog2(yh + yl);
  const float r = (yh - kf * 0.693359375f) + (yl - kf * -2.12194440e-4f);
  const float v = vec::expPoly(r) * vec::pow2(kf);  // k ≥ −126: 2^k is a normal float
  return select(under, 0.0f, v);
}

inline float tailT(float a) { return 1.0f / (1.0f + 0.3f * a); }

/** t·S(t) = Φ(−a)·exp(a²/2). */
inline float tailRatio(float t) {
  const float s = 0.11968648295626046f + t * (0.1195756143091696f + t * (0.11020554434768548f + t * (0.07852185626308097f + t * (0.09579329529274414f + t * (-0.07877779680272579f + t * (0.1910421179579909f + t * (-0.22767959165580373f + t * (0.11221713209586004f + t * -0.020584656472290814f))))))));
  return t * s;
}

/** G(t) = D(a)/(a₀ − a). */
inline float gradRatio(float t) {
  return 0.39893167826480225f + t * (0.09017574334760313f + t * (0.07281941070674591f + t * (0.06157951128022625f + t * (0.020506492335932436f + t * (0.03317694718814994f + t * (0.0010534203170090087f + t * (-0.019383526844145828f + t * 0.006218325901039337f)))))));
}

inline float gelu(float x) {
  const float a = std::fabs(x);
  const float q = expHalfSquare(a) * tailRatio(tailT(a));  // Φ(−a)
  const float upper = 1.0f - q;
  return x * select(x < 0.0f, q, upper);
}

inline float geluGrad(float x) {
  const float a = std::fabs(x);
  const float u = expHalfSquare(a) * (((0.751791537f - a) + -1.21144495e-08f) * gradRatio(tailT(a)));  // e·D(a)
  const float upper = 1.0f - u;
  return select(x < 0.0f, u, upper);
}

FSM_CPU_CLONES void geluRange(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = gelu(x[i]);
}

FSM_CPU_CLONES void geluGradRange(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * geluGrad(x[i]);
}

// --- relu: comparisons, the same bits in f32 as in double ---------------------------------------------------
// NaN stays NaN (x <= 0 is false for it), as in PyTorch: a poisoned activation must reach the loss.

FSM_CPU_CLONES void reluRange(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = select(x[i] <= 0.0f, 0.0f, x[i]);
}

// dy·1 or dy·0 (−0 for a negative dy, NaN for a NaN dy), as the double product rounds.
FSM_CPU_CLONES void reluGradRange(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * select(x[i] > 0.0f, 1.0f, 0.0f);
}

// --- silu in f32 ------------------------------------------------------------------------------------------
// silu(x) = x·σ(x). With t = e^(−|x|) ∈ (0, 1] (its exponent exact), σ and 1 − σ are 1/(1 + t) and t/(1 + t)
// by the sign of x, so neither overflows nor cancels:
//   silu(x) = x/(1 + t) for x ≥ 0, x·t/(1 + t) for x < 0;
//   silu'(x) = σ·(1 + x·(1 − σ)) = (1 + t + x·t)/(1 + t)² for x ≥ 0, t·((1 + x) + t)/(1 + t)² for x < 0,
// the last with its zero (x ≈ −1.2785) in (1 + x) + t, where 1 + x is exact: accurate relative to itself there.
// Within a few f32 ulp of the double formula; NaN and ±∞ as in double.

inline float silu(float x) {
  const float t = vec::expNonPositive(-std::fabs(x));
  const float u = 1.0f + t;
  return select(x < 0.0f, x * t, x) / u;
}

inline float siluGrad(float x) {
  const float t = vec::expNonPositive(-std::fabs(x));
  const float u = 1.0f + t;
  const float negative = t * ((1.0f + x) + t);
  const float positive = (1.0f + t) + x * t;
  return select(x < 0.0f, negative, positive) / (u * u);
}

FSM_CPU_CLONES void siluRange(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = silu(x[i]);
}

FSM_CPU_CLONES void siluGradRange(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * siluGrad(x[i]);
}


// The kernels: y = f(x) and dx = dy·f'(x), each over chunks of the device's kernel threads (`grain`: elements a
// chunk is worth, by how costly f is per element).
using UnaryRange = void (*)(const float*, float*, int64_t);
using GradRange = void (*)(const float*, const float*, float*, int64_t);

template <UnaryRange range, int64_t grain>
void activation(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  float* y = out[0].f32();
  parallelFor(in[0].numel(), grain, [&](int64_t b, int64_t e) { range(x + b, y + b, e - b); });
}

template <GradRange range, int64_t grain>
void activationGrad(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* dy = in[0].f32();
  const float* x = in[1].f32();
  float* dx = out[0].f32();
  parallelFor(in[1].numel(), grain, [&](int64_t b, int64_t e) { range(dy + b, x + b, dx + b, e - b); });
}

}  // namespace

REGISTER_KERNEL("relu", (activation<reluRange, kLightGrain>), FillsOutputs::Yes);
REGISTER_KERNEL("relu_grad", (activationGrad<reluGradRange, kLightGrain>), FillsOutputs::Yes);
REGISTER_KERNEL("gelu", (activation<geluRange, kHeavyGrain>), FillsOutputs::Yes);
REGISTER_KERNEL("gelu_grad", (activationGrad<geluGradRange, kHeavyGrain>), FillsOutputs::Yes);
REGISTER_KERNEL("silu", (activation<siluRange, kHeavyGrain>), FillsOutputs::Yes);
REGISTER_KERNEL("silu_grad", (activationGrad<siluGradRange, kHeavyGrain>), FillsOutputs::Yes);

}  // namespace fsm
