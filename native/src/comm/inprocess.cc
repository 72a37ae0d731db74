// InProcessCommunicator (inprocess.h): meetings of a group, the fixed-order reductions, buffered send/recv,
// abort, timeouts and reset.
//
// Every collective is one "meeting" of its group, matched by the group and the call's index on that group.
// A large one runs in four phases, its work spread over the members:
//   1. meet: every member has published its input and output pointers;
//   2. compute: member i fills slice i of the meeting's scratch, reading any member's inputs but writing none;
//   3. meet: every member is done reading inputs;
//   4. finish: each member copies its result from scratch into its own output.
// A small one (scratch up to kDeliverFloats) meets once: the last member to arrive computes every slice, then
// copies every member's result out, and the others, who waited, return. With virtual devices sharing a few
// cores, a meeting point costs a context switch per waiting member, more than the copying it would spread.
// Deferred (defer(true): devices taking turns on fewer host threads than devices), every collective meets
// once and a member that does not complete the meeting returns at once, pending, for the one that does to
// deliver its result. Either way every input is read before any output is written, so aliased inputs and
// outputs are safe. Which member computes a slice does not change its value: every element is the same
// ordered sum, so the result is the same bits every run.
#include "comm/inprocess.h"

#include <algorithm>
#include <sstream>

#include "core/yield_wait.h"

namespace fsm {

struct InProcessCommunicator::Meeting {
  std::string kind;
  const std::vector<int>* group = nullptr;  // the registered group's ranks
  uint64_t call = 0;                        // index of this collective among the group's collectives
  size_t count = 0;
  int root = -1;
  int firstRank = -1;  // who opened it: the reference for mismatch messages
  int joined = 0;
  std::vector<const float*> inputs;  // per member
  std::vector<float*> outputs;       // per member
  std::vector<uint64_t> reached;     // per member: how many meeting points it has reached
  int waiting = 0;                   // members waiting at the current meeting point
  uint64_t generation = 0;           // meeting points completed
  // Members between the first and second meeting point, i.e. possibly reading other members' inputs. An
  // aborted member waits for it to drop to 0 before it throws, so its caller may free its buffers at once.
  int busy = 0;
  bool delivered = false;  // a small meeting: the last member to arrive has written every member's result
  std::unique_ptr<float[]> scratch;
};

namespace {

// Scratch size (fp32 elements) up to which one member does a collective's work for the group: 256 KiB.
constexpr size_t kDeliverFloats = size_t{1} << 16;

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

InProcessCommunicator::InProcessCommunicator(int worldSize, std::chrono::duration<double> timeout)
    : worldSize_(worldSize), timeout_(timeout) {
  if (worldSize < 1) throw std::invalid_argument("InProcessCommunicator: worldSize must be at least 1");
  for (int r = 0; r < worldSize; r++) wake_.push_back(std::make_unique<std::condition_variable>());
  pending_.resize(static_cast<size_t>(worldSize));
}

void InProcessCommunicator::wake(const std::vector<int>& ranks) {
  for (int r : ranks) wake_[static_cast<size_t>(r)]->notify_all();
}

void InProcessCommunicator::wakeAll() {
  for (auto& cv : wake_) cv->notify_all();
}

GroupHandle InProcessCommunicator::registerGroup(const std::vector<int>& ranks) {
  std::lock_guard<std::mutex> lk(mutex_);
  auto it = handles_.find(ranks);
  if (it != handles_.end()) return it->second;
  checkGroup(ranks, worldSize_);
  const GroupHandle handle = static_cast<GroupHandle>(groups_.size());
  GroupState g;
  g.ranks = ranks;
  g.nextCall.assign(ranks.size(), 0);
  groups_.push_back(std::move(g));
  handles_.emplace(ranks, handle);
  return handle;
}

void InProcessCommunicator::abort(const std::string& message) {
  std::lock_guard<std::mutex> lk(mutex_);
  if (!aborted_) {
    aborted_ = true;
    abortMessage_ = message;
  }
  wakeAll();
}

bool InProcessCommunicator::aborted() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return aborted_;
}

std::string InProcessCommunicator::abortMessage() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return abortMessage_;
}

