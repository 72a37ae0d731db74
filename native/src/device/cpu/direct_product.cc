// Direct products (direct_product.h): register tiles of C over the inner dimension, in the vector widths this
// CPU has, chosen once when the addon loads.
#include "device/cpu/direct_product.h"

#include <algorithm>
#include <cstring>

#include "device/cpu/vectorize.h"

namespace fsm {
namespace {

typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));

/** Rows [i, i + Rows) by columns [j, j + Vecs·lanes) of C over inner indices [p0, p1), the accumulators in
 *  registers (V may be float: one column). */
template <typename V, int Rows, int Vecs>
[[gnu::always_inline]] inline void tile(const Product& P, int64_t i, int64_t j, int64_t p0, int64_t p1) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  V acc[Rows][Vecs] = {};
  const float* a = P.a + i * P.ars;
  const float* b = P.b + j;
  for (int64_t p = p0; p < p1; p++) {
    V bv[Vecs];
    for (int v = 0; v < Vecs; v++) std::memcpy(&bv[v], b + p * P.ldb + v * L, sizeof(V));
    for (int r = 0; r < Rows; r++) {
      const float ar = a[r * P.ars + p * P.acs];
      for (int v = 0; v < Vecs; v++) acc[r][v] += ar * bv[v];
    }
  }
  for (int r = 0; r < Rows; r++) {
    float* c = P.c + (i + r) * P.ldc + j;
    for (int v = 0; v < Vecs; v++) {
      V out;
      if (P.accumulate) {
        std::memcpy(&out, c + v * L, sizeof(V));
        out += acc[r][v];
      } else {
        out = P.alpha * acc[r][v];
      }
      std::memcpy(c + v * L, &out, sizeof(V));
    }
  }
}

/** Columns [0, n) of the rows [i, i + Rows): tiles of two vectors, then one, then 8 lanes, then single columns. */
template <typename V, int Rows>
[[gnu::always_inline]] inline void rowGroup(const Product& P, int64_t i, int64_t n, int64_t p0, int64_t p1) {
  constexpr int64_t L = sizeof(V) / sizeof(float);
  int64_t j = 0;
  for (; j + 2 * L <= n; j += 2 * L) tile<V, Rows, 2>(P, i, j, p0, p1);
  if (j + L <= n) {
    tile<V, Rows, 1>(P, i, j, p0, p1);
    j += L;
  }
  if constexpr (L > 8) {
    if (j + 8 <= n) {
      tile<Vec8, Rows, 1>(P, i, j, p0, p1);
      j += 8;
    }
  }
  for (; j < n; j++) tile<float, Rows, 1>(P, i, j, p0, p1);
}

template <typename V>
[[gnu::always_inline]] inline void productWith(const Product& P) {
  for (int64_t i = 0; i < P.m; i += kProductRows) {
    int64_t n = P.n, p0 = 0, p1 = P.k;
    if (P.trim == Trim::Columns) n = groupKeys(P.offset + i, n);
    if (P.trim == Trim::Inner) p1 = groupKeys(P.offset + i, p1);
    if (P.trim == Trim::InnerFrom) p0 = std::max<int64_t>(0, i - P.offset);
    switch (std::min(kProductRows, P.m - i)) {
      case 4: rowGroup<V, 4>(P, i, n, p0, p1); break;
      case 3: rowGroup<V, 3>(P, i, n, p0, p1); break;
      case 2: rowGroup<V, 2>(P, i, n, p0, p1); break;
      default: rowGroup<V, 1>(P, i, n, p0, p1); break;
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define FSM_PRODUCT_AVX512 1
// GCC contracts `acc += a·b` into a fused multiply-add where the target has one (its default is
// -ffp-contract=fast), rounding once where a separate multiply and add round twice; AVX-512F has them. Off,
// every copy below computes the same bits.
#define FSM_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define FSM_NO_CONTRACT
#endif

// 8 lanes: AVX2's vectors where the CPU has them (FSM_CPU_CLONES), else pairs of SSE2's.
FSM_CPU_CLONES FSM_NO_CONTRACT void productPortable(const Product& P) { productWith<Vec8>(P); }

#ifdef FSM_PRODUCT_AVX512
// 16 lanes and 32 registers: tiles twice as wide, twice the multiply-adds an instruction.
__attribute__((target("avx512f"))) FSM_NO_CONTRACT void productAvx512(const Product& P) { productWith<Vec16>(P); }
#endif

}  // namespace

void multiply(const Product& P) {
#ifdef FSM_PRODUCT_AVX512
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) {
    productAvx512(P);
    return;
  }
#endif
  productPortable(P);
}

}  // namespace fsm
