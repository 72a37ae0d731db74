// Blas (blas.h): a row-major product C = op(A)·op(B) is, read column-major, Cᵀ = op(B)ᵀ·op(A)ᵀ — so cuBLAS is
// called with the operands swapped, each transposed iff it was, and m and n exchanged.
#include "device/cuda/blas.h"

#include <climits>
#include <stdexcept>
#include <string>

#include "device/cuda/kernel.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

int cublasType(int floatType) {
  switch (floatType) {
    case kF32: return CUBLAS_R_32F;
    case kBF16: return CUBLAS_R_16BF;
    default: return CUBLAS_R_16F;
  }
}

int dim(int64_t d, const char* what) {
  if (d < 0 || d > INT_MAX) throw std::invalid_argument(std::string("matrix ") + what + " " + std::to_string(d) + " is outside cuBLAS's int range");
  return static_cast<int>(d);
}

void check(const CublasApi& api, cublasStatus_t s, const char* what) {
  if (s != kCublasSuccess) throw std::runtime_error(std::string("cuBLAS ") + what + ": " + api.statusString(s));
}

}  // namespace

Blas::Blas(cudaStream_t stream, void* workspace, size_t workspaceBytes, bool allowTf32) : api_(cublasApi()), allowTf32_(allowTf32) {
  check(api_, api_.create(&handle_), "create");
  try {
    check(api_, api_.setStream(handle_, stream), "setStream");
    check(api_, api_.setWorkspace(handle_, workspace, workspaceBytes), "setWorkspace");
  } catch (...) {
    api_.destroy(handle_);
    throw;
  }
}

Blas::~Blas() {
  if (handle_) api_.destroy(handle_);
}

void Blas::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha, const Matrix& a, const Matrix& b, float beta, void* c,
                int cType, int64_t ldc, int64_t strideC, int64_t batch) const {
  if (a.type != b.type) throw std::invalid_argument("not implemented: a matrix product of operands stored in different float types");
  if (m == 0 || n == 0 || batch == 0) return;
  const bool tf32 = allowTf32_ && a.type == kF32;
  check(api_,
        api_.gemmStridedBatchedEx(handle_, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, dim(n, "columns"), dim(m, "rows"),
                                  dim(k, "inner dimension"), &alpha, b.data, cublasType(b.type), dim(b.ld, "leading dimension"), b.stride, a.data,
                                  cublasType(a.type), dim(a.ld, "leading dimension"), a.stride, &beta, c, cublasType(cType),
                                  dim(ldc, "leading dimension"), strideC, dim(batch, "batch"), tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                  kCublasGemmDefault),
        "gemm");
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
