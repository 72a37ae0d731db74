// Communicator (communicator.h): every call is counted here, then handed to the implementation.
#include "comm/communicator.h"

namespace fsm {

const char* commCallName(CommCall call) {
  switch (call) {
    case CommCall::AllReduce: return "allReduce";
    case CommCall::ReduceScatter: return "reduceScatter";
    case CommCall::AllGather: return "allGather";
    case CommCall::Broadcast: return "broadcast";
    case CommCall::Reduce: return "reduce";
    case CommCall::Send: return "send";
    case CommCall::Recv: return "recv";
  }
  return "?";
}

void Communicator::allReduce(int rank, GroupHandle group, float* data, size_t n, ReduceOp op) {
  count(CommCall::AllReduce);
  doAllReduce(rank, group, data, n, op);
}

void Communicator::reduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) {
  count(CommCall::ReduceScatter);
  doReduceScatter(rank, group, input, output, countPerRank, op);
}

void Communicator::allGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) {
  count(CommCall::AllGather);
  doAllGather(rank, group, input, output, countPerRank);
}

void Communicator::broadcast(int rank, GroupHandle group, int root, float* data, size_t n) {
  count(CommCall::Broadcast);
  doBroadcast(rank, group, root, data, n);
}

void Communicator::reduce(int rank, GroupHandle group, int root, float* data, size_t n) {
  count(CommCall::Reduce);
  doReduce(rank, group, root, data, n);
}

void Communicator::send(int rank, int peer, int tag, const float* data, size_t n) {
  count(CommCall::Send);
  doSend(rank, peer, tag, data, n);
}

void Communicator::recv(int rank, int peer, int tag, float* data, size_t n) {
  count(CommCall::Recv);
  doRecv(rank, peer, tag, data, n);
}

void Communicator::defer(bool on) {
  if (on) throw std::logic_error(std::string("the ") + kind() + " communicator cannot defer collectives");
}

// A kind that cannot defer never has a collective pending, so nothing can expire.
void Communicator::expire(int rank) {
  throw std::logic_error(std::string("the ") + kind() + " communicator has no deferred collective of rank " + std::to_string(rank) + " to expire");
}

std::string rankList(const std::vector<int>& ranks) {
  std::string list = "[";
  for (size_t i = 0; i < ranks.size(); i++) list += (i ? ", " : "") + std::to_string(ranks[i]);
  return list + "]";
}

void Communicator::checkGroup(const std::vector<int>& ranks, int worldSize) {
  const std::string where = "group " + rankList(ranks);
  if (ranks.empty()) throw CommError(CommError::Kind::Invalid, where + ": the group is empty");
  for (size_t i = 0; i < ranks.size(); i++) {
    if (ranks[i] < 0 || ranks[i] >= worldSize || (i > 0 && ranks[i] <= ranks[i - 1])) {
      throw CommError(CommError::Kind::Invalid, where + ": a group must be strictly ascending global ranks in [0, " + std::to_string(worldSize) + ")");
    }
  }
}

std::array<uint64_t, kCommCalls> Communicator::calls() const {
  std::array<uint64_t, kCommCalls> out{};
  for (size_t k = 0; k < kCommCalls; k++) out[k] = calls_[k].load(std::memory_order_relaxed);
  return out;
}

}  // namespace fsm