void InProcessCommunicator::reset() {
  std::lock_guard<std::mutex> lk(mutex_);
  aborted_ = false;
  abortMessage_.clear();
  for (GroupState& g : groups_) {
    std::fill(g.nextCall.begin(), g.nextCall.end(), 0);
    g.open.clear();
  }
  mailboxes_.clear();
  for (auto& p : pending_) p = {nullptr, -1};
}

void InProcessCommunicator::defer(bool on) {
  std::lock_guard<std::mutex> lk(mutex_);
  deferred_ = on;
}

bool InProcessCommunicator::pending(int rank) {
  std::lock_guard<std::mutex> lk(mutex_);
  auto& [m, member] = pending_.at(static_cast<size_t>(rank));
  if (!m) return false;
  if (m->delivered) {
    m.reset();
    return false;
  }
  throwIfAborted();
  return true;
}

void InProcessCommunicator::expire(int rank) {
  std::unique_lock<std::mutex> lk(mutex_);
  auto [m, member] = pending_.at(static_cast<size_t>(rank));
  if (!m) fail(CommError::Kind::Timeout, "rank " + std::to_string(rank) + ": timed out after " + seconds(timeout_), {}, lk);
  std::vector<int> missing;
  const std::string text = timeoutText(*m, member, 0, missing);
  fail(CommError::Kind::Timeout, text, missing, lk);
}

void InProcessCommunicator::fail(CommError::Kind kind, const std::string& message, std::vector<int> peers,
                                 std::unique_lock<std::mutex>& lk) {
  const bool first = !aborted_;
  if (first) {
    aborted_ = true;
    abortMessage_ = message;
  }
  wakeAll();
  const std::string echo = abortMessage_;
  lk.unlock();
  if (!first) throw CommError(CommError::Kind::Aborted, echo);
  throw CommError(kind, message, std::move(peers));
}

void InProcessCommunicator::throwIfAborted() const {
  if (aborted_) throw CommError(CommError::Kind::Aborted, abortMessage_);
}

void InProcessCommunicator::checkRank(int rank, const char* kind, std::unique_lock<std::mutex>& lk) {
  if (rank < 0 || rank >= worldSize_) {
    fail(CommError::Kind::Invalid, std::string(kind) + ": rank " + std::to_string(rank) + " is outside the world of " + std::to_string(worldSize_), {}, lk);
  }
}

size_t InProcessCommunicator::groupSize(GroupHandle group) {
  // Groups are registered before any call and never change afterwards, so this read needs no lock.
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) {
    const std::string message = "unknown group handle " + std::to_string(group) + " (register groups before calling)";
    abort(message);  // the other members must not wait for this one
    throw CommError(CommError::Kind::Invalid, message);
  }
  return groups_[static_cast<size_t>(group)].ranks.size();
}

