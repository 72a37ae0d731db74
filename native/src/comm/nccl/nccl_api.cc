// ncclApi(): libnccl found at run time, its entry points bound once.
#include "comm/nccl/nccl_api.h"

#include "device/cuda/gpu/library.h"

namespace fsm {
namespace nccl {
namespace {

NcclApi load() {
  static const cuda::Library lib("NCCL", "FSM_NCCL", {"libnccl.so.2", "libnccl.so"},
                                 "install NCCL (apt-get install libnccl2) or pip's nvidia-nccl, and put its lib folder on LD_LIBRARY_PATH");
  NcclApi api{};
  lib.bind(api.getUniqueId, "ncclGetUniqueId");
  lib.bind(api.commInitRank, "ncclCommInitRank");
  lib.bind(api.commDestroy, "ncclCommDestroy");
  lib.bind(api.commAbort, "ncclCommAbort");
  lib.bind(api.groupStart, "ncclGroupStart");
  lib.bind(api.groupEnd, "ncclGroupEnd");
  lib.bind(api.allReduce, "ncclAllReduce");
  lib.bind(api.reduceScatter, "ncclReduceScatter");
  lib.bind(api.allGather, "ncclAllGather");
  lib.bind(api.broadcast, "ncclBroadcast");
  lib.bind(api.reduce, "ncclReduce");
  lib.bind(api.errorString, "ncclGetErrorString");
  lib.bind(api.getVersion, "ncclGetVersion");
  api.library = lib.name().c_str();
  return api;
}

}  // namespace

const NcclApi& ncclApi() {
  static const NcclApi api = load();
  return api;
}

}  // namespace nccl
}  // namespace fsm
