// fsm::Communicator: the in-process communicator of the CPU runtime. N virtual devices run as N threads of one
// process; each calls the collectives below with its own rank and buffers, and the call returns once the group
// has met and the result is in place. Reductions have one fixed order (ascending group rank), so results are
// bit-identical on every member and every run whatever the thread timing. Any failure (abort, mismatched
// arguments, timeout) wakes every waiting rank with CommAborted instead of hanging or exiting.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace fsm {

// Thrown by every call on a communicator that has been aborted (by abort(), a mismatch or a timeout); what()
// is the first abort's message. An aborted communicator stays aborted: the step is over.
class CommAborted : public std::runtime_error {
 public:
  explicit CommAborted(const std::string& message) : std::runtime_error(message) {}
};

enum class ReduceOp { Sum, Avg };  // Avg: the ordered sum divided by the group size (one fp32 division)

class Communicator {
 public:
  // timeout: how long one rank waits for the others at any meeting point before it aborts the communicator
  // with a message naming the call and the ranks that never came.
  explicit Communicator(int worldSize, std::chrono::duration<double> timeout = std::chrono::seconds(60));
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int worldSize() const { return worldSize_; }

  // Collectives. `group` is a strictly ascending list of global ranks that contains `rank`; every member calls
  // the same collectives on a group in the same order (they are matched by that order), with the same count
  // (and root). Counts are in fp32 elements. Any buffer may alias any other of the same rank (in place is
  // fine): results are staged in the meeting's own scratch and written after every member has read its inputs.

  // data[k] = ((x0[k] + x1[k]) + x2[k]) + ... over the members in group order, on every member.
  void allReduce(int rank, const std::vector<int>& group, float* data, size_t count, ReduceOp op = ReduceOp::Sum);
  // input holds group.size() chunks of countPerRank; member i gets the ordered sum of chunk i.
  void reduceScatter(int rank, const std::vector<int>& group, const float* input, float* output, size_t countPerRank,
                     ReduceOp op = ReduceOp::Sum);
  // output (group.size() * countPerRank) = the members' inputs concatenated in group order.
  void allGather(int rank, const std::vector<int>& group, const float* input, float* output, size_t countPerRank);
  // Every member's data = root's data (root is a global rank in the group).
  void broadcast(int rank, const std::vector<int>& group, int root, float* data, size_t count);
  // root's data = the ordered sum of every member's data; the others' data is left as it was.
  void reduce(int rank, const std::vector<int>& group, int root, float* data, size_t count);

  // Point to point, matched by (from, to, tag); messages with the same key arrive in send order. send is
  // buffered (it copies the data and returns at once), so neighbours may both send before they receive without
  // deadlock; recv blocks until a matching message is there and aborts if its count differs from the send's.
  void send(int rank, int peer, int tag, const float* data, size_t count);
  void recv(int rank, int peer, int tag, float* data, size_t count);

  // Marks the communicator aborted with `message` (the first message wins) and wakes every waiting rank,
  // which throws CommAborted. Callable from any thread, any number of times.
  void abort(const std::string& message);
  bool aborted() const;
  std::string abortMessage() const;

 private:
  struct Meeting;
  using MeetingPtr = std::shared_ptr<Meeting>;

  // Joins (or opens) the next meeting of `group` for `rank`, checking that kind, count and root agree.
  MeetingPtr join(int rank, const std::vector<int>& group, const char* kind, size_t count, int root,
                  const float* input, std::unique_lock<std::mutex>& lk, int& member);
  // Waits until every member has reached this point (phase `phase`); throws CommAborted on abort/timeout.
  void barrier(Meeting& m, int member, std::unique_lock<std::mutex>& lk);
  // Runs one collective: meet, `compute` (reads inputs, writes scratch), meet, `finish` (scratch -> output).
  template <typename Compute, typename Finish>
  void collective(int rank, const std::vector<int>& group, const char* kind, size_t count, int root,
                  const float* input, size_t scratchSize, Compute compute, Finish finish);

  [[noreturn]] void fail(const std::string& message, std::unique_lock<std::mutex>& lk);
  void throwIfAborted() const;  // with mutex_ held
  void checkRank(int rank, const char* kind, std::unique_lock<std::mutex>& lk);

  const int worldSize_;
  const std::chrono::duration<double> timeout_;
  mutable std::mutex mutex_;
  // One condition variable for everything: waiters re-check their own predicate, and abort() needs to wake
  // them all with a single notify_all.
  std::condition_variable cv_;
  bool aborted_ = false;
  std::string abortMessage_;

  struct GroupState {
    std::vector<uint64_t> nextCall;           // per member: how many collectives it has started on the group
    std::map<uint64_t, MeetingPtr> open;      // meetings some member has joined but not all yet
  };
  std::map<std::vector<int>, GroupState> groups_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> mailboxes_;  // (from, to, tag)
};

}  // namespace fsm