InProcessCommunicator::MeetingPtr InProcessCommunicator::join(int rank, GroupHandle group, const char* kind, size_t count, int root,
                                                              const float* input, float* output, std::unique_lock<std::mutex>& lk, int& member) {
  checkRank(rank, kind, lk);
  GroupState& gs = groups_[static_cast<size_t>(group)];
  const std::vector<int>& ranks = gs.ranks;
  auto where = [&] { return std::string(kind) + " at rank " + std::to_string(rank) + " on group " + rankList(ranks); };
  const auto self = std::lower_bound(ranks.begin(), ranks.end(), rank);
  if (self == ranks.end() || *self != rank) fail(CommError::Kind::Invalid, where() + ": the group does not contain the calling rank", {}, lk);
  if (root != -1 && !std::binary_search(ranks.begin(), ranks.end(), root)) {
    fail(CommError::Kind::Invalid, where() + ": root " + std::to_string(root) + " is not in the group", {}, lk);
  }
  member = static_cast<int>(self - ranks.begin());

  const uint64_t call = gs.nextCall[member]++;
  MeetingPtr m;
  auto it = gs.open.find(call);
  if (it == gs.open.end()) {
    m = std::make_shared<Meeting>();
    m->kind = kind;
    m->group = &ranks;
    m->call = call;
    m->count = count;
    m->root = root;
    m->firstRank = rank;
    m->inputs.assign(ranks.size(), nullptr);
    m->outputs.assign(ranks.size(), nullptr);
    m->reached.assign(ranks.size(), 0);
    gs.open.emplace(call, m);
  } else {
    m = it->second;
    // Built only for a mismatch: this runs on every collective.
    auto head = [&] { return "collective #" + std::to_string(call) + " on group " + rankList(ranks) + ": rank " + std::to_string(rank); };
    auto first = [&] { return "rank " + std::to_string(m->firstRank); };
    if (m->kind != kind) {
      fail(CommError::Kind::Invalid,
           head() + " called " + kind + " where " + first() + " called " + m->kind + " (members must call a group's collectives in the same order)", {}, lk);
    }
    if (m->count != count) {
      fail(CommError::Kind::Invalid, head() + " passed count " + std::to_string(count) + " to " + kind + ", " + first() + " passed " + std::to_string(m->count), {}, lk);
    }
    if (m->root != root) {
      fail(CommError::Kind::Invalid, head() + " passed root " + std::to_string(root) + " to " + kind + ", " + first() + " passed " + std::to_string(m->root), {}, lk);
    }
  }
  m->inputs[member] = input;
  m->outputs[member] = output;
  if (++m->joined == static_cast<int>(ranks.size())) gs.open.erase(call);  // complete: later calls open new ones
  return m;
}

void InProcessCommunicator::barrier(Meeting& m, int member, std::unique_lock<std::mutex>& lk) {
  const uint64_t gen = m.generation;
  const std::vector<int>& group = *m.group;
  const int n = static_cast<int>(group.size());
  m.reached[member] = gen + 1;
  if (++m.waiting == n) {
    m.waiting = 0;
    m.generation++;
    if (m.generation == 1) m.busy = n;  // everyone goes on to read inputs, counted before anyone can see an abort
    wake(group);
    return;
  }
  std::condition_variable& cv = *wake_[static_cast<size_t>(group[member])];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  std::vector<int> missing;  // set when this rank is the one that timed out
  std::string timeout;
  yieldBeforeSleep(lk, [&] { return m.generation != gen || aborted_; });
  while (m.generation == gen && !aborted_) {
    if (cv.wait_until(lk, deadline) == std::cv_status::timeout && m.generation == gen && !aborted_) {
      timeout = timeoutText(m, member, gen, missing);
      aborted_ = true;
      abortMessage_ = timeout;
      wakeAll();
    }
  }
  if (m.generation != gen) return;  // met before the abort: carry on, the next meeting point will throw
  cv.wait(lk, [&] { return m.busy == 0; });
  if (!timeout.empty()) throw CommError(CommError::Kind::Timeout, timeout, missing);
  throw CommError(CommError::Kind::Aborted, abortMessage_);
}

std::string InProcessCommunicator::timeoutText(const Meeting& m, int member, uint64_t gen, std::vector<int>& missing) const {
  const std::vector<int>& group = *m.group;
  for (size_t i = 0; i < group.size(); i++) {
    if (m.reached[i] <= gen) missing.push_back(group[i]);
  }
  std::ostringstream msg;
  msg << m.kind << " #" << m.call << " on group " << rankList(group) << ": timed out after " << seconds(timeout_) << " at rank "
      << group[static_cast<size_t>(member)] << "; rank(s) " << rankList(missing) << (gen == 0 ? " never arrived" : " never finished reading inputs");
  return msg.str();
}

