// The NCCL entry points the nccl communicator calls, declared from NCCL's documented C API (its headers are
// not needed to build): libnccl is found at run time (device/cuda/gpu/library.h), so an fsm built with nvcc
// loads and runs on machines without NCCL, and asking for it there is a clear error. GPU build only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace fsm {
namespace nccl {

using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;
constexpr ncclResult_t kNcclSuccess = 0;
struct ncclUniqueId {
  char internal[128];
};
constexpr int kNcclFloat32 = 7;  // ncclDataType_t
constexpr int kNcclSum = 0;      // ncclRedOp_t
constexpr int kNcclAvg = 4;

struct NcclApi {
  ncclResult_t (*getUniqueId)(ncclUniqueId* id);
  ncclResult_t (*commInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
  ncclResult_t (*commDestroy)(ncclComm_t comm);
  ncclResult_t (*commAbort)(ncclComm_t comm);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*allReduce)(const void* send, void* recv, size_t count, int type, int op, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*reduceScatter)(const void* send, void* recv, size_t recvCount, int type, int op, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*allGather)(const void* send, void* recv, size_t sendCount, int type, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*broadcast)(const void* send, void* recv, size_t count, int type, int root, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*reduce)(const void* send, void* recv, size_t count, int type, int op, int root, ncclComm_t comm, cudaStream_t stream);
  const char* (*errorString)(ncclResult_t result);
  ncclResult_t (*getVersion)(int* version);
  const char* library;
};

/** NCCL, loaded on first use; throws std::runtime_error naming the library and how to get it when absent. */
const NcclApi& ncclApi();

}  // namespace nccl
}  // namespace fsm
