// ncclApi(): libnccl found at run time, its entry points bound once.
#include "comm/nccl/nccl_api.h"

#include "device/cuda/gpu/library.h"

namespace fsm {
namespace nccl {
namespace {

template <typename F>
void bind(const cuda::Library& lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(lib.symbol(name));
}

NcclApi load() {
  static const cuda::Library lib("NCCL", "FSM_NCCL", {"libnccl.so.2", "libnccl.so"},
                                 "install NCCL (apt-get install libnccl2) or pip's nvidia-nccl, and put its lib folder on LD_LIBRARY_PATH");
  NcclApi api{};
  bind(lib, api.getUniqueId, "ncclGetUniqueId");
  bind(lib, api.commInitRank, "ncclCommInitRank");
  bind(lib, api.commDestroy, "ncclCommDestroy");
  bind(lib, api.commAbort, "ncclCommAbort");
  bind(lib, api.groupStart, "ncclGroupStart");
  bind(lib, api.groupEnd, "ncclGroupEnd");
  bind(lib, api.allReduce, "ncclAllReduce");
  bind(lib, api.reduceScatter, "ncclReduceScatter");
  bind(lib, api.allGather, "ncclAllGather");
  bind(lib, api.broadcast, "ncclBroadcast");
  bind(lib, api.reduce, "ncclReduce");
  bind(lib, api.errorString, "ncclGetErrorString");
  bind(lib, api.getVersion, "ncclGetVersion");
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
