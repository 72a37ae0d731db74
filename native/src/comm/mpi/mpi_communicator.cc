// MpiCommunicator (mpi_communicator.h): group registration (an MPI communicator per group spanning processes),
// the collectives as ordered point-to-point exchanges, buffered sends, polling waits with deadlines, and
// abort notices between processes.
//
// Every collective: member i owns the elements it reduces (a slice of an all-reduce, chunk i of a
// reduce-scatter, everything for a reduce's root); the other members send it their part, it adds them in group
// order into a scratch buffer, and (all-reduce) sends the result back. Messages between two members of a group
// travel on the group's communicator with tag from·n + to, so MPI's non-overtaking order matches them call by
// call; between ranks of this process they go through a FIFO mailbox with the same key.
#include "comm/mpi/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <set>
#include <sstream>

namespace fsm {

namespace {

constexpr int kNoticeTag = 1;
constexpr size_t kNoticeBytes = 4096;

std::pair<size_t, size_t> sliceOf(size_t count, size_t n, size_t i) { return {count * i / n, count * (i + 1) / n}; }

// out[k] = ((in[0][k] + in[1][k]) + in[2][k]) + ..., then / n for Avg: the in-process communicator's order.
void orderedSum(const std::vector<const float*>& in, float* out, size_t count, ReduceOp op) {
  std::copy(in[0], in[0] + count, out);
  for (size_t j = 1; j < in.size(); j++) {
    const float* x = in[j];
    for (size_t k = 0; k < count; k++) out[k] += x[k];
  }
  if (op == ReduceOp::Avg) {
    const float n = static_cast<float>(in.size());
    for (size_t k = 0; k < count; k++) out[k] /= n;
  }
}

bool overlaps(const float* a, size_t na, const float* b, size_t nb) { return a < b + nb && b < a + na; }

}  // namespace

struct MpiCommunicator::Exchange {
  struct Request {
    MPI_Request request = MPI_REQUEST_NULL;
    int peer = -1;      // global rank on the other side
    bool recv = false;  // a receive (its size is checked), or a send
    size_t count = 0;
  };
  struct Local {
    std::tuple<int, int, int, int> key;
    float* data = nullptr;
    size_t count = 0;
    int peer = -1;
    bool done = false;
  };
  std::vector<Request> requests;
  std::vector<Local> locals;
  std::vector<std::vector<float>>& scratch;  // the calling rank's buffers (Scratch): kept alive past a failure
  size_t* next;                               // how many of them this call has taken so far