void InProcessCommunicator::awaitDelivery(Meeting& m, int member, std::unique_lock<std::mutex>& lk) {
  m.reached[member] = 1;
  std::condition_variable& cv = *wake_[static_cast<size_t>((*m.group)[static_cast<size_t>(member)])];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  std::vector<int> missing;
  std::string timeout;
  // An abort stops the wait only once no delivery is under way: the deliverer may be writing this member's output.
  yieldBeforeSleep(lk, [&] { return m.delivered || aborted_; });
  while (!m.delivered && !(aborted_ && m.busy == 0)) {
    if (cv.wait_until(lk, deadline) == std::cv_status::timeout && !m.delivered && !aborted_) {
      timeout = timeoutText(m, member, 0, missing);
      aborted_ = true;
      abortMessage_ = timeout;
      wakeAll();
    }
  }
  if (m.delivered) return;  // delivered before the abort: carry on, the next call will throw
  if (!timeout.empty()) throw CommError(CommError::Kind::Timeout, timeout, missing);
  throw CommError(CommError::Kind::Aborted, abortMessage_);
}

template <typename Compute, typename Finish>
void InProcessCommunicator::collective(int rank, GroupHandle group, const char* kind, size_t count, int root, const float* input,
                                       float* output, size_t scratchSize, Compute compute, Finish finish) {
  std::unique_lock<std::mutex> lk(mutex_);
  throwIfAborted();
  int member = -1;
  MeetingPtr m = join(rank, group, kind, count, root, input, output, lk, member);
  if (!m->scratch) m->scratch.reset(new float[std::max<size_t>(scratchSize, 1)]);  // uninitialised: fully written
  const size_t n = m->group->size();
  // Deferred, every collective is a small one, and a member that does not complete the meeting leaves its
  // result to the one that does: no member waits for another.
  if (scratchSize <= kDeliverFloats || deferred_) {
    if (m->joined < static_cast<int>(n)) {
      if (deferred_) {
        m->reached[static_cast<size_t>(member)] = 1;
        pending_[static_cast<size_t>(rank)] = {m, member};
        return;
      }
      awaitDelivery(*m, member, lk);
      return;
    }
    m->busy = 1;  // set as the last member joins, so no waiter can see an abort without seeing this
    lk.unlock();
    for (size_t i = 0; i < n; i++) compute(*m, i);
    for (size_t i = 0; i < n; i++) finish(*m, i);
    lk.lock();
    m->busy = 0;
    m->delivered = true;
    wake(*m->group);
    return;
  }
  barrier(*m, member, lk);
  lk.unlock();
  compute(*m, static_cast<size_t>(member));
  lk.lock();
  if (--m->busy == 0 && aborted_) wake(*m->group);
  barrier(*m, member, lk);
  lk.unlock();
  finish(*m, static_cast<size_t>(member));
}

void InProcessCommunicator::doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) {
  groupSize(group);
  collective(
      rank, group, op == ReduceOp::Avg ? "allReduce(avg)" : "allReduce", count, -1, data, data, count,
      [&](Meeting& m, size_t i) {
        const auto [lo, hi] = sliceOf(count, m.group->size(), i);
        orderedSum(m.inputs, 0, m.scratch.get(), lo, hi, op);
      },
      [&](Meeting& m, size_t i) { std::copy(m.scratch.get(), m.scratch.get() + count, m.outputs[i]); });
}

void InProcessCommunicator::doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) {
  const size_t total = countPerRank * groupSize(group);
  collective(
      rank, group, op == ReduceOp::Avg ? "reduceScatter(avg)" : "reduceScatter", countPerRank, -1, input, output, total,
      [&](Meeting& m, size_t i) {
        // Member i reduces the chunk it keeps, so the work is spread evenly and needs no slicing.
        orderedSum(m.inputs, 0, m.scratch.get(), i * countPerRank, (i + 1) * countPerRank, op);
      },
      [&](Meeting& m, size_t i) {
        const float* s = m.scratch.get() + i * countPerRank;
        std::copy(s, s + countPerRank, m.outputs[i]);
      });
}

