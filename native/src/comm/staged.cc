// StagedCommunicator (staged.h): every call as copy-out, the inner call on host buffers, copy-in.
#include "comm/staged.h"

#include "core/program.h"

namespace fsm {

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner, std::map<int, Device*> devices) : inner_(std::move(inner)) {
  for (const auto& [rank, device] : devices) staging_[rank].device = device;
}

GroupHandle StagedCommunicator::registerGroup(const std::vector<int>& ranks) {
  const GroupHandle h = inner_->registerGroup(ranks);
  groupSizes_[h] = ranks.size();
  return h;
}

size_t StagedCommunicator::groupSizeOf(GroupHandle group) const {
  auto it = groupSizes_.find(group);
  if (it == groupSizes_.end()) throw CommError(CommError::Kind::Invalid, "unknown group handle " + std::to_string(group) + " (register groups before calling)");
  return it->second;
}

StagedCommunicator::Staging& StagedCommunicator::staging(int rank) {
  auto it = staging_.find(rank);
  if (it == staging_.end()) throw CommError(CommError::Kind::Invalid, "staged communicator: rank " + std::to_string(rank) + " is not a device of this process");
  return it->second;
}

float* StagedCommunicator::room(std::vector<float>& buffer, size_t count) {
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

float* StagedCommunicator::out(Staging& s, std::vector<float>& buffer, const float* data, size_t count) {
  float* h = room(buffer, count);
  if (count > 0) s.device->copyOut(kCommStream, h, data, count * sizeof(float));
  return h;
}

void StagedCommunicator::in(Staging& s, float* data, const float* host, size_t count) {
  if (count > 0) s.device->copyIn(kCommStream, data, host, count * sizeof(float));
}

void StagedCommunicator::doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) {
  Staging& s = staging(rank);
  float* h = out(s, s.in, data, count);
  inner_->allReduce(rank, group, h, count, op);
  in(s, data, h, count);
}

void StagedCommunicator::doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) {
  Staging& s = staging(rank);
  // The input holds a chunk per member: its size is the output's times the group's.
  const size_t total = countPerRank * groupSizeOf(group);
  const float* h = out(s, s.in, input, total);
  inner_->reduceScatter(rank, group, h, room(s.out, countPerRank), countPerRank, op);
  in(s, output, s.out.data(), countPerRank);
}

void StagedCommunicator::doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) {
  Staging& s = staging(rank);
  const float* h = out(s, s.in, input, countPerRank);
  const size_t total = countPerRank * groupSizeOf(group);
  inner_->allGather(rank, group, h, room(s.out, total), countPerRank);
  in(s, output, s.out.data(), total);
}

void StagedCommunicator::doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) {
  Staging& s = staging(rank);
  float* h = rank == root ? out(s, s.in, data, count) : room(s.in, count);
  inner_->broadcast(rank, group, root, h, count);
  if (rank != root) in(s, data, h, count);
}

void StagedCommunicator::doReduce(int rank, GroupHandle group, int root, float* data, size_t count) {
  Staging& s = staging(rank);
  float* h = out(s, s.in, data, count);
  inner_->reduce(rank, group, root, h, count);
  if (rank == root) in(s, data, h, count);
}

void StagedCommunicator::doSend(int rank, int peer, int tag, const float* data, size_t count) {
  Staging& s = staging(rank);
  inner_->send(rank, peer, tag, out(s, s.in, data, count), count);
}

void StagedCommunicator::doRecv(int rank, int peer, int tag, float* data, size_t count) {
  Staging& s = staging(rank);
  inner_->recv(rank, peer, tag, room(s.out, count), count);
  in(s, data, s.out.data(), count);
}

}  // namespace fsm
