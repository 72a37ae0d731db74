// DelayCommunicator (delay.h): splitmix64 over (seed, rank, draw) picks each sleep; every call is forwarded.
#include "comm/testing/delay.h"

#include <chrono>
#include <thread>

namespace fsm {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

DelayCommunicator::DelayCommunicator(std::unique_ptr<Communicator> inner, uint64_t seed, double maxMicros)
    : inner_(std::move(inner)), seed_(seed), maxMicros_(static_cast<uint64_t>(maxMicros)), draws_(static_cast<size_t>(inner_->worldSize())) {}

void DelayCommunicator::pause(int rank) {
  if (maxMicros_ == 0 || rank < 0 || static_cast<size_t>(rank) >= draws_.size()) return;
  const uint64_t draw = draws_[static_cast<size_t>(rank)].fetch_add(1, std::memory_order_relaxed);
  const uint64_t h = splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(rank) * 0x100000001b3ull ^ splitmix64(draw)));
  std::this_thread::sleep_for(std::chrono::microseconds(h % (maxMicros_ + 1)));
}

void DelayCommunicator::doAllReduce(int rank, GroupHandle group, float* data, size_t count, ReduceOp op) {
  delayed(rank, [&] { inner_->allReduce(rank, group, data, count, op); });
}

void DelayCommunicator::doReduceScatter(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank, ReduceOp op) {
  delayed(rank, [&] { inner_->reduceScatter(rank, group, input, output, countPerRank, op); });
}

void DelayCommunicator::doAllGather(int rank, GroupHandle group, const float* input, float* output, size_t countPerRank) {
  delayed(rank, [&] { inner_->allGather(rank, group, input, output, countPerRank); });
}

void DelayCommunicator::doBroadcast(int rank, GroupHandle group, int root, float* data, size_t count) {
  delayed(rank, [&] { inner_->broadcast(rank, group, root, data, count); });
}

void DelayCommunicator::doReduce(int rank, GroupHandle group, int root, float* data, size_t count) {
  delayed(rank, [&] { inner_->reduce(rank, group, root, data, count); });
}

void DelayCommunicator::doSend(int rank, int peer, int tag, const float* data, size_t count) {
  delayed(rank, [&] { inner_->send(rank, peer, tag, data, count); });
}

void DelayCommunicator::doRecv(int rank, int peer, int tag, float* data, size_t count) {
  delayed(rank, [&] { inner_->recv(rank, peer, tag, data, count); });
}

}  // namespace fsm
