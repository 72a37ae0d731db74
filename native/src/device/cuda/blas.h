// Blas: row-major matrix products on one stream through cuBLAS (cublas_api.h) — a handle bound to the stream
// and to a workspace the device reserved (cuBLAS allocates nothing during a step). Operands may be f32, bf16
// or f16 (A and B of one type), accumulated in f32; f32 products use no TF32 unless the device allows it.
#pragma once

#include <cstdint>

#include "device/cuda/cublas_api.h"

namespace fsm {
namespace FSM_CUDA_NS {

/** A row-major matrix operand: `rows × cols` matrices (as stored) `ld` elements apart by row, batch members
 *  `stride` elements apart (0: one matrix shared by every member). */
struct Matrix {
  const void* data;
  int type;  // FloatType (kernel.h)
  int64_t ld;
  int64_t stride;
};

class Blas {
 public:
  Blas(cudaStream_t stream, void* workspace, size_t workspaceBytes, bool allowTf32);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  /** C_b = α·op(A_b)·op(B_b) + β·C_b for b < batch, all row-major: op(A) is m×k (A is k×m when transA), op(B)
   *  is k×n, C is m×n. C is not read when β = 0. Throws std::runtime_error with cuBLAS's status. */
  void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const Matrix& a, const Matrix& b, float beta, void* c,
            int cType, int64_t ldc, int64_t strideC, int64_t batch) const;

 private:
  const CublasApi& api_;
  cublasHandle_t handle_ = nullptr;
  bool allowTf32_;
};

}  // namespace FSM_CUDA_NS
}  // namespace fsm
