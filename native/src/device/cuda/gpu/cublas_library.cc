// cublasApi() for the GPU build: libcublas found at run time (gpu/library.h), its entry points bound once.
#include "device/cuda/cublas_api.h"
#include "device/cuda/gpu/library.h"

namespace fsm {
namespace cuda {
namespace {

CublasApi load() {
  static const Library lib("cuBLAS", "FSM_CUBLAS", {"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
                           "install the CUDA toolkit's cuBLAS (apt-get install libcublas-13-0) or pip's nvidia-cublas, and put its lib folder on "
                           "LD_LIBRARY_PATH");
  CublasApi api{};
  lib.bind(api.create, "cublasCreate_v2");
  lib.bind(api.destroy, "cublasDestroy_v2");
  lib.bind(api.setStream, "cublasSetStream_v2");
  lib.bind(api.setWorkspace, "cublasSetWorkspace_v2");
  lib.bind(api.gemmStridedBatchedEx, "cublasGemmStridedBatchedEx");
  lib.bind(api.statusString, "cublasGetStatusString");
  api.library = lib.name().c_str();
  return api;
}

}  // namespace

const CublasApi& cublasApi() {
  static const CublasApi api = load();  // a failed load throws, and the next call tries again
  return api;
}

}  // namespace cuda
}  // namespace fsm
