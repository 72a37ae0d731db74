// fsm::Communicator (communicator.h): meetings of a group, the fixed-order reductions, buffered send/recv,
// abort and timeouts.
//
// Every collective is one "meeting" of its group, matched by the group and the call's index on that group:
//   1. meet: every member has published its input pointer;
//   2. compute: member i fills slice i of the meeting's scratch, reading any member's inputs but writing none;
//   3. meet: every member is done reading inputs;
//   4. finish: each member copies its result from scratch into its own output.
// Since phase 2 never writes a user buffer and phase 4 never reads another member's, aliased inputs and outputs
// are safe and a member may return while others are still copying. Which member computes a slice does not
// change its value: every element is the same ordered sum, so the result is the same bits every run.
#include "communicator.h"

#include <algorithm>
#include <sstream>

namespace fsm {

struct Communicator::Meeting {
  std::string kind;
  std::vector<int> group;
  uint64_t call = 0;  // index of this collective among the group's collectives
  size_t count = 0;
  int root = -1;
  int firstRank = -1;  // who opened it: the reference for mismatch messages
  int joined = 0;
  std::vector<const float*> inputs;  // per member
  std::vector<uint64_t> reached;     // per member: how many meeting points it has reached
  int waiting = 0;                   // members waiting at the current meeting point
  uint64_t generation = 0;           // meeting points completed
  // Members between the first and second meeting point, i.e. possibly reading other members' inputs. An
  // aborted member waits for it to drop to 0 before it throws, so its caller may free its buffers at once.
  int busy = 0;
  std::unique_ptr<float[]> scratch;
};

namespace {

std::string listOf(const std::vector<int>& ranks) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < ranks.size(); i++) s << (i ? ", " : "") << ranks[i];
  s << "]";
  return s.str();
}

std::string seconds(std::chrono::duration<double> d) {
  std::ostringstream s;
  s << d.count() << " s";
  return s.str();
}

// The slice of [0, count) that member i of n computes.
std::pair<size_t, size_t> sliceOf(size_t count, size_t n, size_t i) { return {count * i / n, count * (i + 1) / n}; }

// out[k] = ((in[0][k] + in[1][k]) + in[2][k]) + ... for k in [lo, hi), then / n for Avg. Each add rounds to
// fp32 in `out`, exactly as the ordered sum in the spec; the compiler may vectorize over k, never reorder j.
void orderedSum(const std::vector<const float*>& in, size_t offset, float* out, size_t lo, size_t hi, ReduceOp op) {
  std::copy(in[0] + offset + lo, in[0] + offset + hi, out + lo);
  for (size_t j = 1; j < in.size(); j++) {
    const float* x = in[j] + offset;
    for (size_t k = lo; k < hi; k++) out[k] += x[k];
  }
  if (op == ReduceOp::Avg) {
    const float n = static_cast<float>(in.size());
    for (size_t k = lo; k < hi; k++) out[k] /= n;
  }
}

}  // namespace

Communicator::Communicator(int worldSize, std::chrono::duration<double> timeout)
    : worldSize_(worldSize), timeout_(timeout) {
  if (worldSize < 1) throw std::invalid_argument("Communicator: worldSize must be at least 1");
}

void Communicator::abort(const std::string& message) {
  std::lock_guard<std::mutex> lk(mutex_);
  if (!aborted_) {
    aborted_ = true;
    abortMessage_ = message;
  }
  cv_.notify_all();
}

bool Communicator::aborted() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return aborted_;
}

std::string Communicator::abortMessage() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return abortMessage_;
}

void Communicator::fail(const std::string& message, std::unique_lock<std::mutex>& lk) {
  if (!aborted_) {
    aborted_ = true;
    abortMessage_ = message;
  }
  cv_.notify_all();
  const std::string first = abortMessage_;
  lk.unlock();
  throw CommAborted(first);
}

void Communicator::throwIfAborted() const {
  if (aborted_) throw CommAborted(abortMessage_);
}

void Communicator::checkRank(int rank, const char* kind, std::unique_lock<std::mutex>& lk) {
  if (rank < 0 || rank >= worldSize_) {
    fail(std::string(kind) + ": rank " + std::to_string(rank) + " is outside the world of " +
             std::to_string(worldSize_),
         lk);
  }
}

