// MpiCommunicator: the communicator between processes. The world's ranks are split over the processes in
// contiguous blocks (process p runs ranks [p·L, (p+1)·L)); a message between two ranks of this process goes
// through an in-process mailbox, one to another process through MPI. Every collective is written as point-to-
// point messages in which each element's sum is formed by one member in group order — ((x0 + x1) + x2) + ... —
// exactly as the in-process communicator forms it, so a plan gives the same bits in one process or many.
// Each plan group whose members span processes gets its own MPI communicator, made once when it is registered.
//
// Progress: calls are non-blocking MPI (MPI_Isend / MPI_Irecv) polled by the calling device's communication
// thread until done, the deadline, or an abort (MPI_THREAD_MULTIPLE, since every local device has its own
// communication thread and none may wait on another). A listener thread polls for abort notices from other
// processes, which also keeps MPI progressing while no device is inside a call.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi/mpi_world.h"

namespace fsm {

class MpiCommunicator final : public Communicator {
 public:
  /** localRanks: the contiguous block of ranks this process runs (checked against the MPI world). */
  MpiCommunicator(int worldSize, const std::vector<int>& localRanks, std::chrono::duration<double> timeout);
  ~MpiCommunicator() override;

  const char* kind() const override { return "mpi"; }
  int worldSize() const override { return worldSize_; }
  GroupHandle registerGroup(const std::vector<int>& ranks) override;
  void abort(const std::string& message) override;
  bool aborted() const override { return aborted_.load(); }
  std::string abortMessage() const override;
  /** A failure between processes ends the run: the communicator stays aborted (every later call throws
   *  Aborted), since the other processes have stopped or will. */
  void reset() override {}
  void onRemoteAbort(std::function<void(const std::string&)> handler) override;
  BytesSent bytesSent() const override { return {sentLocal_.load(), sentRemote_.load()}; }

 protected:
  void doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) override;
  void doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) override;
  void doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) override;
  void doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doReduce(int rank, GroupHandle group, int root, float* data, size_t count) override;
  void doSend(int rank, int peer, int tag, const float* data, size_t count) override;
  void doRecv(int rank, int peer, int tag, float* data, size_t count) override;

 private:
  struct Group {
    std::vector<int> ranks;
    MPI_Comm comm = MPI_COMM_NULL;  // over the processes holding members; null when all are in this process
    std::vector<int> commRank;      // per member: its process's rank in comm
  };
  // One call's messages: MPI requests and in-process receives, waited for together.
  struct Exchange;
  // Per local rank: scratch buffers its calls reuse (only its communication thread touches them).
  std::vector<std::vector<std::vector<float>>> scratch_;
  std::vector<std::vector<float>>& scratchOf(int rank) { return scratch_[static_cast<size_t>(rank - process_ * perProcess_)]; }

  int processOf(int rank) const { return rank / perProcess_; }
  bool isLocal(int rank) const { return processOf(rank) == process_; }
  const Group& groupOf(GroupHandle group, int rank, const char* kind, int& member);

  // A message from member `from` to member `to` of `group` (indices in the group), waited for by finish().
  // Mailbox keys are (group, from, to, 0) for these and (-1, from rank, to rank, plan tag) for send/recv.
  void post(Exchange& x, GroupHandle group, int from, int to, const float* data, size_t count);
  void expect(Exchange& x, GroupHandle group, int from, int to, float* data, size_t count);
  /** Waits until every message of `x` is done; throws CommError on abort, timeout or a size mismatch. */
  void finish(Exchange& x, const std::string& what, int rank);
  [[noreturn]] void fail(CommError::Kind kind, const std::string& message, std::vector<int> peers = {});
  void listen();

  const int worldSize_;
  const std::chrono::duration<double> timeout_;
  int process_ = 0;
  int processes_ = 1;
  int perProcess_ = 1;
  int tagUpperBound_ = 32767;

  std::vector<Group> groups_;  // by handle, registered before any step
  std::map<std::vector<int>, GroupHandle> handles_;

  // In-process messages: (channel, from, to, tag) -> payloads in send order.
  std::mutex mailMutex_;
  std::map<std::tuple<int, int, int, int>, std::deque<std::vector<float>>> mailboxes_;
  // Point-to-point sends to other processes are copied and left in flight (neighbours may both send before
  // they receive): their requests and buffers, completed by later waits and at destruction.
  struct InFlight {
    MPI_Request request;
    std::vector<float> data;
  };
  std::mutex flightMutex_;
  std::deque<InFlight> inFlight_;
  void reapSends(bool wait);

  MPI_Comm p2p_ = MPI_COMM_NULL;      // send/recv between processes
  MPI_Comm control_ = MPI_COMM_NULL;  // abort notices

  std::atomic<uint64_t> sentLocal_{0}, sentRemote_{0};
  void countSent(int to, size_t count) { (isLocal(to) ? sentLocal_ : sentRemote_).fetch_add(count * sizeof(float), std::memory_order_relaxed); }

  std::atomic<bool> aborted_{false};
  bool notified_ = false;  // the other processes were sent this process's abort notice
  mutable std::mutex abortMutex_;
  std::string abortMessage_;
  std::function<void(const std::string&)> onRemoteAbort_;
  struct Notice {
    MPI_Request request;
    std::string text;
  };
  std::deque<Notice> notices_;  // abort notices sent to the other processes (under abortMutex_)
  // Requests abandoned by a failed call and the buffers they may still touch: kept until destruction.
  std::mutex graveMutex_;
  std::vector<std::vector<float>> graveyard_;
  void stop();
  bool stopped_ = false;

  std::thread listener_;
  std::atomic<bool> stopping_{false};
};

}  // namespace fsm
