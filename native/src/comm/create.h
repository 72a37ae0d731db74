// createCommunicator: the one place communicator kinds are named — a description's `communicator: {kind, ...}`
// becomes a Communicator for the world, knowing which ranks run in this process (add a kind here, and its files
// under comm/).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/program.h"
#include "device/device.h"

namespace fsm {

/** Throws FailureError (kind description) for an unknown kind, a bad option, or a world this kind cannot reach
 *  (the in-process communicator reaches only the ranks of this process). `devices`: this process's devices by
 *  global rank (nccl enqueues on their streams). */
std::unique_ptr<Communicator> createCommunicator(const Plugin& plugin, int worldSize, const std::vector<int>& localRanks,
                                                 double timeoutSeconds, const std::map<int, Device*>& devices);

}  // namespace fsm
