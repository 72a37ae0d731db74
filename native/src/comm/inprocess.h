// InProcessCommunicator: the communicator between ranks that are threads of this process (the CPU's virtual
// devices). Each rank calls with its own buffers; a collective returns once the group has met and the result
// is in place. Reductions have one fixed order (ascending group rank), so results are bit-identical on every
// member and every run whatever the thread timing. Any failure (abort, mismatched arguments, timeout) wakes
// every waiting rank with CommError instead of hanging or exiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "comm/communicator.h"

namespace fsm {

class InProcessCommunicator final : public Communicator {
 public:
  // timeout: how long one rank waits for the others at any meeting point before it aborts the communicator
  // with a message naming the call and the ranks that never came.
  InProcessCommunicator(int worldSize, std::chrono::duration<double> timeout);

  const char* kind() const override { return "inprocess"; }
  int worldSize() const override { return worldSize_; }
  GroupHandle registerGroup(const std::vector<int>& ranks) override;
  void abort(const std::string& message) override;
  bool aborted() const override;
  std::string abortMessage() const override;
  void reset() override;
  bool recvReady(int rank, int peer, int tag) override;
  bool canDefer() const override { return true; }
  void defer(bool on) override;
  bool pending(int rank) override;
  [[noreturn]] void expire(int rank) override;

 protected:
  void doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) override;
  void doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) override;
  void doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) override;
  void doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doReduce(int rank, GroupHandle group, int root, float* data, size_t count) override;
  // send is buffered (it copies the data and returns at once), so neighbours may both send before they
  // receive without deadlock; recv blocks until a matching message is there.
  void doSend(int rank, int peer, int tag, const float* data, size_t count) override;
  void doRecv(int rank, int peer, int tag, float* data, size_t count) override;

 private:
  struct Meeting;
  using MeetingPtr = std::shared_ptr<Meeting>;

  struct GroupState {
    std::vector<int> ranks;
    std::vector<uint64_t> nextCall;       // per member: how many collectives it has started on the group
    std::map<uint64_t, MeetingPtr> open;  // meetings some member has joined but not all yet
  };

  // Joins (or opens) the next meeting of `group` for `rank`, checking that kind, count and root agree.
  MeetingPtr join(int rank, GroupHandle group, const char* kind, size_t count, int root, const float* input,
                  float* output, std::unique_lock<std::mutex>& lk, int& member);
  // Waits until every member has reached this point; throws CommError on abort / timeout.
  void barrier(Meeting& m, int member, std::unique_lock<std::mutex>& lk);
  // Waits until the last member to arrive has delivered every member's result; throws CommError on abort /
  // timeout (after the delivery under way, if any, is done with this member's buffers).
  void awaitDelivery(Meeting& m, int member, std::unique_lock<std::mutex>& lk);
  // Runs one collective. Small: one meeting, where the last member to arrive runs `compute` for every slice
  // and `finish` for every member. Large: meet, each member `compute`s its slice, meet, each `finish`es its own.
  // compute(m, i) reads inputs and writes slice i of scratch; finish(m, i) copies member i's result from
  // scratch into m.outputs[i].
  template <typename Compute, typename Finish>
  void collective(int rank, GroupHandle group, const char* kind, size_t count, int root, const float* input,
                  float* output, size_t scratchSize, Compute compute, Finish finish);
  // A timeout's text at a meeting point: the ranks that never arrived (or never finished reading inputs).
  std::string timeoutText(const Meeting& m, int member, uint64_t gen, std::vector<int>& missing) const;
  // Wakes the waiters of these ranks (they re-check their own predicates), or of every rank.
  void wake(const std::vector<int>& ranks);
  void wakeAll();

  // Aborts with `message` (unless already aborted) and throws: CommError of `kind` when this call aborted it,
  // Aborted with the first message when another had.
  [[noreturn]] void fail(CommError::Kind kind, const std::string& message, std::vector<int> peers, std::unique_lock<std::mutex>& lk);
  void throwIfAborted() const;  // with mutex_ held
  void checkRank(int rank, const char* kind, std::unique_lock<std::mutex>& lk);
  size_t groupSize(GroupHandle group);

  const int worldSize_;
  const std::chrono::duration<double> timeout_;
  mutable std::mutex mutex_;
  // One condition variable per rank, all under mutex_: a rank's waiters are woken only by what they wait for
  // (their meeting, a send to them) or an abort, not by every other rank's progress — with more threads than
  // cores, each needless wake-up is a context switch.
  std::vector<std::unique_ptr<std::condition_variable>> wake_;
  bool aborted_ = false;
  std::string abortMessage_;

  // Split phase (defer): per rank, the collective it joined that has not met yet (null: none) and its member
  // index there.
  bool deferred_ = false;
  std::vector<std::pair<MeetingPtr, int>> pending_;

  std::vector<GroupState> groups_;  // by handle; registered before any step, never resized during one
  std::map<std::vector<int>, GroupHandle> handles_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> mailboxes_;  // (from, to, tag)
};

}  // namespace fsm
