// The few cuBLAS entry points the CUDA device calls, declared here from cuBLAS's documented C API (its headers
// are not needed to build): the GPU build finds them in libcublas at run time (dlopen, cublas_api.cc), the
// emulated build in host implementations of the same column-major semantics (simt/cublas_host.cc). So the
// row-major → column-major mapping in blas.cc is the code the emulator tests.
#pragma once

#include <cstddef>

#include "device/cuda/runtime.h"

namespace fsm {
namespace FSM_CUDA_NS {

using cublasHandle_t = struct cublasContext*;
using cublasStatus_t = int;  // CUBLAS_STATUS_SUCCESS = 0
constexpr cublasStatus_t kCublasSuccess = 0;
enum cublasOperation_t : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
/** cudaDataType's values (library_types.h). */
enum cublasDataType : int { CUBLAS_R_32F = 0, CUBLAS_R_16F = 2, CUBLAS_R_16BF = 14 };
enum cublasComputeType_t : int { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
constexpr int kCublasGemmDefault = -1;

struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t* handle);
  cublasStatus_t (*destroy)(cublasHandle_t handle);
  cublasStatus_t (*setStream)(cublasHandle_t handle, cudaStream_t stream);
  cublasStatus_t (*setWorkspace)(cublasHandle_t handle, void* workspace, size_t bytes);
  cublasStatus_t (*gemmStridedBatchedEx)(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                                         const void* alpha, const void* a, int aType, int lda, long long strideA, const void* b, int bType,
                                         int ldb, long long strideB, const void* beta, void* c, int cType, int ldc, long long strideC,
                                         int batchCount, int computeType, int algo);
  const char* (*statusString)(cublasStatus_t status);
  /** Where it came from ("libcublas.so.13", or "host (simt)"). */
  const char* library;
};

/** cuBLAS, loaded on first use; throws std::runtime_error naming the library and how to get it when absent. */
const CublasApi& cublasApi();

}  // namespace FSM_CUDA_NS
}  // namespace fsm