void InProcessCommunicator::doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) {
  const size_t total = countPerRank * groupSize(group);
  collective(
      rank, group, "allGather", countPerRank, -1, input, output, total,
      [&](Meeting& m, size_t i) { std::copy(m.inputs[i], m.inputs[i] + countPerRank, m.scratch.get() + i * countPerRank); },
      [&](Meeting& m, size_t i) { std::copy(m.scratch.get(), m.scratch.get() + total, m.outputs[i]); });
}

void InProcessCommunicator::doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) {
  groupSize(group);
  collective(
      rank, group, "broadcast", count, root, data, data, count,
      [&](Meeting& m, size_t i) {
        const std::vector<int>& g = *m.group;
        const size_t r = static_cast<size_t>(std::lower_bound(g.begin(), g.end(), root) - g.begin());
        const auto [lo, hi] = sliceOf(count, g.size(), i);
        std::copy(m.inputs[r] + lo, m.inputs[r] + hi, m.scratch.get() + lo);
      },
      [&](Meeting& m, size_t i) {
        if ((*m.group)[i] != root) std::copy(m.scratch.get(), m.scratch.get() + count, m.outputs[i]);
      });
}

void InProcessCommunicator::doReduce(int rank, GroupHandle group, int root, float* data, size_t count) {
  groupSize(group);
  collective(
      rank, group, "reduce", count, root, data, data, count,
      [&](Meeting& m, size_t i) {
        const auto [lo, hi] = sliceOf(count, m.group->size(), i);
        orderedSum(m.inputs, 0, m.scratch.get(), lo, hi, ReduceOp::Sum);
      },
      [&](Meeting& m, size_t i) {
        if ((*m.group)[i] == root) std::copy(m.scratch.get(), m.scratch.get() + count, m.outputs[i]);
      });
}

void InProcessCommunicator::doSend(int rank, int peer, int tag, const float* data, size_t count) {
  std::unique_lock<std::mutex> lk(mutex_);
  throwIfAborted();
  checkRank(rank, "send", lk);
  checkRank(peer, "send", lk);
  mailboxes_[{rank, peer, tag}].emplace_back(data, data + count);
  wake_[static_cast<size_t>(peer)]->notify_all();
}

bool InProcessCommunicator::recvReady(int rank, int peer, int tag) {
  std::lock_guard<std::mutex> lk(mutex_);
  auto it = mailboxes_.find({peer, rank, tag});
  return it != mailboxes_.end() && !it->second.empty();
}

void InProcessCommunicator::doRecv(int rank, int peer, int tag, float* data, size_t count) {
  std::unique_lock<std::mutex> lk(mutex_);
  throwIfAborted();
  checkRank(rank, "recv", lk);
  checkRank(peer, "recv", lk);
  auto where = [&] { return "recv at rank " + std::to_string(rank) + " from rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")"; };
  std::condition_variable& cv = *wake_[static_cast<size_t>(rank)];
  const std::tuple<int, int, int> key{peer, rank, tag};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  auto ready = [&] {
    auto it = mailboxes_.find(key);
    return it != mailboxes_.end() && !it->second.empty();
  };
  yieldBeforeSleep(lk, [&] { return aborted_ || ready(); });
  while (!aborted_ && !ready()) {
    if (cv.wait_until(lk, deadline) == std::cv_status::timeout && !aborted_ && !ready()) {
      fail(CommError::Kind::Timeout, where() + ": timed out after " + seconds(timeout_) + "; rank " + std::to_string(peer) + " never sent", {peer}, lk);
    }
  }
  throwIfAborted();
  auto it = mailboxes_.find(key);
  std::vector<float> message = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) mailboxes_.erase(it);
  if (message.size() != count) {
    fail(CommError::Kind::Invalid, where() + ": expects " + std::to_string(count) + " elements, the send had " + std::to_string(message.size()), {}, lk);
  }
  lk.unlock();
  std::copy(message.begin(), message.end(), data);
}

}  // namespace fsm