  /** A buffer of n floats for this call, reused from the rank's earlier calls (no allocation once warm). */
  float* buffer(size_t n) {
    if (*next == scratch.size()) scratch.emplace_back();
    std::vector<float>& v = scratch[(*next)++];
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

MpiCommunicator::MpiCommunicator(int worldSize, const std::vector<int>& localRanks, std::chrono::duration<double> timeout)
    : worldSize_(worldSize), timeout_(timeout) {
  const mpi::WorldInfo& w = mpi::world();
  process_ = w.rank;
  processes_ = w.size;
  tagUpperBound_ = w.tagUpperBound;
  const int per = worldSize / std::max(1, processes_);
  bool contiguous = per >= 1 && per * processes_ == worldSize && localRanks.size() == static_cast<size_t>(per);
  for (size_t i = 0; contiguous && i < localRanks.size(); i++) contiguous = localRanks[i] == process_ * per + static_cast<int>(i);
  if (!contiguous) {
    throw CommError(CommError::Kind::Invalid, "the mpi communicator runs contiguous blocks of ranks, process p the ranks [p·L, (p+1)·L) with L = worldSize / processes: " +
                                                  std::to_string(worldSize) + " ranks over " + std::to_string(processes_) + " processes, this process (" +
                                                  std::to_string(process_) + ") was given " + rankList(localRanks));
  }
  perProcess_ = per;
  scratch_.resize(static_cast<size_t>(per));
  p2p_ = mpi::duplicateWorld();
  control_ = mpi::duplicateWorld();
  listener_ = std::thread(&MpiCommunicator::listen, this);
  mpi::atFinalize(this, [this] { stop(); });
}

MpiCommunicator::~MpiCommunicator() {
  mpi::removeAtFinalize(this);
  stop();
}

// Stops the listener and, after a clean run, completes in-flight sends and frees the communicators. After a
// failure nothing waits on peers that may be gone; the process is about to exit.
void MpiCommunicator::stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_ = true;
  if (listener_.joinable()) listener_.join();
  if (mpi::finalizedAlready()) return;
  if (!aborted_) {
    reapSends(true);
    for (Group& g : groups_) {
      if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
    }
    MPI_Comm_free(&p2p_);
    MPI_Comm_free(&control_);
  } else {
    // Give the abort notices a moment to leave, so the other processes hear the cause, not just a timeout.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    std::lock_guard<std::mutex> lk(abortMutex_);
    std::vector<MPI_Request> pending;
    for (Notice& n : notices_) pending.push_back(n.request);
    mpi::waitAll(pending, deadline);
  }
}

GroupHandle MpiCommunicator::registerGroup(const std::vector<int>& ranks) {
  auto it = handles_.find(ranks);
  if (it != handles_.end()) return it->second;
  checkGroup(ranks, worldSize_);
  const std::string where = "group " + rankList(ranks);
  Group g;
  g.ranks = ranks;
  std::vector<int> processes;
  for (int r : ranks) {
    if (processes.empty() || processes.back() != processOf(r)) processes.push_back(processOf(r));
  }
  for (int r : ranks) g.commRank.push_back(static_cast<int>(std::lower_bound(processes.begin(), processes.end(), processOf(r)) - processes.begin()));
  if (processes.size() > 1) {
    // Collective over the group's processes only; every process registers its groups in ascending order, so
    // the processes of any group reach its creation in the same order and none waits forever.
    MPI_Group world = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
    MPI_Comm_group(p2p_, &world);
    MPI_Group_incl(world, static_cast<int>(processes.size()), processes.data(), &members);
    const int rc = MPI_Comm_create_group(p2p_, members, 0, &g.comm);
    MPI_Group_free(&members);
    MPI_Group_free(&world);
    if (rc != MPI_SUCCESS) throw CommError(CommError::Kind::Invalid, where + ": MPI_Comm_create_group failed: " + mpi::errorText(rc));
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  }
  const GroupHandle handle = static_cast<GroupHandle>(groups_.size());
  groups_.push_back(std::move(g));
  handles_.emplace(ranks, handle);
  return handle;
}

void MpiCommunicator::onRemoteAbort(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lk(abortMutex_);
  onRemoteAbort_ = std::move(handler);
}

std::string MpiCommunicator::abortMessage() const {
  std::lock_guard<std::mutex> lk(abortMutex_);
  return abortMessage_;
}

// Marks this communicator aborted and tells every other process why (once), so their devices stop with this
// cause instead of waiting out their timeouts.
void MpiCommunicator::abort(const std::string& message) {
  std::lock_guard<std::mutex> lk(abortMutex_);
  if (!aborted_) {
    abortMessage_ = message;
    aborted_ = true;
  }
  if (notified_ || stopped_) return;
  notified_ = true;
  for (int p = 0; p < processes_; p++) {
    if (p == process_) continue;
    Notice n;
    n.text = message.substr(0, kNoticeBytes - 1);
    MPI_Isend(n.text.data(), static_cast<int>(n.text.size()), MPI_CHAR, p, kNoticeTag, control_, &n.request);
    notices_.push_back(std::move(n));  // a std::string's heap buffer does not move with it
  }
}

void MpiCommunicator::fail(CommError::Kind kind, const std::string& message, std::vector<int> peers) {
  std::string echo;
  bool first = false;
  {
    std::lock_guard<std::mutex> lk(abortMutex_);
    first = !aborted_;
    if (first) {
      abortMessage_ = message;
      aborted_ = true;
    }
    echo = abortMessage_;
  }
  // The executor's abort (with the failure's full text) tells the other processes.
  if (!first) throw CommError(CommError::Kind::Aborted, echo);
  throw CommError(kind, message, std::move(peers));
}

// Polls for other processes' abort notices; its MPI_Test calls also progress this process's messages (a
// buffered send's rendezvous) while no device is inside a call.
void MpiCommunicator::listen() {
  std::vector<char> buffer(kNoticeBytes);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Irecv(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, MPI_ANY_SOURCE, kNoticeTag, control_, &request);
  while (!stopping_) {
    int flag = 0;
    MPI_Status status;
    MPI_Test(&request, &flag, &status);
    if (flag) {
      int length = 0;
      MPI_Get_count(&status, MPI_CHAR, &length);
      const std::string text = "process " + std::to_string(status.MPI_SOURCE) + " failed: " + std::string(buffer.data(), static_cast<size_t>(std::max(0, length)));
      std::function<void(const std::string&)> handler;
      {
        std::lock_guard<std::mutex> lk(abortMutex_);
        if (!aborted_) {
          abortMessage_ = text;
          aborted_ = true;
          notified_ = true;  // the failed process has told everyone already
        }
        handler = onRemoteAbort_;
      }
      if (handler) handler(text);
      MPI_Irecv(buffer.data(), static_cast<int>(buffer.size()), MPI_CHAR, MPI_ANY_SOURCE, kNoticeTag, control_, &request);
    }
    reapSends(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  MPI_Cancel(&request);
  MPI_Request_free(&request);
}

void MpiCommunicator::reapSends(bool wait) {
  std::lock_guard<std::mutex> lk(flightMutex_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  while (!inFlight_.empty()) {
    int flag = 0;
    MPI_Test(&inFlight_.front().request, &flag, MPI_STATUS_IGNORE);
    if (flag) {
      inFlight_.pop_front();
      continue;
    }
    if (!wait || std::chrono::steady_clock::now() >= deadline || aborted_) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

const MpiCommunicator::Group& MpiCommunicator::groupOf(GroupHandle group, int rank, const char* kind, int& member) {
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) {
    fail(CommError::Kind::Invalid, std::string(kind) + ": unknown group handle " + std::to_string(group) + " (register groups before calling)");
  }
  if (aborted_) fail(CommError::Kind::Aborted, abortMessage());
  const Group& g = groups_[static_cast<size_t>(group)];
  const auto self = std::lower_bound(g.ranks.begin(), g.ranks.end(), rank);
  if (self == g.ranks.end() || *self != rank || !isLocal(rank)) {
    fail(CommError::Kind::Invalid, std::string(kind) + " at rank " + std::to_string(rank) + " on group " + rankList(g.ranks) +
                                       ": the group does not contain the calling rank, or it runs in another process");
  }
  member = static_cast<int>(self - g.ranks.begin());
  return g;
}

void MpiCommunicator::post(Exchange& x, GroupHandle group, int from, int to, const float* data, size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) fail(CommError::Kind::Invalid, "a message of " + std::to_string(count) + " elements is more than MPI's int counts allow");
  const Group& g = groups_[static_cast<size_t>(group)];
  const int toRank = g.ranks[static_cast<size_t>(to)];
  countSent(toRank, count);
  if (isLocal(toRank)) {
    std::lock_guard<std::mutex> lk(mailMutex_);
    mailboxes_[{group, from, to, 0}].emplace_back(data, data + count);
    return;
  }
  Exchange::Request r;
  r.peer = toRank;
  const int n = static_cast<int>(g.ranks.size());
  MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, g.commRank[static_cast<size_t>(to)], from * n + to, g.comm, &r.request);
  x.requests.push_back(r);
}

void MpiCommunicator::expect(Exchange& x, GroupHandle group, int from, int to, float* data, size_t count) {
  const Group& g = groups_[static_cast<size_t>(group)];
  const int fromRank = g.ranks[static_cast<size_t>(from)];
  if (isLocal(fromRank)) {
    x.locals.push_back({{group, from, to, 0}, data, count, fromRank, false});
    return;
  }
  Exchange::Request r;
  r.peer = fromRank;
  r.recv = true;
  r.count = count;
  const int n = static_cast<int>(g.ranks.size());
  MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, g.commRank[static_cast<size_t>(from)], from * n + to, g.comm, &r.request);
  x.requests.push_back(r);
}

void MpiCommunicator::finish(Exchange& x, const std::string& what, int rank) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(timeout_);
  mpi::Backoff backoff;
  // A failed call leaves its requests to MPI and its buffers to the graveyard: MPI may still touch them.
  auto abandon = [&] {
    for (Exchange::Request& r : x.requests) {
      if (r.request == MPI_REQUEST_NULL) continue;
      if (r.recv) MPI_Cancel(&r.request);
      MPI_Request_free(&r.request);
    }
    std::lock_guard<std::mutex> lk(graveMutex_);
    for (auto& b : x.scratch) graveyard_.push_back(std::move(b));
    x.scratch.clear();
    *x.next = 0;
  };
  for (;;) {
    if (aborted_) {
      abandon();
      fail(CommError::Kind::Aborted, abortMessage());
    }
    bool pending = false, progressed = false;
    for (Exchange::Request& r : x.requests) {
      if (r.request == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Status status;
      const int rc = MPI_Test(&r.request, &flag, &status);
      if (rc != MPI_SUCCESS) {
        abandon();
        fail(CommError::Kind::Invalid, what + " at rank " + std::to_string(rank) + ": a message from rank " + std::to_string(r.peer) +
                                           " does not fit (larger than expected?): " + mpi::errorText(rc));
      }
      if (!flag) {
        pending = true;
        continue;
      }
      progressed = true;
      if (r.recv) {
        int got = 0;
        MPI_Get_count(&status, MPI_FLOAT, &got);
        if (static_cast<size_t>(got) != r.count) {
          abandon();
          fail(CommError::Kind::Invalid, what + " at rank " + std::to_string(rank) + ": expects " + std::to_string(r.count) + " elements from rank " +
                                             std::to_string(r.peer) + ", the send had " + std::to_string(got));
        }
      }
    }
    std::string mismatch;
    if (!x.locals.empty()) {
      std::lock_guard<std::mutex> lk(mailMutex_);
      for (Exchange::Local& l : x.locals) {
        if (l.done) continue;
        auto it = mailboxes_.find(l.key);
        if (it == mailboxes_.end() || it->second.empty()) {
          pending = true;
          continue;
        }
        std::vector<float> message = std::move(it->second.front());
        it->second.pop_front();
        if (it->second.empty()) mailboxes_.erase(it);
        if (message.size() != l.count) {
          mismatch = what + " at rank " + std::to_string(rank) + ": expects " + std::to_string(l.count) + " elements from rank " + std::to_string(l.peer) +
                     ", the send had " + std::to_string(message.size());
          break;
        }
        std::copy(message.begin(), message.end(), l.data);
        l.done = progressed = true;
      }
    }
    if (!mismatch.empty()) {
      abandon();
      fail(CommError::Kind::Invalid, mismatch);
    }
    if (!pending) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::set<int> missing;
      for (const Exchange::Request& r : x.requests) {
        if (r.request != MPI_REQUEST_NULL) missing.insert(r.peer);
      }
      for (const Exchange::Local& l : x.locals) {
        if (!l.done) missing.insert(l.peer);
      }
      std::vector<int> peers(missing.begin(), missing.end());
      std::ostringstream msg;
      msg << what << ": timed out after " << timeout_.count() << " s at rank " << rank << "; rank(s) " << rankList(peers) << " never arrived";
      abandon();
      fail(CommError::Kind::Timeout, msg.str(), peers);
    }
    if (progressed) backoff.reset();
    backoff.pause();
  }
}

void MpiCommunicator::doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) {
  size_t taken = 0;
  int me = 0;
  const Group& g = groupOf(group, rank, "allReduce", me);
  const size_t n = g.ranks.size();
  const std::string what = std::string(op == ReduceOp::Avg ? "allReduce(avg)" : "allReduce") + " on group " + rankList(g.ranks);
  const auto [lo, hi] = sliceOf(count, n, static_cast<size_t>(me));
  // Phase 1: each member's slice j goes to member j, which adds the n parts in group order.
  Exchange x{{}, {}, scratchOf(rank), &taken};
  std::vector<const float*> parts(n);
  for (size_t j = 0; j < n; j++) {
    if (static_cast<int>(j) == me) {
      parts[j] = data + lo;
      continue;
    }
    const auto [a, b] = sliceOf(count, n, j);
    post(x, group, me, static_cast<int>(j), data + a, b - a);
    float* part = x.buffer(hi - lo);
    expect(x, group, static_cast<int>(j), me, part, hi - lo);
    parts[j] = part;
  }
  finish(x, what, rank);
  float* sum = x.buffer(hi - lo);
  orderedSum(parts, sum, hi - lo, op);
  // Phase 2: every member's sum goes to everyone (data is free to overwrite: phase 1's sends are done).
  Exchange y{{}, {}, scratchOf(rank), &taken};
  for (size_t j = 0; j < n; j++) {
    if (static_cast<int>(j) == me) continue;
    const auto [a, b] = sliceOf(count, n, j);
    post(y, group, me, static_cast<int>(j), sum, hi - lo);
    expect(y, group, static_cast<int>(j), me, data + a, b - a);
  }
  finish(y, what, rank);
  std::copy(sum, sum + (hi - lo), data + lo);
}

void MpiCommunicator::doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) {
  size_t taken = 0;
  int me = 0;
  const Group& g = groupOf(group, rank, "reduceScatter", me);
  const size_t n = g.ranks.size();
  const std::string what = std::string(op == ReduceOp::Avg ? "reduceScatter(avg)" : "reduceScatter") + " on group " + rankList(g.ranks);
  Exchange x{{}, {}, scratchOf(rank), &taken};
  std::vector<const float*> parts(n);
  for (size_t j = 0; j < n; j++) {
    if (static_cast<int>(j) == me) {
      parts[j] = input + j * countPerRank;
      continue;
    }
    post(x, group, me, static_cast<int>(j), input + j * countPerRank, countPerRank);
    float* part = x.buffer(countPerRank);
    expect(x, group, static_cast<int>(j), me, part, countPerRank);
    parts[j] = part;
  }
  finish(x, what, rank);
  // Into scratch first: the output may alias the input.
  float* sum = x.buffer(countPerRank);
  orderedSum(parts, sum, countPerRank, op);
  std::copy(sum, sum + countPerRank, output);
}

