// The JS face of sgemm: argument validation shared by sgemm and sgemmAsync, and the synchronous binding.
#pragma once

#include <napi.h>

namespace fsm {

// sgemm's arguments as JS passed them, checked: A is M x K (K x M when transA), B is K x N (N x K when
// transB), C is M x N, each a Float32Array of exactly that many elements, with leading dimensions equal to
// the row lengths.
struct GemmArgs {
  bool transA = false;
  bool transB = false;
  int M = 0;
  int N = 0;
  int K = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  Napi::Float32Array A;
  Napi::Float32Array B;
  Napi::Float32Array C;

  int lda() const { return transA ? M : K; }
  int ldb() const { return transB ? K : N; }
  int ldc() const { return N; }
};

// Reads info[0..9] = (transA, transB, M, N, K, alpha, A, B, beta, C). Throws a JS TypeError for a wrong type
// and a RangeError for a bad dimension, a length that does not match it, or C sharing memory with A or B.
GemmArgs parseGemmArgs(const Napi::CallbackInfo& info, const char* fn);

// Reads a required non-negative integer argument no larger than max; throws TypeError/RangeError naming it.
int intArg(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name, int min, int max);

// sgemm(transA, transB, M, N, K, alpha, A, B, beta, C): C is updated in place on the calling thread.
Napi::Value sgemmSync(const Napi::CallbackInfo& info);

}  // namespace fsm