Communicator::MeetingPtr Communicator::join(int rank, const std::vector<int>& group, const char* kind, size_t count,
                                            int root, const float* input, std::unique_lock<std::mutex>& lk,
                                            int& member) {
  checkRank(rank, kind, lk);
  const std::string where = std::string(kind) + " at rank " + std::to_string(rank) + " on group " + listOf(group);
  if (group.empty()) fail(where + ": the group is empty", lk);
  for (size_t i = 0; i < group.size(); i++) {
    if (group[i] < 0 || group[i] >= worldSize_ || (i > 0 && group[i] <= group[i - 1])) {
      fail(where + ": a group must be strictly ascending global ranks in [0, " + std::to_string(worldSize_) + ")", lk);
    }
  }
  const auto self = std::lower_bound(group.begin(), group.end(), rank);
  if (self == group.end() || *self != rank) fail(where + ": the group does not contain the calling rank", lk);
  if (root != -1 && !std::binary_search(group.begin(), group.end(), root)) {
    fail(where + ": root " + std::to_string(root) + " is not in the group", lk);
  }
  member = static_cast<int>(self - group.begin());

  GroupState& gs = groups_[group];
  if (gs.nextCall.empty()) gs.nextCall.assign(group.size(), 0);
  const uint64_t call = gs.nextCall[member]++;
  MeetingPtr m;
  auto it = gs.open.find(call);
  if (it == gs.open.end()) {
    m = std::make_shared<Meeting>();
    m->kind = kind;
    m->group = group;
    m->call = call;
    m->count = count;
    m->root = root;
    m->firstRank = rank;
    m->inputs.assign(group.size(), nullptr);
    m->reached.assign(group.size(), 0);
    gs.open.emplace(call, m);
  } else {
    m = it->second;
    const std::string head = "collective #" + std::to_string(call) + " on group " + listOf(group) + ": rank " +
                             std::to_string(rank);
    const std::string first = "rank " + std::to_string(m->firstRank);
    if (m->kind != kind) {
      fail(head + " called " + kind + " where " + first + " called " + m->kind +
               " (members must call a group's collectives in the same order)",
           lk);
    }
    if (m->count != count) {
      fail(head + " passed count " + std::to_string(count) + " to " + kind + ", " + first + " passed " +
               std::to_string(m->count),
           lk);
    }
    if (m->root != root) {
      fail(head + " passed root " + std::to_string(root) + " to " + kind + ", " + first + " passed " +
               std::to_string(m->root),
           lk);
    }
  }
  m->inputs[member] = input;
  if (++m->joined == static_cast<int>(group.size())) gs.open.erase(call);  // complete: later calls open new ones
  return m;
}

void Communicator::barrier(Meeting& m, int member, std::unique_lock<std::mutex>& lk) {
  const uint64_t gen = m.generation;
  const int n = static_cast<int>(m.group.size());
  m.reached[member] = gen + 1;
  if (++m.waiting == n) {
    m.waiting = 0;
    m.generation++;
    if (m.generation == 1) m.busy = n;  // everyone goes on to read inputs, counted before anyone can see an abort
    cv_.notify_all();
    return;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  while (m.generation == gen && !aborted_) {
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && m.generation == gen && !aborted_) {
      std::vector<int> missing;
      for (int i = 0; i < n; i++) {
        if (m.reached[i] <= gen) missing.push_back(m.group[i]);
      }
      std::ostringstream msg;
      msg << m.kind << " #" << m.call << " on group " << listOf(m.group) << ": timed out after " << seconds(timeout_)
          << " at rank " << m.group[member] << "; rank(s) " << listOf(missing)
          << (gen == 0 ? " never arrived" : " never finished reading inputs");
      if (!aborted_) {
        aborted_ = true;
        abortMessage_ = msg.str();
      }
      cv_.notify_all();
    }
  }
  if (m.generation != gen) return;  // met before the abort: carry on, the next meeting point will throw
  cv_.wait(lk, [&] { return m.busy == 0; });
  throw CommAborted(abortMessage_);
}

template <typename Compute, typename Finish>
void Communicator::collective(int rank, const std::vector<int>& group, const char* kind, size_t count, int root,
                              const float* input, size_t scratchSize, Compute compute, Finish finish) {
  std::unique_lock<std::mutex> lk(mutex_);
  throwIfAborted();
  int member = -1;
  MeetingPtr m = join(rank, group, kind, count, root, input, lk, member);
  if (!m->scratch) m->scratch.reset(new float[std::max<size_t>(scratchSize, 1)]);  // uninitialised: fully written
  barrier(*m, member, lk);
  lk.unlock();
  compute(*m, static_cast<size_t>(member));
  lk.lock();
  if (--m->busy == 0 && aborted_) cv_.notify_all();
  barrier(*m, member, lk);
  lk.unlock();
  finish(*m, static_cast<size_t>(member));
}

