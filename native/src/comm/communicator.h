// Communicator: what the executor needs to move fp32 bytes between ranks — collectives over registered groups,
// point-to-point sends and receives, abort, a timeout, and reuse across steps. Implementations are transports
// (comm/inprocess: threads of this process; later MPI between processes, NCCL between GPUs); the executor
// knows only this interface, and kinds are named in one place (comm/create.cc).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/program.h"

namespace fsm {

enum class ReduceOp { Sum, Avg };  // Avg: the ordered sum divided by the group size (one fp32 division)

/** The calls a communicator counts (calls()), in this order. */
enum class CommCall { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Send, Recv };
constexpr size_t kCommCalls = 7;
/** "allReduce", "reduceScatter", "allGather", "broadcast", "reduce", "send", "recv". */
const char* commCallName(CommCall call);

/** "[0, 2, 3]": ranks as every communicator's messages print them. */
std::string rankList(const std::vector<int>& ranks);

/** What every blocking call throws when it cannot complete. Aborted: the communicator was aborted (by abort(),
 *  or another rank's failure), what() is the first abort's message — an echo, not a root cause. Timeout: this
 *  rank waited past the timeout; peers() are the ranks that never came. Invalid: the call disagrees with its
 *  group (kind, count, root) or names no valid group, rank or root. Timeout and Invalid also abort the
 *  communicator, so every other rank is woken with Aborted instead of hanging. */
class CommError : public std::runtime_error {
 public:
  enum class Kind { Aborted, Timeout, Invalid };
  CommError(Kind kind, const std::string& message, std::vector<int> peers = {})
      : std::runtime_error(message), kind_(kind), peers_(std::move(peers)) {}
  Kind kind() const { return kind_; }
  const std::vector<int>& peers() const { return peers_; }

 private:
  Kind kind_;
  std::vector<int> peers_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  /** "inprocess", "delay": the kind named in descriptions. */
  virtual const char* kind() const = 0;
  /** Whether its calls take device memory (NCCL's do: GPU buffers, enqueued on the device's stream); the host
   *  communicators take host memory, so GPU devices reach them through comm/staged.h. */
  virtual bool takesDeviceMemory() const { return false; }
  /** Every group is registered: a kind that builds its groups together (NCCL: their unique ids exchanged
   *  between processes at once) does it here, once, before any step. Throws CommError. */
  virtual void ready() {}
  virtual int worldSize() const = 0;

  /** A handle for the group `ranks` (strictly ascending global ranks), made once before any step: the executor
   *  registers every distinct group its programs use, in ascending order, so members of a group register it in
   *  the same order (what MPI_Comm_create_group needs). The same ranks give the same handle. Throws CommError
   *  (Invalid) for an empty or unordered group, or a rank outside the world. */
  virtual GroupHandle registerGroup(const std::vector<int>& ranks) = 0;

  // Collectives. `rank` is the caller's global rank, a member of `group`; every member calls the same
  // collectives on a group in the same order (they are matched by that order), with the same count (and root).
  // Counts are in fp32 elements. Any buffer may alias any other of the same rank (in place is fine). Each call
  // returns once the result is in the caller's buffer, or throws CommError (after the timeout at the latest).
  // Reductions are the ordered sum over the members in group order (((x0 + x1) + x2) + ...): every member gets
  // the same bits, every run.

  /** data = the ordered sum of every member's data. */
  void allReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op = ReduceOp::Sum);
  /** input holds group-size chunks of countPerRank; member i's output = the ordered sum of chunk i. */
  void reduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank,
                     ReduceOp op = ReduceOp::Sum);
  /** output (group size · countPerRank) = the members' inputs concatenated in group order. */
  void allGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank);
  /** Every member's data = root's data (root: a global rank in the group). */
  void broadcast(int rank, GroupHandle group, int root, float* data, size_t count);
  /** root's data = the ordered sum of every member's data; the others' data is left as it was. */
  void reduce(int rank, GroupHandle group, int root, float* data, size_t count);
  /** Point to point, matched by (from, to, tag), in send order per key. send may return before the matching
   *  recv (neighbours may both send before they receive); recv checks the count against the send's. */
  void send(int rank, int peer, int tag, const float* data, size_t count);
  void recv(int rank, int peer, int tag, float* data, size_t count);
  /** Whether recv(rank, peer, tag) would find its message there now (a hint, not a call: it never blocks and
   *  is not counted). Transports that cannot tell say true: the caller then receives and waits as before. */
  virtual bool recvReady(int rank, int peer, int tag) {
    (void)rank, (void)peer, (void)tag;
    return true;
  }

  /** Split phase, for an executor that runs several ranks on one host thread, where a rank waiting for its
   *  group must not hold the thread that a member needs. A kind whose ranks all live in this process can
   *  defer (and its recvReady is then exact): after defer(true), a collective joins its meeting and returns at
   *  once, and the member that completes the meeting does the whole collective for every member before it
   *  returns. pending(rank) says whether rank's last collective still waits for members (it throws CommError
   *  once the communicator is aborted); expire(rank) fails that collective as timed out, aborting the
   *  communicator with a message that names the ranks that never came, and throws it. defer() is called only
   *  while no rank is inside the communicator, like reset(). */
  virtual bool canDefer() const { return false; }
  virtual void defer(bool on);
  virtual bool pending(int rank) {
    (void)rank;
    return false;
  }
  [[noreturn]] virtual void expire(int rank);

  /** Marks the communicator aborted with `message` (the first message wins) and wakes every waiting rank, which
   *  throws CommError (Aborted). Any thread, any number of times. */
  virtual void abort(const std::string& message) = 0;
  virtual bool aborted() const = 0;
  virtual std::string abortMessage() const = 0;
  /** Told when another process aborts this communicator (a transport between processes; never called by the
   *  in-process kinds): the executor stops its devices with that cause, even those waiting on no call. The
   *  handler may run on any thread and may call abort(). */
  virtual void onRemoteAbort(std::function<void(const std::string&)> handler) { (void)handler; }
  /** Starts fresh after an aborted step: clears the abort and every half-done meeting and message. Called only
   *  while no rank is inside the communicator. After a clean step nothing needs resetting: the same
   *  communicator carries on (matching continues by call order), so it is built once, not per step. */
  virtual void reset() = 0;

  /** Throws CommError (Invalid) unless `ranks` is a nonempty, strictly ascending list of ranks in
   *  [0, worldSize): what registerGroup accepts, in every kind. */
  static void checkGroup(const std::vector<int>& ranks, int worldSize);

  /** How many calls of each kind were made through this communicator since it was built. */
  std::array<uint64_t, kCommCalls> calls() const;
  /** Payload bytes this process's ranks sent since it was built: to ranks of this process, and to other
   *  processes (what crosses the network between machines). Transports that do not count report zeros. */
  struct BytesSent {
    uint64_t inProcess = 0;
    uint64_t betweenProcesses = 0;
  };
  virtual BytesSent bytesSent() const { return {}; }

 protected:
  virtual void doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) = 0;
  virtual void doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) = 0;
  virtual void doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) = 0;
  virtual void doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) = 0;
  virtual void doReduce(int rank, GroupHandle group, int root, float* data, size_t count) = 0;
  virtual void doSend(int rank, int peer, int tag, const float* data, size_t count) = 0;
  virtual void doRecv(int rank, int peer, int tag, float* data, size_t count) = 0;

 private:
  void count(CommCall call) { calls_[static_cast<size_t>(call)].fetch_add(1, std::memory_order_relaxed); }
  std::array<std::atomic<uint64_t>, kCommCalls> calls_{};
};

}  // namespace fsm
