// NcclCommunicator (nccl_communicator.h): group setup, the collectives, abort.
#include "comm/nccl/nccl_communicator.h"

#include <cstring>
#include <set>

#include "core/program.h"
#ifdef FSM_HAVE_MPI
#include "comm/mpi/mpi_world.h"
#endif

namespace fsm {
namespace nccl {
namespace {

// Host exchanges carry int32 words: groups as [n, ranks...] after their count, ids as [union index, 32 words].
std::vector<uint8_t> bytesOf(const std::vector<int32_t>& words) {
  std::vector<uint8_t> b(words.size() * 4);
  std::memcpy(b.data(), words.data(), b.size());
  return b;
}

std::vector<int32_t> wordsOf(const std::vector<uint8_t>& b) {
  std::vector<int32_t> w(b.size() / 4);
  std::memcpy(w.data(), b.data(), w.size() * 4);
  return w;
}

/** Every process's words, in process order (this process's alone without MPI). */
std::vector<std::vector<int32_t>> hostAllGather(const std::vector<int32_t>& mine, int processes, double timeoutSeconds) {
  if (processes == 1) return {mine};
#ifdef FSM_HAVE_MPI
  std::vector<std::vector<int32_t>> out;
  for (const std::vector<uint8_t>& b : mpi::allGather(bytesOf(mine), timeoutSeconds)) out.push_back(wordsOf(b));
  return out;
#else
  (void)timeoutSeconds;
  throw CommError(CommError::Kind::Invalid, "the nccl communicator between processes needs MPI to share its unique ids (this fsm was built without MPI)");
#endif
}

}  // namespace

NcclCommunicator::NcclCommunicator(int worldSize, std::map<int, Device*> devices, std::unique_ptr<Communicator> host, int processes, int process,
                                   double timeoutSeconds)
    : api_(ncclApi()),
      worldSize_(worldSize),
      devices_(std::move(devices)),
      host_(std::move(host)),
      processes_(processes),
      process_(process),
      timeoutSeconds_(timeoutSeconds) {
  for (const auto& [rank, d] : devices_) {
    if (d->nativeStream(kCommStream) == nullptr) throw CommError(CommError::Kind::Invalid, "the nccl communicator needs CUDA devices (rank " + std::to_string(rank) + "'s is not)");
  }
}

// (An aborted communicator's were aborted and dropped already.)
NcclCommunicator::~NcclCommunicator() {
  for (Group& g : groups_)
    for (auto& [rank, c] : g.comms) {
      devices_.at(rank)->bindThread();
      api_.commDestroy(c);
    }
}

GroupHandle NcclCommunicator::registerGroup(const std::vector<int>& ranks) {
  auto it = handles_.find(ranks);
  if (it != handles_.end()) return it->second;
  checkGroup(ranks, worldSize_);
  const GroupHandle h = static_cast<GroupHandle>(groups_.size());
  groups_.push_back({ranks, {}});
  handles_.emplace(ranks, h);
  return h;
}

std::vector<std::pair<std::vector<int>, ncclUniqueId>> NcclCommunicator::agreeOnGroups() const {
  // 1. The union of every process's groups, in one order everywhere.
  std::vector<int32_t> mine{static_cast<int32_t>(groups_.size())};
  for (const Group& g : groups_) {
    mine.push_back(static_cast<int32_t>(g.ranks.size()));
    mine.insert(mine.end(), g.ranks.begin(), g.ranks.end());
  }
  std::set<std::vector<int>> all;
  for (const std::vector<int32_t>& w : hostAllGather(mine, processes_, timeoutSeconds_)) {
    size_t at = 1;
    for (int32_t k = 0; k < w.at(0); k++) {
      const size_t n = static_cast<size_t>(w.at(at++));
      all.insert(std::vector<int>(w.begin() + static_cast<long>(at), w.begin() + static_cast<long>(at + n)));
      at += n;
    }
  }
  std::vector<std::pair<std::vector<int>, ncclUniqueId>> out;
  for (const std::vector<int>& g : all) out.push_back({g, ncclUniqueId{}});
  // 2. Each group's id, made by the process holding its lowest rank.
  const int perProcess = worldSize_ / processes_;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < out.size(); i++) {
    if (out[i].first.front() / perProcess != process_) continue;
    ncclUniqueId id;
    const ncclResult_t r = api_.getUniqueId(&id);
    if (r != kNcclSuccess) throw CommError(CommError::Kind::Invalid, std::string("ncclGetUniqueId: ") + api_.errorString(r));
    ids.push_back(static_cast<int32_t>(i));
    const size_t words = sizeof id / 4;
    const size_t at = ids.size();
    ids.resize(at + words);
    std::memcpy(ids.data() + at, &id, sizeof id);
  }
  for (const std::vector<int32_t>& w : hostAllGather(ids, processes_, timeoutSeconds_)) {
    for (size_t at = 0; at + 1 + sizeof(ncclUniqueId) / 4 <= w.size(); at += 1 + sizeof(ncclUniqueId) / 4) {
      std::memcpy(&out.at(static_cast<size_t>(w[at])).second, w.data() + at + 1, sizeof(ncclUniqueId));
    }
  }
  return out;
}

void NcclCommunicator::ready() {
  for (const auto& [ranks, id] : agreeOnGroups()) {
    auto h = handles_.find(ranks);
    if (h == handles_.end()) continue;  // no member here
    Group& g = groups_[static_cast<size_t>(h->second)];
    // Several members in this process (GPUs of one machine) join together.
    check(api_.groupStart(), "ncclGroupStart");
    for (int r : g.ranks) {
      auto d = devices_.find(r);
      if (d == devices_.end()) continue;
      d->second->bindThread();
      ncclComm_t c = nullptr;
      check(api_.commInitRank(&c, static_cast<int>(g.ranks.size()), id, memberIndex(g, r)), "ncclCommInitRank");
      g.comms[r] = c;
    }
    check(api_.groupEnd(), "ncclGroupEnd");
  }
}

int NcclCommunicator::memberIndex(const Group& g, int rank) const {
  for (size_t i = 0; i < g.ranks.size(); i++)
    if (g.ranks[i] == rank) return static_cast<int>(i);
  throw CommError(CommError::Kind::Invalid, "rank " + std::to_string(rank) + " is not in group " + rankList(g.ranks));
}

void NcclCommunicator::check(ncclResult_t r, const char* what) {
  if (r == kNcclSuccess) return;
  const std::string message = std::string(what) + ": " + api_.errorString(r);
  abort(message);
  throw CommError(CommError::Kind::Invalid, message);
}

ncclComm_t NcclCommunicator::commFor(int rank, GroupHandle group, cudaStream_t& stream) {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    if (aborted_) throw CommError(CommError::Kind::Aborted, abortMessage_);
  }
  if (group < 0 || static_cast<size_t>(group) >= groups_.size()) throw CommError(CommError::Kind::Invalid, "unknown group handle " + std::to_string(group));
  Group& g = groups_[static_cast<size_t>(group)];
  auto c = g.comms.find(rank);
  if (c == g.comms.end()) throw CommError(CommError::Kind::Invalid, "rank " + std::to_string(rank) + " has no NCCL communicator for group " + rankList(g.ranks));
  Device* d = devices_.at(rank);
  d->bindThread();
  stream = static_cast<cudaStream_t>(d->nativeStream(kCommStream));
  return c->second;
}

