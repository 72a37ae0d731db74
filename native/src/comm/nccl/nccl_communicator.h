// NcclCommunicator: collectives between GPUs through NCCL, enqueued on each rank's communication stream (so
// they overlap the compute stream, ordered by the device's events like any instruction), one NCCL communicator
// per plan group. The groups are built together once every one is registered (ready()): the processes share
// which groups they use and each group's unique id — made by the process holding its lowest rank — in two
// host exchanges over MPI (none with one process), then every process initializes its members' communicators
// in the same group order, so no initialization waits on one that waits on it. Sends and receives go through a
// host communicator instead (staged through host memory): on NCCL, pipeline neighbours that both send before
// they receive would wait on each other unless both sides' calls were grouped; host sends are buffered.
// Reductions are NCCL's (ring or tree order): bit-identical run to run for a fixed world, but not to the CPU.
// GPU build only.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/nccl/nccl_api.h"
#include "device/device.h"

namespace fsm {
namespace nccl {

class NcclCommunicator final : public Communicator {
 public:
  /** devices: this process's GPUs by global rank (the executor's, which outlive this); host: the communicator
   *  sends and receives go through (already staged for device memory); processes/process: the MPI world
   *  (1/0 alone), ranks in contiguous blocks of worldSize / processes. */
  NcclCommunicator(int worldSize, std::map<int, Device*> devices, std::unique_ptr<Communicator> host, int processes, int process,
                   double timeoutSeconds);
  ~NcclCommunicator() override;

  const char* kind() const override { return "nccl"; }
  int worldSize() const override { return worldSize_; }
  bool takesDeviceMemory() const override { return true; }
  GroupHandle registerGroup(const std::vector<int>& ranks) override;
  void ready() override;
  void abort(const std::string& message) override;
  bool aborted() const override;
  std::string abortMessage() const override;
  /** An aborted NCCL communicator cannot be reused (its communicators are destroyed): it stays aborted, and the
   *  run ends, as with MPI between processes. */
  void reset() override;
  void onRemoteAbort(std::function<void(const std::string&)> handler) override { host_->onRemoteAbort(std::move(handler)); }
  BytesSent bytesSent() const override { return host_->bytesSent(); }

 protected:
  void doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) override;
  void doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) override;
  void doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) override;
  void doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doReduce(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doSend(int rank, int peer, int tag, const float* data, size_t count) override { host_->send(rank, peer, tag, data, count); }
  void doRecv(int rank, int peer, int tag, float* data, size_t count) override { host_->recv(rank, peer, tag, data, count); }

 private:
  struct Group {
    std::vector<int> ranks;
    std::map<int, ncclComm_t> comms;  // by this process's member rank
  };
  /** The group's communicator for `rank`, with its device bound to the calling thread and its stream. */
  ncclComm_t commFor(int rank, GroupHandle group, cudaStream_t& stream);
  int memberIndex(const Group& g, int rank) const;
  void check(ncclResult_t r, const char* what);
  /** Every group any process uses and each one's unique id, shared between the processes. */
  std::vector<std::pair<std::vector<int>, ncclUniqueId>> agreeOnGroups() const;

  const NcclApi& api_;
  const int worldSize_;
  const std::map<int, Device*> devices_;
  std::unique_ptr<Communicator> host_;
  const int processes_;
  const int process_;
  const double timeoutSeconds_;
  std::vector<Group> groups_;  // by handle
  std::map<std::vector<int>, GroupHandle> handles_;
  mutable std::mutex mutex_;
  bool aborted_ = false;
  std::string abortMessage_;
};

}  // namespace nccl
}  // namespace fsm
