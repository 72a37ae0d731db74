// Row helpers of the CPU's softmax-shaped kernels (attention's probabilities, cross-entropy): f32 exponentials
// in vectorized loops (vectorize.h) and sums in double with four running sums — a fixed order, so the same
// bits every run and on every thread.
#pragma once

#include <cstdint>

namespace fsm {

/** The largest of x[0..n) ignoring NaN, as fmax does (−∞ when n is 0 or all are NaN). */
float rowMax(const float* x, int64_t n);
/** out[j] = e^(x[j] − shift) in f32 (within 2 ulp for the rounded difference) for x[j] ≤ shift: 0 where the
 *  difference is below −87.3 or −∞, NaN where it is NaN. out may be x. */
void expShifted(const float* x, float* out, int64_t n, float shift);
/** x[j] *= k. */
void scaleRow(float* x, int64_t n, float k);
/** Σ x in double. */
double sumOf(const float* x, int64_t n);
/** Σ a·b in double. */
double dotOf(const float* a, const float* b, int64_t n);

}  // namespace fsm
