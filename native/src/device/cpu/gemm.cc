// sgemm's two implementations: cblas_sgemm from OpenBLAS (FSM_HAVE_OPENBLAS) and a cache-blocked portable one;
// ScopedBlasThreads, OpenBLAS's thread count held for a multi-threaded step.
#include "device/cpu/gemm.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#ifdef FSM_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "device/cpu/direct_product.h"
#include "device/cpu/scratch.h"

namespace fsm {

namespace {

// Where OpenBLAS runs kernels narrower than this CPU's vectors (OPENBLAS_CORETYPE=Haswell, 8 lanes, on a CPU
// with AVX-512's 16, as these machines set it: DESIGN.md §8), products run as direct products
// (direct_product.h) instead of cblas_sgemm when they are small or their B stays in cache:
//  - up to kDirectMultiplyAdds: each OpenBLAS call packs both operands and takes a process-wide lock (its buffer
//    pool), so virtual devices calling it at once serialize on it (two threads each running 64×64×4 products:
//    1.33 µs a call where one took 0.67). The direct product takes no lock; on one thread it took 0.3–1.0×
//    OpenBLAS's time at the shapes measured up to 128×128×128, a transposed B (copied into scratch) 0.58–0.93×;
//  - larger, with A read along its rows and B (K·N floats) within kDirectBBytes, as a layer's products over
//    1024 rows at d 128–512: 0.81–0.92×. With A transposed (a weight's gradient, A read down its columns over
//    a long K) the direct product took 1.1–1.5×, and with a B of 2.4 MB 1.14–1.34×: those stay on OpenBLAS.
// Where OpenBLAS runs its AVX-512 kernels (with fused multiply-adds, which the direct product leaves unfused
// so that every vector width sums to the same bits), it was faster at nearly every shape, 64×64×4 included
// (0.22 against 0.37 µs), so every product stays on it there.
constexpr long long kDirectMultiplyAdds = 128 * 128 * 128;
constexpr long long kDirectBBytes = 256 * 1024;

bool blasNarrowerThanCpu() {
#if defined(FSM_HAVE_OPENBLAS) && defined(__GNUC__) && defined(__x86_64__)
  static const bool narrower = [] {
    if (!__builtin_cpu_supports("avx512f")) return false;
    std::string core = openblas_get_corename();
    for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* wide : {"skylakex", "cooperlake", "sapphirerapids"})
      if (core.find(wide) != std::string::npos) return false;
    return true;
  }();
  return narrower;
#elif defined(FSM_HAVE_OPENBLAS)
  return false;
#else
  return true;  // the portable fallback is slower than a direct product wherever both fit
#endif
}

bool runsDirect(bool transA, int M, int N, int K) {
  if (!blasNarrowerThanCpu()) return false;
  if (static_cast<long long>(M) * N * K <= kDirectMultiplyAdds) return true;
  return !transA && static_cast<long long>(K) * N * static_cast<long long>(sizeof(float)) <= kDirectBBytes;
}

// t [K, N] = bᵀ for b [N, K] with rows ldb apart, in 8×8 blocks so that both sides stay within a few cache
// lines (row by row, every write or every read would be another line).
void transposeInto(const float* b, int ldb, int N, int K, float* t) {
  constexpr int S = 8;
  auto at = [](int row, int ld, int col) { return static_cast<std::size_t>(row) * ld + col; };
  int j0 = 0;
  for (; j0 + S <= N; j0 += S) {
    int k0 = 0;
    for (; k0 + S <= K; k0 += S)
      for (int k = 0; k < S; k++)
        for (int j = 0; j < S; j++) t[at(k0 + k, N, j0 + j)] = b[at(j0 + j, ldb, k0 + k)];
    for (int k = k0; k < K; k++)
      for (int j = 0; j < S; j++) t[at(k, N, j0 + j)] = b[at(j0 + j, ldb, k)];
  }
  for (int j = j0; j < N; j++)
    for (int k = 0; k < K; k++) t[at(k, N, j)] = b[at(j, ldb, k)];
}

// C[M x N] *= beta, or = 0 when beta == 0 (BLAS semantics: C is not read then).
void scaleC(int M, int N, float beta, float* C, int ldc) {
  if (beta == 1.0f) return;
  for (int i = 0; i < M; ++i) {
    float* c = C + static_cast<std::size_t>(i) * ldc;
    if (beta == 0.0f) {
      std::fill(c, c + N, 0.0f);
    } else {
      for (int j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

#ifndef FSM_HAVE_OPENBLAS

// Block sizes: a packed B panel (KC x NC floats = 256 KiB) stays in L2 while every row block of A streams past
// it; a packed A block (MC x KC = 64 KiB) is reused across the panel; one C row segment (NC floats) stays in L1
// across the k loop.
constexpr int MC = 64;
constexpr int KC = 256;
constexpr int NC = 256;

// The portable path: C += alpha * op(A) * op(B) after C was scaled by beta. Both operands are packed into
// contiguous row-major blocks (which also absorbs the transposes), then an i-k-j loop whose innermost j loop is
// unit-stride in B and C and vectorizes; k is unrolled by 4 so each C element is loaded and stored once per
// four multiply-adds.
void sgemmPortable(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda,
                   const float* B, int ldb, float* C, int ldc) {
  std::vector<float> packA(static_cast<std::size_t>(MC) * KC);
  std::vector<float> packB(static_cast<std::size_t>(KC) * NC);
  for (int j0 = 0; j0 < N; j0 += NC) {
    const int nc = std::min(NC, N - j0);
    for (int k0 = 0; k0 < K; k0 += KC) {
      const int kc = std::min(KC, K - k0);
      // packB[k][j] = op(B)(k0 + k, j0 + j)
      for (int k = 0; k < kc; ++k) {
        float* dst = packB.data() + static_cast<std::size_t>(k) * nc;
        if (!transB) {
          const float* src = B + static_cast<std::size_t>(k0 + k) * ldb + j0;
          std::copy(src, src + nc, dst);
        } else {
          for (int j = 0; j < nc; ++j) dst[j] = B[static_cast<std::size_t>(j0 + j) * ldb + (k0 + k)];
        }
      }
      for (int i0 = 0; i0 < M; i0 += MC) {
        const int mc = std::min(MC, M - i0);
        // packA[i][k] = alpha * op(A)(i0 + i, k0 + k)
        for (int i = 0; i < mc; ++i) {
          float* dst = packA.data() + static_cast<std::size_t>(i) * kc;
          for (int k = 0; k < kc; ++k) {
            const float a = transA ? A[static_cast<std::size_t>(k0 + k) * lda + (i0 + i)]
                                   : A[static_cast<std::size_t>(i0 + i) * lda + (k0 + k)];
            dst[k] = alpha * a;
          }
        }
        for (int i = 0; i < mc; ++i) {
          float* __restrict c = C + static_cast<std::size_t>(i0 + i) * ldc + j0;
          const float* a = packA.data() + static_cast<std::size_t>(i) * kc;
          int k = 0;
          for (; k + 4 <= kc; k += 4) {
            const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
            const float* __restrict b0 = packB.data() + static_cast<std::size_t>(k) * nc;
            const float* __restrict b1 = b0 + nc;
            const float* __restrict b2 = b1 + nc;
            const float* __restrict b3 = b2 + nc;
            for (int j = 0; j < nc; ++j) c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
          }
          for (; k < kc; ++k) {
            const float ak = a[k];
            const float* __restrict b = packB.data() + static_cast<std::size_t>(k) * nc;
            for (int j = 0; j < nc; ++j) c[j] += ak * b[j];
          }
        }
      }
    }
  }
}

#endif  // !FSM_HAVE_OPENBLAS

}  // namespace

void sgemm(bool transA, bool transB, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
           int ldb, float beta, float* C, int ldc) {
  if (M == 0 || N == 0) return;
  // Nothing to multiply: only the beta scaling remains. Handled here because BLAS rejects lda = 0 (K = 0).
  if (K == 0 || alpha == 0.0f) {
    scaleC(M, N, beta, C, ldc);
    return;
  }
  // C = alpha·op(A)·op(B) (beta 0) or C += op(A)·op(B) (alpha and beta 1).
  if ((beta == 0.0f || (beta == 1.0f && alpha == 1.0f)) && runsDirect(transA, M, N, K)) {
    const float* b = B;
    if (transB) {
      float* t = scratch<float>(kScratchTransposedB, static_cast<std::size_t>(K) * static_cast<std::size_t>(N));
      transposeInto(B, ldb, N, K, t);
      b = t;
      ldb = N;
    }
    multiply({M, N, K, A, transA ? 1 : lda, transA ? lda : 1, b, ldb, C, ldc, alpha, beta == 1.0f});
    return;
  }
#ifdef FSM_HAVE_OPENBLAS
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K, alpha,
              A, lda, B, ldb, beta, C, ldc);
#else
  scaleC(M, N, beta, C, ldc);
  sgemmPortable(transA, transB, M, N, K, alpha, A, lda, B, ldb, C, ldc);
#endif
}

#ifdef FSM_HAVE_OPENBLAS
namespace {
// OpenBLAS's thread count is one process-wide setting, so overlapping scopes share one saved value.
std::mutex blasThreadsMutex;
int blasScopes = 0;
int blasThreadsBefore = 0;
}  // namespace
#endif

ScopedBlasThreads::ScopedBlasThreads(int threads) {
#ifdef FSM_HAVE_OPENBLAS
  std::lock_guard<std::mutex> lk(blasThreadsMutex);
  if (blasScopes++ == 0) blasThreadsBefore = openblas_get_num_threads();
  openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

ScopedBlasThreads::~ScopedBlasThreads() {
#ifdef FSM_HAVE_OPENBLAS
  std::lock_guard<std::mutex> lk(blasThreadsMutex);
  if (--blasScopes == 0) openblas_set_num_threads(blasThreadsBefore);
#endif
}

const char* blasKind() {
#ifdef FSM_HAVE_OPENBLAS
  return "openblas";
#else
  return "fallback";
#endif
}

}  // namespace fsm
