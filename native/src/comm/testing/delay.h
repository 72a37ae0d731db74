// DelayCommunicator: a decorator for tests. It wraps another communicator and sleeps a seeded pseudo-random
// 0..maxMicros µs before and after every call, so the order in which ranks and streams arrive at and leave each
// meeting is shuffled; results must not change (the reductions' order is fixed by rank, not by arrival). Its
// calls are counted like any communicator's (Communicator::calls), proving a run went through it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace fsm {

class DelayCommunicator final : public Communicator {
 public:
  DelayCommunicator(std::unique_ptr<Communicator> inner, uint64_t seed, double maxMicros);

  const char* kind() const override { return "delay"; }
  int worldSize() const override { return inner_->worldSize(); }
  GroupHandle registerGroup(const std::vector<int>& ranks) override { return inner_->registerGroup(ranks); }
  void abort(const std::string& message) override { inner_->abort(message); }
  bool aborted() const override { return inner_->aborted(); }
  std::string abortMessage() const override { return inner_->abortMessage(); }
  void reset() override { inner_->reset(); }
  BytesSent bytesSent() const override { return inner_->bytesSent(); }
  void onRemoteAbort(std::function<void(const std::string&)> handler) override { inner_->onRemoteAbort(std::move(handler)); }
  bool recvReady(int rank, int peer, int tag) override { return inner_->recvReady(rank, peer, tag); }
  bool canDefer() const override { return inner_->canDefer(); }
  void defer(bool on) override { inner_->defer(on); }
  bool pending(int rank) override { return inner_->pending(rank); }
  void expire(int rank) override { inner_->expire(rank); }

 protected:
  void doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) override;
  void doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) override;
  void doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) override;
  void doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doReduce(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doSend(int rank, int peer, int tag, const float* data, size_t count) override;
  void doRecv(int rank, int peer, int tag, float* data, size_t count) override;

 private:
  /** Sleeps the next pseudo-random delay of `rank` (a hash of the seed, the rank and its draw count). */
  void pause(int rank);
  template <typename Call>
  void delayed(int rank, Call call) {
    pause(rank);
    call();
    pause(rank);
  }

  std::unique_ptr<Communicator> inner_;
  const uint64_t seed_;
  const uint64_t maxMicros_;
  // Per rank: draws so far. A rank's two streams may call at once, so the counter is atomic; which stream gets
  // which draw is then itself part of the shuffle.
  std::vector<std::atomic<uint64_t>> draws_;
};

}  // namespace fsm
