// cublasApi() for the emulated build: cublasGemmStridedBatchedEx's column-major semantics on the host, so
// the device's row-major mapping (blas.cc) is exercised as it is against cuBLAS: C_b = α·op(A_b)·op(B_b) +
// β·C_b for b < batchCount, where op(X)(i, l) is X[i + l·ld] (N) or X[l + i·ld] (T), X_b starts stride_b
// elements on, f32 accumulation, and C is not read when β = 0.
#include <algorithm>
#include <string>

#include "core/half.h"
#include "device/cuda/cublas_api.h"

namespace fsm {
namespace simt {
namespace {

struct Context {
  cudaStream_t stream = nullptr;
};

float load(const void* p, int type, long long i) {
  if (type == CUBLAS_R_32F) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return type == CUBLAS_R_16BF ? fromBf16(h) : fromF16(h);
}

void store(void* p, int type, long long i, float v) {
  if (type == CUBLAS_R_32F) static_cast<float*>(p)[i] = v;
  else static_cast<uint16_t*>(p)[i] = type == CUBLAS_R_16BF ? toBf16(v) : toF16(v);
}

bool knownType(int t) { return t == CUBLAS_R_32F || t == CUBLAS_R_16F || t == CUBLAS_R_16BF; }

cublasStatus_t create(cublasHandle_t* handle) {
  *handle = reinterpret_cast<cublasHandle_t>(new Context());
  return kCublasSuccess;
}

cublasStatus_t destroy(cublasHandle_t handle) {
  delete reinterpret_cast<Context*>(handle);
  return kCublasSuccess;
}

cublasStatus_t setStream(cublasHandle_t handle, cudaStream_t stream) {
  reinterpret_cast<Context*>(handle)->stream = stream;
  return kCublasSuccess;
}

cublasStatus_t setWorkspace(cublasHandle_t, void*, size_t) { return kCublasSuccess; }

constexpr cublasStatus_t kInvalidValue = 7;  // CUBLAS_STATUS_INVALID_VALUE

cublasStatus_t gemm(cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k, const void* alpha, const void* a,
                    int aType, int lda, long long strideA, const void* b, int bType, int ldb, long long strideB, const void* beta, void* c, int cType,
                    int ldc, long long strideC, int batchCount, int computeType, int) {
  // The argument checks cuBLAS documents: leading dimensions cover the stored rows.
  const int aRows = transa == CUBLAS_OP_N ? m : k, bRows = transb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || batchCount < 0 || lda < std::max(1, aRows) || ldb < std::max(1, bRows) || ldc < std::max(1, m)) return kInvalidValue;
  if (!knownType(aType) || !knownType(bType) || !knownType(cType) || aType != bType) return kInvalidValue;
  if (computeType != CUBLAS_COMPUTE_32F && computeType != CUBLAS_COMPUTE_32F_FAST_TF32) return kInvalidValue;
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  for (int batch = 0; batch < batchCount; batch++) {
    const long long ao = batch * strideA, bo = batch * strideB, co = batch * strideC;
    for (int j = 0; j < n; j++) {
      for (int i = 0; i < m; i++) {
        float sum = 0.0f;
        for (int l = 0; l < k; l++) {
          const float x = load(a, aType, ao + (transa == CUBLAS_OP_N ? i + static_cast<long long>(l) * lda : l + static_cast<long long>(i) * lda));
          const float y = load(b, bType, bo + (transb == CUBLAS_OP_N ? l + static_cast<long long>(j) * ldb : j + static_cast<long long>(l) * ldb));
          sum += x * y;
        }
        const long long at = co + i + static_cast<long long>(j) * ldc;
        store(c, cType, at, be == 0.0f ? al * sum : al * sum + be * load(c, cType, at));
      }
    }
  }
  return kCublasSuccess;
}

const char* statusString(cublasStatus_t s) { return s == kCublasSuccess ? "CUBLAS_STATUS_SUCCESS" : s == kInvalidValue ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_UNKNOWN"; }

}  // namespace

const CublasApi& cublasApi() {
  static const CublasApi api{create, destroy, setStream, setWorkspace, gemm, statusString, "host (simt)"};
  return api;
}

}  // namespace simt
}  // namespace fsm