void MpiCommunicator::doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) {
  size_t taken = 0;
  int me = 0;
  const Group& g = groupOf(group, rank, "allGather", me);
  const size_t n = g.ranks.size();
  const std::string what = "allGather on group " + rankList(g.ranks);
  Exchange x{{}, {}, scratchOf(rank), &taken};
  float* mine = output + static_cast<size_t>(me) * countPerRank;
  // The input is read while other members' chunks arrive in the output: staged unless it is this member's
  // own chunk of the output (FSDP's gather in place) or apart from it.
  const float* source = input;
  if (input != mine && overlaps(input, countPerRank, output, n * countPerRank)) {
    float* copy = x.buffer(countPerRank);
    std::copy(input, input + countPerRank, copy);
    source = copy;
  }
  for (size_t j = 0; j < n; j++) {
    if (static_cast<int>(j) == me) continue;
    post(x, group, me, static_cast<int>(j), source, countPerRank);
    expect(x, group, static_cast<int>(j), me, output + j * countPerRank, countPerRank);
  }
  finish(x, what, rank);
  if (source != mine) std::memmove(mine, source, countPerRank * sizeof(float));
}

void MpiCommunicator::doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) {
  size_t taken = 0;
  int me = 0;
  const Group& g = groupOf(group, rank, "broadcast", me);
  const auto r = std::lower_bound(g.ranks.begin(), g.ranks.end(), root);
  if (r == g.ranks.end() || *r != root) fail(CommError::Kind::Invalid, "broadcast on group " + rankList(g.ranks) + ": root " + std::to_string(root) + " is not in the group");
  const int rootMember = static_cast<int>(r - g.ranks.begin());
  Exchange x{{}, {}, scratchOf(rank), &taken};
  if (me == rootMember) {
    for (size_t j = 0; j < g.ranks.size(); j++) {
      if (static_cast<int>(j) != me) post(x, group, me, static_cast<int>(j), data, count);
    }
  } else {
    expect(x, group, rootMember, me, data, count);
  }
  finish(x, "broadcast on group " + rankList(g.ranks), rank);
}

