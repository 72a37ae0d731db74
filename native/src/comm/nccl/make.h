// makeNcclCommunicator: the nccl kind as comm/create.cc builds it (GPU build only: FSM_HAVE_CUDA).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"

namespace fsm {
namespace nccl {

/** Collectives over NCCL for this process's GPUs (`devices`, by global rank); sends and receives through the
 *  in-process communicator (one process) or MPI (many), staged through host memory. Throws CommError when
 *  NCCL is missing or the world cannot be reached (FailureError for the caller to locate). */
std::unique_ptr<Communicator> makeNcclCommunicator(int worldSize, const std::vector<int>& localRanks, double timeoutSeconds, const std::map<int, Device*>& devices);

}  // namespace nccl
}  // namespace fsm