void Communicator::allReduce(int rank, const std::vector<int>& group, float* data, size_t count, ReduceOp op) {
  collective(
      rank, group, op == ReduceOp::Avg ? "allReduce(avg)" : "allReduce", count, -1, data, count,
      [&](Meeting& m, size_t i) {
        const auto [lo, hi] = sliceOf(count, m.group.size(), i);
        orderedSum(m.inputs, 0, m.scratch.get(), lo, hi, op);
      },
      [&](Meeting& m, size_t) { std::copy(m.scratch.get(), m.scratch.get() + count, data); });
}

void Communicator::reduceScatter(int rank, const std::vector<int>& group, const float* input, float* output,
                                 size_t countPerRank, ReduceOp op) {
  const size_t total = countPerRank * group.size();
  collective(
      rank, group, op == ReduceOp::Avg ? "reduceScatter(avg)" : "reduceScatter", countPerRank, -1, input, total,
      [&](Meeting& m, size_t i) {
        // Member i reduces the chunk it keeps, so the work is spread evenly and needs no slicing.
        orderedSum(m.inputs, 0, m.scratch.get(), i * countPerRank, (i + 1) * countPerRank, op);
      },
      [&](Meeting& m, size_t i) {
        const float* s = m.scratch.get() + i * countPerRank;
        std::copy(s, s + countPerRank, output);
      });
}

void Communicator::allGather(int rank, const std::vector<int>& group, const float* input, float* output,
                             size_t countPerRank) {
  const size_t total = countPerRank * group.size();
  collective(
      rank, group, "allGather", countPerRank, -1, input, total,
      [&](Meeting& m, size_t i) { std::copy(input, input + countPerRank, m.scratch.get() + i * countPerRank); },
      [&](Meeting& m, size_t) { std::copy(m.scratch.get(), m.scratch.get() + total, output); });
}

void Communicator::broadcast(int rank, const std::vector<int>& group, int root, float* data, size_t count) {
  collective(
      rank, group, "broadcast", count, root, data, count,
      [&](Meeting& m, size_t i) {
        const size_t r = static_cast<size_t>(std::lower_bound(group.begin(), group.end(), root) - group.begin());
        const auto [lo, hi] = sliceOf(count, m.group.size(), i);
        std::copy(m.inputs[r] + lo, m.inputs[r] + hi, m.scratch.get() + lo);
      },
      [&](Meeting& m, size_t) {
        if (rank != root) std::copy(m.scratch.get(), m.scratch.get() + count, data);
      });
}

void Communicator::reduce(int rank, const std::vector<int>& group, int root, float* data, size_t count) {
  collective(
      rank, group, "reduce", count, root, data, count,
      [&](Meeting& m, size_t i) {
        const auto [lo, hi] = sliceOf(count, m.group.size(), i);
        orderedSum(m.inputs, 0, m.scratch.get(), lo, hi, ReduceOp::Sum);
      },
      [&](Meeting& m, size_t) {
        if (rank == root) std::copy(m.scratch.get(), m.scratch.get() + count, data);
      });
}

void Communicator::send(int rank, int peer, int tag, const float* data, size_t count) {
  std::unique_lock<std::mutex> lk(mutex_);
  throwIfAborted();
  checkRank(rank, "send", lk);
  checkRank(peer, "send", lk);
  mailboxes_[{rank, peer, tag}].emplace_back(data, data + count);
  cv_.notify_all();
}

void Communicator::recv(int rank, int peer, int tag, float* data, size_t count) {
  std::unique_lock<std::mutex> lk(mutex_);
  throwIfAborted();
  checkRank(rank, "recv", lk);
  checkRank(peer, "recv", lk);
  const std::string where = "recv at rank " + std::to_string(rank) + " from rank " + std::to_string(peer) +
                            " (tag " + std::to_string(tag) + ")";
  const std::tuple<int, int, int> key{peer, rank, tag};
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  auto ready = [&] {
    auto it = mailboxes_.find(key);
    return it != mailboxes_.end() && !it->second.empty();
  };
  while (!aborted_ && !ready()) {
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && !aborted_ && !ready()) {
      fail(where + ": timed out after " + seconds(timeout_) + "; rank " + std::to_string(peer) + " never sent", lk);
    }
  }
  throwIfAborted();
  auto it = mailboxes_.find(key);
  std::vector<float> message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mailboxes_.erase(it);
  if (message.size() != count) {
    fail(where + ": expects " + std::to_string(count) + " elements, the send had " + std::to_string(message.size()),
         lk);
  }
  lk.unlock();
  std::copy(message.begin(), message.end(), data);
}

}  // namespace fsm
