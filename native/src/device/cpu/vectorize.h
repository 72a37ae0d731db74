// What the CPU kernels' hot loops share so the compiler vectorizes them.
//  - FSM_CPU_CLONES on a loop's function: with GCC on x86-64 Linux, an AVX2 copy besides the baseline (SSE2)
//    one, chosen when the addon loads by what the CPU has. AVX2 without FMA: no multiply-add is fused, so the
//    copies compute the same bits.
//  - select(c, a, b) and the bit casts: a float ternary whose arms are not both plain values is a branch GCC
//    will not vectorize while floating-point exceptions are observable (the default); a mask select is not.
//  - expNonPositive: e^y in f32 for y ≤ 0 (a softmax's exponent) from operations that vectorize.
//  - FSM_IVDEP before a loop whose iterations are independent though its pointers may alias (an update
//    written in place, or not): the compiler vectorizes it without checking at run time how they overlap,
//    which it gives up on past a few pointer pairs. Each element must read only its own index.
//  - std::sqrt vectorizes: the addon builds with -fno-math-errno (CMakeLists.txt).
//  - laneSum and addRowBlocks: the two shapes of a reduction the kernels share (a long sum in running lanes; a
//    sum down rows kept in registers across a block of rows), each in a fixed order. Inline templates, so the
//    kernel calling them compiles them into each of its clones.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FSM_CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FSM_CPU_CLONES
#endif

#if defined(__clang__)
#define FSM_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define FSM_IVDEP _Pragma("GCC ivdep")
#else
#define FSM_IVDEP
#endif

namespace fsm {
namespace vec {

inline float asFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t asBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/** Σ term(i) over [0, n) in `Lanes` running sums of T, folded pairwise in a fixed order: independent chains
 *  the compiler vectorizes (one chain of dependent adds costs an add's latency per element), and the same bits
 *  for the same inputs wherever the caller's rows are split. */
template <typename T, int Lanes, typename Term>
inline T laneSum(int64_t n, Term term) {
  T s[Lanes] = {};
  int64_t i = 0;
  for (; i + Lanes <= n; i += Lanes)
    for (int k = 0; k < Lanes; k++) s[k] += term(i + k);
  for (int k = 0; i < n; i++, k++) s[k] += term(i);
  for (int half = Lanes / 2; half > 0; half /= 2)
    for (int k = 0; k < half; k++) s[k] += s[k + half];
  return s[0];
}

/** acc[c] += term(r, c) for rows r in [0, rows) and columns c in [0, n), each column's terms in row order.
 *  Rows go in blocks of 4: a column's sum stays in a register across a block, so acc is read and written once
 *  per block instead of once per row, and the columns (independent sums) fill the vectors. */
template <typename Term>
inline void addRowBlocks(double* acc, int64_t rows, int64_t n, Term term) {
  constexpr int64_t kRows = 4;
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    for (int64_t c = 0; c < n; c++) {
      double s = acc[c];
      for (int64_t k = 0; k < kRows; k++) s += term(r + k, c);
      acc[c] = s;
    }
  }
  for (; r < rows; r++)
    for (int64_t c = 0; c < n; c++) acc[c] += term(r, c);
}

/** c ? a : b, both already computed, as a bit mask (NaN and −0 pass through unchanged). */
inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return asFloat((asBits(a) & m) | (asBits(b) & ~m));
}

/** e^r for |r| ≤ ln2/2: 1 + r + r²·q(r), q a degree-4 fit (relative error 3.1e-9 over the interval). */
inline float expPoly(float r) {
  return 1.0f + r + r * r * (0.4999999343211016f + r * (0.16666520398960055f + r * (0.0416683907874565f + r * (0.008368745116575382f + r * 0.0013814539984019162f))));
}

/** 2^k for an integral kf in [−126, 127] (a normal float). */
inline float pow2(float kf) { return asFloat(static_cast<uint32_t>(static_cast<int32_t>(kf) + 127) << 23); }

/** round(y / ln2) for |y| < 2²² by the 1.5·2²³ trick (round to nearest in the default rounding mode). */
inline float roundLog2(float y) { return (y * 1.44269504088896340736f + 12582912.0f) - 12582912.0f; }

/** Below this, e^y is under f32's normal range; expNonPositive gives 0 there. */
constexpr float kExpMin = -87.3f;

/** e^y for y ≤ 0 within 2 f32 ulp: 2^k·e^r with r = y − k·ln2 formed exactly (ln2 in two parts), 0 below
 *  kExpMin (and for −∞), NaN for NaN. */
inline float expNonPositive(float y) {
  const bool under = y < kExpMin;
  const float yc = select(under, kExpMin, y);
  const float kf = roundLog2(yc);
  const float r = (yc - kf * 0.693359375f) - kf * -2.12194440e-4f;
  return select(under, 0.0f, expPoly(r) * pow2(kf));
}

}  // namespace vec
}  // namespace fsm