void NcclCommunicator::doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) {
  cudaStream_t s;
  ncclComm_t c = commFor(rank, group, s);
  check(api_.allReduce(data, data, count, kNcclFloat32, op == ReduceOp::Avg ? kNcclAvg : kNcclSum, c, s), "ncclAllReduce");
}

void NcclCommunicator::doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) {
  cudaStream_t s;
  ncclComm_t c = commFor(rank, group, s);
  check(api_.reduceScatter(input, output, countPerRank, kNcclFloat32, op == ReduceOp::Avg ? kNcclAvg : kNcclSum, c, s), "ncclReduceScatter");
}

void NcclCommunicator::doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) {
  cudaStream_t s;
  ncclComm_t c = commFor(rank, group, s);
  check(api_.allGather(input, output, countPerRank, kNcclFloat32, c, s), "ncclAllGather");
}

void NcclCommunicator::doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) {
  cudaStream_t s;
  ncclComm_t c = commFor(rank, group, s);
  check(api_.broadcast(data, data, count, kNcclFloat32, memberIndex(groups_[static_cast<size_t>(group)], root), c, s), "ncclBroadcast");
}

void NcclCommunicator::doReduce(int rank, GroupHandle group, int root, float* data, size_t count) {
  cudaStream_t s;
  ncclComm_t c = commFor(rank, group, s);
  check(api_.reduce(data, data, count, kNcclFloat32, kNcclSum, memberIndex(groups_[static_cast<size_t>(group)], root), c, s), "ncclReduce");
}

void NcclCommunicator::abort(const std::string& message) {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    if (aborted_) return;
    aborted_ = true;
    abortMessage_ = message;
  }
  // Kernels of this process's communicators waiting on a peer stop; a later call throws Aborted.
  for (Group& g : groups_)
    for (auto& [rank, c] : g.comms) {
      devices_.at(rank)->bindThread();
      api_.commAbort(c);
    }
  for (Group& g : groups_) g.comms.clear();
  host_->abort(message);
}

bool NcclCommunicator::aborted() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return aborted_;
}

std::string NcclCommunicator::abortMessage() const {
  std::lock_guard<std::mutex> lk(mutex_);
  return abortMessage_;
}

void NcclCommunicator::reset() {}

}  // namespace nccl
}  // namespace fsm
