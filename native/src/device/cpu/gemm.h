// sgemm: single-precision row-major matrix multiply, OpenBLAS when built with it, else a portable fallback.
#pragma once

namespace fsm {

// C = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is M x K (A is K x M when transA), op(B) is
// K x N (B is N x K when transB), C is M x N. lda/ldb/ldc are row strides in elements. As in BLAS, beta == 0
// overwrites C without reading it (NaNs in C do not propagate). Callers validate shapes; this does not.
void sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc);

// "openblas" or "fallback": what sgemm calls, fixed at build time.
const char* blasKind();

// Holds OpenBLAS at `threads` threads per sgemm call while it lives, then restores the count it found (a no-op
// with the single-threaded fallback). Concurrent device threads each call sgemm, and N devices times OpenBLAS's
// own threads would oversubscribe the cores. Scopes may overlap (two clusters stepping at once): the count
// found by the first is restored when the last one ends.
class ScopedBlasThreads {
 public:
  explicit ScopedBlasThreads(int threads);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;
};

}  // namespace fsm