void MpiCommunicator::doReduce(int rank, GroupHandle group, int root, float* data, size_t count) {
  size_t taken = 0;
  int me = 0;
  const Group& g = groupOf(group, rank, "reduce", me);
  const auto r = std::lower_bound(g.ranks.begin(), g.ranks.end(), root);
  if (r == g.ranks.end() || *r != root) fail(CommError::Kind::Invalid, "reduce on group " + rankList(g.ranks) + ": root " + std::to_string(root) + " is not in the group");
  const int rootMember = static_cast<int>(r - g.ranks.begin());
  const size_t n = g.ranks.size();
  const std::string what = "reduce on group " + rankList(g.ranks);
  Exchange x{{}, {}, scratchOf(rank), &taken};
  if (me != rootMember) {
    post(x, group, me, rootMember, data, count);
    finish(x, what, rank);
    return;
  }
  std::vector<const float*> parts(n);
  for (size_t j = 0; j < n; j++) {
    if (static_cast<int>(j) == me) {
      parts[j] = data;
      continue;
    }
    float* part = x.buffer(count);
    expect(x, group, static_cast<int>(j), me, part, count);
    parts[j] = part;
  }
  finish(x, what, rank);
  float* sum = x.buffer(count);
  orderedSum(parts, sum, count, ReduceOp::Sum);
  std::copy(sum, sum + count, data);
}

