// The one instruction form and the program a description parses into (parse.h): per local device its rank,
// arena size, slots and instructions split over a compute and a communication stream, plus the world, the
// device and communicator kinds and the step's settings. The executor binds it (arena addresses, kernel ids,
// group handles) in place; nothing else restates it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/kernel_call.h"
#include "core/tensor.h"

namespace fsm {

constexpr int kComputeStream = 0;
constexpr int kCommStream = 1;
constexpr int kStreams = 2;

/** A kernel, or one of the communicator's calls (the `comm.*` ops of a description). */
enum class OpKind { Kernel, AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, Send, Recv };

/** A communicator's handle for a registered group (Communicator::registerGroup). */
using GroupHandle = int32_t;

/** A region of a device's arena; slots may overlap (views, reused memory). */
struct Slot {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t offset = 0;
  size_t bytes() const;
  /** The slot as a tensor over an arena starting at `base`. */
  Tensor at(uint8_t* base) const;
};

struct Instruction {
  // --- from the description (core/parse.cc) ---
  std::string op;
  OpKind kind = OpKind::Kernel;
  int stream = kComputeStream;
  std::vector<uint32_t> inputSlots;
  std::vector<uint32_t> outputSlots;
  /** The kernel updates its operands in place: its outputs are not zeroed first (outputsToZero). */
  bool inPlace = false;
  /** A kernel instruction skipped while this f32 scalar slot is nonzero (read once its waits are met, never
   *  written by it); -1: unguarded. */
  int64_t guardSlot = -1;
  // Communication operands, checked when parsed so a step only calls the communicator.
  std::vector<int> group;  // global ranks, strictly ascending, containing the device
  int root = -1;           // broadcast / reduce: a global rank in the group
  int peer = -1;           // send / recv: a global rank
  int tag = 0;
  /** The waits folded per stream: it may start once need[s] instructions of stream s have completed. */
  size_t need[kStreams] = {0, 0};

  // --- bound by the executor once the device has an arena and the communicator the group ---
  /** The completions of the other stream to wait for before starting (0: none beyond those waited for by an
   *  earlier instruction of this stream): need[other] where it is a new maximum along the stream. */
  size_t waitFor = 0;
  /** Kernel id, operand tensors over the arena (comm ops use its inputs/outputs too), attributes, zero flags. */
  KernelCall call;
  Tensor guard;  // data == nullptr: unguarded
  GroupHandle groupHandle = -1;
};

struct DeviceProgram {
  int rank = 0;  // global
  size_t arenaBytes = 0;
  std::optional<size_t> memoryLimitBytes;
  std::vector<Slot> slots;
  std::vector<Instruction> instructions;
  std::vector<size_t> streams[kStreams];  // instruction indices of each stream, in list order
};

/** A device or communicator kind and its options (`device: {kind: "cpu", arena: "mmap"}`), read by the kind
 *  (device/create.cc, comm/create.cc), not by the parser. */
struct Plugin {
  std::string kind;
  Attrs options;
  /** "device" or "communicator": where it came from, for error messages. */
  std::string field;

  /** Refuses (TypeError) any option the kind does not read, so a misspelling is an error rather than ignored. */
  void allowOnly(std::initializer_list<const char*> known) const;
};

struct Program {
  int worldSize = 1;
  std::vector<DeviceProgram> devices;  // this process's devices, ascending rank
  double timeoutSeconds = 60;
  int blasThreads = 1;
  /** CPU devices: this many host threads take turns on the devices (exec/executor.h), else (0) one thread per
   *  stream. The caller knows how many cores the run's processes share: src/runtime/world.ts hostThreadsFor. */
  int hostThreads = 0;
  Plugin device{"cpu", {}, "device"};
  Plugin communicator{"inprocess", {}, "communicator"};
};

}  // namespace fsm
