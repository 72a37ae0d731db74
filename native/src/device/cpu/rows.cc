// Row helpers (rows.h).
#include "device/cpu/rows.h"

#include <limits>

#include "device/cpu/vectorize.h"

namespace fsm {

float rowMax(const float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; j++) max = x[j] > max ? x[j] : max;
  return max;
}

FSM_CPU_CLONES void expShifted(const float* x, float* out, int64_t n, float shift) {
  for (int64_t j = 0; j < n; j++) out[j] = vec::expNonPositive(x[j] - shift);
}

FSM_CPU_CLONES void scaleRow(float* x, int64_t n, float k) {
  for (int64_t j = 0; j < n; j++) x[j] *= k;
}

double sumOf(const float* x, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    s0 += x[j];
    s1 += x[j + 1];
    s2 += x[j + 2];
    s3 += x[j + 3];
  }
  for (; j < n; j++) s0 += x[j];
  return (s0 + s1) + (s2 + s3);
}

double dotOf(const float* a, const float* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    s0 += static_cast<double>(a[j]) * b[j];
    s1 += static_cast<double>(a[j + 1]) * b[j + 1];
    s2 += static_cast<double>(a[j + 2]) * b[j + 2];
    s3 += static_cast<double>(a[j + 3]) * b[j + 3];
  }
  for (; j < n; j++) s0 += static_cast<double>(a[j]) * b[j];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace fsm
