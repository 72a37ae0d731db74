// StagedCommunicator: a decorator for devices whose memory the inner communicator cannot address (a GPU's,
// under the in-process or the MPI communicator): each call copies the calling rank's buffers out to host
// memory through its own device (on its communication stream, after the work queued there), runs the inner
// call on those host copies, and copies the results back in. Reductions stay the inner communicator's, so
// the bits are those of a CPU run; the price is two copies a call, which suits the case it serves — several
// virtual devices sharing one GPU, a test configuration — and MPI between GPU processes without NCCL.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "device/device.h"

namespace fsm {

class StagedCommunicator final : public Communicator {
 public:
  /** devices: this process's devices by global rank (the executor's, which outlive this). */
  StagedCommunicator(std::unique_ptr<Communicator> inner, std::map<int, Device*> devices);

  const char* kind() const override { return inner_->kind(); }
  int worldSize() const override { return inner_->worldSize(); }
  GroupHandle registerGroup(const std::vector<int>& ranks) override;
  void abort(const std::string& message) override { inner_->abort(message); }
  bool aborted() const override { return inner_->aborted(); }
  std::string abortMessage() const override { return inner_->abortMessage(); }
  void reset() override { inner_->reset(); }
  BytesSent bytesSent() const override { return inner_->bytesSent(); }
  void onRemoteAbort(std::function<void(const std::string&)> handler) override { inner_->onRemoteAbort(std::move(handler)); }

 protected:
  void doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) override;
  void doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) override;
  void doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) override;
  void doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doReduce(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doSend(int rank, int peer, int tag, const float* data, size_t count) override;
  void doRecv(int rank, int peer, int tag, float* data, size_t count) override;

 private:
  /** A rank's host buffers (one for inputs, one for outputs), grown to the largest call and then reused; only
   *  that rank's communication stream calls with its rank, so they need no lock. */
  struct Staging {
    Device* device = nullptr;
    std::vector<float> in, out;
  };
  Staging& staging(int rank);
  /** `buffer`, grown to hold `count` floats. */
  static float* room(std::vector<float>& buffer, size_t count);
  /** Host copy of `count` floats of device memory at `data` into `buffer`. */
  float* out(Staging& s, std::vector<float>& buffer, const float* data, size_t count);
  void in(Staging& s, float* data, const float* host, size_t count);
  size_t groupSizeOf(GroupHandle group) const;

  std::unique_ptr<Communicator> inner_;
  std::map<int, Staging> staging_;             // filled at construction, read-only after
  std::map<GroupHandle, size_t> groupSizes_;  // filled as groups are registered, before any step
};

}  // namespace fsm