// The plan's tag, widened by the two ranks' places in their processes: two device pairs between the same two
// processes may use the same plan tag (data-parallel replicas of one pipeline edge).
static int wireTag(int tag, int from, int to, int per, int upper, const std::string& where) {
  const long long wide = (static_cast<long long>(tag) * per + from % per) * per + to % per;
  if (tag < 0 || wide > upper) {
    throw CommError(CommError::Kind::Invalid, where + ": tag " + std::to_string(tag) + " does not fit MPI's tag range (MPI_TAG_UB " + std::to_string(upper) + ")");
  }
  return static_cast<int>(wide);
}

void MpiCommunicator::doSend(int rank, int peer, int tag, const float* data, size_t count) {
  if (aborted_) fail(CommError::Kind::Aborted, abortMessage());
  const std::string where = "send at rank " + std::to_string(rank) + " to rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  if (rank < 0 || rank >= worldSize_ || peer < 0 || peer >= worldSize_ || !isLocal(rank)) fail(CommError::Kind::Invalid, where + ": a rank outside the world or this process");
  if (count > static_cast<size_t>(INT_MAX)) fail(CommError::Kind::Invalid, where + ": " + std::to_string(count) + " elements is more than MPI's int counts allow");
  countSent(peer, count);
  if (isLocal(peer)) {
    std::lock_guard<std::mutex> lk(mailMutex_);
    mailboxes_[{-1, rank, peer, tag}].emplace_back(data, data + count);
    return;
  }
  const int wire = wireTag(tag, rank, peer, perProcess_, tagUpperBound_, where);
  // Buffered: a copy in flight, so the caller goes on (to its own receive) before the peer has received.
  std::lock_guard<std::mutex> lk(flightMutex_);
  inFlight_.push_back({MPI_REQUEST_NULL, std::vector<float>(data, data + count)});
  InFlight& f = inFlight_.back();
  MPI_Isend(f.data.data(), static_cast<int>(count), MPI_FLOAT, processOf(peer), wire, p2p_, &f.request);
}

void MpiCommunicator::doRecv(int rank, int peer, int tag, float* data, size_t count) {
  size_t taken = 0;
  if (aborted_) fail(CommError::Kind::Aborted, abortMessage());
  const std::string where = "recv at rank " + std::to_string(rank) + " from rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  if (rank < 0 || rank >= worldSize_ || peer < 0 || peer >= worldSize_ || !isLocal(rank)) fail(CommError::Kind::Invalid, where + ": a rank outside the world or this process");
  Exchange x{{}, {}, scratchOf(rank), &taken};
  if (isLocal(peer)) {
    x.locals.push_back({{-1, peer, rank, tag}, data, count, peer, false});
  } else {
    Exchange::Request r;
    r.peer = peer;
    r.recv = true;
    r.count = count;
    MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, processOf(peer), wireTag(tag, peer, rank, perProcess_, tagUpperBound_, where), p2p_, &r.request);
    x.requests.push_back(r);
  }
  finish(x, where, rank);
}

}  // namespace fsm
