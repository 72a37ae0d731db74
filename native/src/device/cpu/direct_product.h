// Direct products: C = alpha·A·B (or C += A·B) for the small products of a CPU device (attention's per-head
// products, sgemm's small calls), computed where the operands lie instead of packed as a BLAS packs them. A
// product keeps a tile of C (kProductRows rows by up to two vectors) in registers while it runs over the inner
// dimension, reads A in either layout and B row-major, and can give each group of kProductRows rows its own
// column count or inner range (a causal mask's triangle, skipped group by group). Every element of C sums its
// products in inner order, one rounded multiply and one rounded add each (never fused): every vector width
// computes the same bits, and so does every thread count.
#pragma once

#include <cstdint>

namespace fsm {

/** Rows of C in a register tile, and so the step of the causal trimming. */
constexpr int64_t kProductRows = 4;
/** A group's columns are rounded up to this, the narrowest vector tile, while the matrix has them: a few
 *  masked scores cost less than a scalar tail. */
constexpr int64_t kProductColumnStep = 8;

/** How a product follows the causal mask, C's rows (or the inner index, a key) numbered from `offset`:
 *  Columns: C's row i needs columns < offset + i + 1 (a query row's scores: the keys up to its own);
 *  Inner: C's row i reads inner indices < offset + i + 1 (A is probabilities, zero past them);
 *  InnerFrom: C's row i reads inner indices ≥ i − offset (A is transposed probabilities: key i is seen by the
 *  query rows from it on).
 *  A group of rows takes the extent its last row needs, rounded up to kProductColumnStep. */
enum class Trim { None, Columns, Inner, InnerFrom };

/** The keys that the query rows [first, first + kProductRows) see together, rounded up to kProductColumnStep,
 *  at most `keys`: the columns a trimmed product computes for their group, masked ones included. */
inline int64_t groupKeys(int64_t first, int64_t keys) {
  const int64_t k = (first + kProductRows + kProductColumnStep - 1) / kProductColumnStep * kProductColumnStep;
  return k < keys ? k : keys;
}

/** C [m, n] = alpha·A·B, or C += A·B when `accumulate`; A(i, p) = a[i·ars + p·acs] (A or Aᵀ stored
 *  row-major), B [k, n] and C row-major, rows ldb and ldc apart. */
struct Product {
  int64_t m, n, k;
  const float* a;
  int64_t ars, acs;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  float alpha;
  bool accumulate;
  Trim trim = Trim::None;
  int64_t offset = 0;
};

/** Runs `P` with the widest vectors this CPU has (AVX-512, AVX2, else SSE2 pairs): the same bits on each. */
void multiply(const Product& P);

}  // namespace fsm
