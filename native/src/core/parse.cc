// parseProgram (parse.h): the world and settings, then per device its arena, slots and instructions, then the
// waits (which need every instruction's stream) and a replay of the streams that rules out cycles.
#include "core/parse.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "core/values.h"

namespace fsm {
namespace {

const std::map<std::string, OpKind>& commOps() {
  static const std::map<std::string, OpKind> ops = {
      {"comm.allReduce", OpKind::AllReduce}, {"comm.reduceScatter", OpKind::ReduceScatter},
      {"comm.allGather", OpKind::AllGather}, {"comm.broadcast", OpKind::Broadcast},
      {"comm.reduce", OpKind::Reduce},       {"comm.send", OpKind::Send},
      {"comm.recv", OpKind::Recv}};
  return ops;
}

// An integer attribute of a communication op (root, peer, tag), in int range.
int intAttr(const Attrs& attrs, const std::string& name, const Where& w) {
  auto it = attrs.numbers.find(name);
  if (it == attrs.numbers.end() || !isInteger(it->second) || std::fabs(it->second) > 2147483647.0) {
    refuse(JsClass::TypeError, w, w.prefix() + ": attrs." + name + " must be an integer");
  }
  return static_cast<int>(it->second);
}

// A slot {shape, dtype, offset}, every field checked: the offset a multiple of the element size and the bytes
// inside the arena.
Slot slotOf(const Napi::Value& v, const std::string& what, size_t arenaBytes, const Where& w) {
  Napi::Object s = objectOf(v, what, w);
  Slot slot;
  slot.shape = shapeOf(s.Get("shape"), what, w);
  slot.dtype = dtypeOf(s.Get("dtype"), what, w);
  slot.offset = sizeOf(s.Get("offset"), what + ": offset", w);
  const size_t bytes = slot.bytes(), align = elementBytes(slot.dtype);
  if (slot.offset % align != 0) {
    refuse(JsClass::RangeError, w, what + ": offset " + std::to_string(slot.offset) + " is not a multiple of " + std::to_string(align) +
                                       " (the size of a " + dtypeName(slot.dtype) + " element)");
  }
  if (slot.offset > arenaBytes || bytes > arenaBytes - slot.offset) {
    refuse(JsClass::RangeError, w, what + " (bytes " + std::to_string(slot.offset) + ".." + std::to_string(slot.offset + bytes) +
                                       ") lies outside the arena of " + std::to_string(arenaBytes) + " bytes");
  }
  return slot;
}

// Checks a communication instruction's operands and reads its group, root, peer and tag. Slot ids are compared
// (not only sizes) for the in-place collectives, since the communicator writes the result over its input.
void checkComm(Instruction& ins, const DeviceProgram& dev, int worldSize, const Where& w) {
  const std::string at = w.prefix();
  auto bad = [&](const std::string& why) { refuse(JsClass::RangeError, w, at + ": " + why); };
  for (const std::vector<uint32_t>* operands : {&ins.inputSlots, &ins.outputSlots}) {
    for (uint32_t id : *operands) {
      if (dev.slots[id].dtype != DType::F32) refuse(JsClass::TypeError, w, at + ": communication ops take f32 slots only");
    }
  }
  const bool p2p = ins.kind == OpKind::Send || ins.kind == OpKind::Recv;
  const size_t wantIn = ins.kind == OpKind::Recv ? 0 : 1, wantOut = ins.kind == OpKind::Send ? 0 : 1;
  if (ins.inputSlots.size() != wantIn || ins.outputSlots.size() != wantOut) {
    bad("takes " + std::to_string(wantIn) + " input(s) and " + std::to_string(wantOut) + " output(s), got " +
        std::to_string(ins.inputSlots.size()) + " and " + std::to_string(ins.outputSlots.size()));
  }
  const Attrs& attrs = ins.call.attrs;
  if (p2p) {
    ins.peer = intAttr(attrs, "peer", w);
    ins.tag = intAttr(attrs, "tag", w);
    if (ins.peer < 0 || ins.peer >= worldSize) {
      bad("peer " + std::to_string(ins.peer) + " is not a device of the " + std::to_string(worldSize));
    }
    return;
  }
  if (!attrs.shapes.count("group")) refuse(JsClass::TypeError, w, at + ": attrs.group must be an array of global ranks");
  for (int64_t r : attrs.shapes.at("group")) ins.group.push_back(r > INT_MAX ? INT_MAX : static_cast<int>(r));
  const std::vector<int>& g = ins.group;
  for (size_t k = 0; k < g.size(); k++) {
    if (g[k] >= worldSize || (k > 0 && g[k] <= g[k - 1])) {
      bad("the group must be strictly ascending ranks in [0, " + std::to_string(worldSize) + ")");
    }
  }
  if (!std::binary_search(g.begin(), g.end(), dev.rank)) bad("the group does not contain the device");
  const int64_t inN = dev.slots[ins.inputSlots[0]].bytes() / 4, outN = dev.slots[ins.outputSlots[0]].bytes() / 4;
  const int64_t n = static_cast<int64_t>(g.size());
  switch (ins.kind) {
    case OpKind::AllReduce:
    case OpKind::Broadcast:
    case OpKind::Reduce:
      if (ins.inputSlots[0] != ins.outputSlots[0]) bad("works in place: the input and the output must be the same slot");
      if (ins.kind != OpKind::AllReduce) {
        ins.root = intAttr(attrs, "root", w);
        if (!std::binary_search(g.begin(), g.end(), ins.root)) bad("root " + std::to_string(ins.root) + " is not in the group");
      }
      break;
    case OpKind::ReduceScatter:
      if (inN != n * outN) {
        bad("the input has " + std::to_string(inN) + " elements, not group size " + std::to_string(n) + " x the output's " +
            std::to_string(outN));
      }
      break;
    case OpKind::AllGather:
      if (outN != n * inN) {
        bad("the output has " + std::to_string(outN) + " elements, not group size " + std::to_string(n) + " x the input's " +
            std::to_string(inN));
      }
      break;
    default:
      break;
  }
}

// A guard: an f32 scalar slot of the device, read (never written) by the kernel instruction it guards.
void checkGuard(Instruction& ins, const Napi::Value& guard, const DeviceProgram& dev, const Where& w) {
  const std::string at = w.prefix();
  const size_t g = sizeOf(guard, at + ": guard", w);
  if (g >= dev.slots.size()) refuse(JsClass::RangeError, w, at + ": guard slot " + std::to_string(g) + " does not exist");
  const Slot& gs = dev.slots[g];
  const int64_t numel = static_cast<int64_t>(gs.bytes() / elementBytes(gs.dtype));
  if (gs.dtype != DType::F32 || numel != 1) {
    refuse(JsClass::TypeError, w, at + ": guard slot " + std::to_string(g) + " must be an f32 scalar (one element), not " +
                                      dtypeName(gs.dtype) + " with " + std::to_string(numel) + " elements");
  }
  // A collective or a send/recv skipped on one device would leave its peers waiting: guards gate kernels.
  if (ins.kind != OpKind::Kernel) refuse(JsClass::TypeError, w, at + ": only kernel instructions can have a guard");
  // Read, never written, by the instruction it guards: no output may share its bytes (slots can be views).
  for (size_t k = 0; k < ins.outputSlots.size(); k++) {
    const Slot& o = dev.slots[ins.outputSlots[k]];
    if (o.offset < gs.offset + gs.bytes() && gs.offset < o.offset + o.bytes()) {
      refuse(JsClass::RangeError, w, at + ": guard slot " + std::to_string(g) + " shares bytes with output " + std::to_string(k) +
                                         " (slot " + std::to_string(ins.outputSlots[k]) + "): the guard is only read");
    }
  }
  ins.guardSlot = static_cast<int64_t>(g);
}

Instruction instructionOf(const Napi::Value& v, const DeviceProgram& dev, int worldSize, Where w) {
  const std::string head = w.prefix();  // "device D instruction I": the op is not known yet
  Napi::Object o = objectOf(v, head, w);
  Instruction ins;
  const Napi::Value op = o.Get("op");
  if (!op.IsString()) refuse(JsClass::TypeError, w, head + ": op must be a string");
  ins.op = op.As<Napi::String>().Utf8Value();
  w.op = ins.op;
  const std::string at = w.prefix();
  const Napi::Value stream = o.Get("stream");
  if (!stream.IsNumber() || (stream.As<Napi::Number>().DoubleValue() != 0 && stream.As<Napi::Number>().DoubleValue() != 1)) {
    refuse(JsClass::TypeError, w, at + ": stream must be 0 (compute) or 1 (communication)");
  }
  ins.stream = static_cast<int>(stream.As<Napi::Number>().DoubleValue());
  for (const char* key : {"inputs", "outputs"}) {
    std::vector<uint32_t>& ids = key[0] == 'i' ? ins.inputSlots : ins.outputSlots;
    Napi::Array a = arrayOf(o.Get(key), at + ": " + key, w);
    for (uint32_t j = 0; j < a.Length(); j++) {
      const size_t id = sizeOf(a.Get(j), at + ": " + key + "[" + std::to_string(j) + "]", w);
      if (id >= dev.slots.size()) refuse(JsClass::RangeError, w, at + " uses unknown slot " + std::to_string(id));
      ids.push_back(static_cast<uint32_t>(id));
    }
  }
  ins.call.attrs = attrsOf(o.Get("attrs"), at, w);
  auto comm = commOps().find(ins.op);
  if (comm != commOps().end()) {
    ins.kind = comm->second;
    checkComm(ins, dev, worldSize, w);
  } else {
    // In place: the kernel updates its operands (an optimizer update written over the parameter and its
    // state, a gradient scaled), so its outputs must not be zeroed first. Whether the device kind has the
    // kernel is the device's to say (Executor: Device::resolve).
    ins.inPlace = o.Get("inPlace").ToBoolean().Value();
  }
  const Napi::Value guard = o.Get("guard");
  if (!guard.IsUndefined()) checkGuard(ins, guard, dev, w);
  return ins;
}

// Waits fold into need[]: within a stream, order already implies completion, so only earlier instructions may
// be named there (a later one would deadlock the stream on itself).
void foldWaits(DeviceProgram& dev, const Napi::Array& list, const Where& wd) {
  std::vector<size_t> position(dev.instructions.size());  // index within its stream
  for (int s = 0; s < kStreams; s++) {
    for (size_t k = 0; k < dev.streams[s].size(); k++) position[dev.streams[s][k]] = k;
  }
  for (uint32_t i = 0; i < list.Length(); i++) {
    Instruction& ins = dev.instructions[i];
    Where w = wd;
    w.instruction = i;
    w.op = ins.op;
    const std::string at = w.prefix();
    Napi::Array waits = arrayOf(list.Get(i).As<Napi::Object>().Get("waits"), at + ": waits", w);
    for (uint32_t k = 0; k < waits.Length(); k++) {
      const size_t on = sizeOf(waits.Get(k), at + ": waits[" + std::to_string(k) + "]", w);
      if (on >= list.Length()) refuse(JsClass::RangeError, w, at + " waits on instruction " + std::to_string(on) + ", which does not exist");
      if (on == i) refuse(JsClass::RangeError, w, at + " waits on itself");
      const int s = dev.instructions[on].stream;
      if (s == ins.stream && on > i) {
        refuse(JsClass::RangeError, w, at + " waits on instruction " + std::to_string(on) + ", which comes later on the same stream");
      }
      ins.need[s] = std::max(ins.need[s], position[on] + 1);
    }
  }
}

// Replays the streams as the executor would (each stream in order, an instruction once its waits on the other
// stream are met): if both stall before the end, the waits form a cycle and the step would never finish.
void checkAcyclic(const DeviceProgram& dev, const Where& wd) {
  size_t next[kStreams] = {0, 0};
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < kStreams; s++) {
      while (next[s] < dev.streams[s].size()) {
        const Instruction& ins = dev.instructions[dev.streams[s][next[s]]];
        if (next[1 - s] < ins.need[1 - s]) break;
        next[s]++;
        moved = true;
      }
    }
  }
  for (int s = 0; s < kStreams; s++) {
    if (next[s] < dev.streams[s].size()) {
      Where w = wd;
      w.instruction = static_cast<int64_t>(dev.streams[s][next[s]]);
      w.op = dev.instructions[dev.streams[s][next[s]]].op;
      refuse(JsClass::RangeError, w, w.prefix() + ": its waits form a cycle with the other stream, so it could never start");
    }
  }
}

DeviceProgram deviceOf(const Napi::Value& v, int worldSize, int rank, std::optional<size_t> limit, const Where& wd) {
  const std::string dn = wd.prefix();
  Napi::Object dv = objectOf(v, dn, wd);
  DeviceProgram dev;
  dev.rank = rank;
  dev.memoryLimitBytes = limit;
  dev.arenaBytes = sizeOf(dv.Get("arenaBytes"), dn + ": arenaBytes", wd);
  Napi::Array slots = arrayOf(dv.Get("slots"), dn + ": slots", wd);
  for (uint32_t i = 0; i < slots.Length(); i++) {
    dev.slots.push_back(slotOf(slots.Get(i), dn + " slot " + std::to_string(i), dev.arenaBytes, wd));
  }
  // First each instruction's own fields; waits need every instruction's stream, so they come second.
  Napi::Array list = arrayOf(dv.Get("instructions"), dn + ": instructions", wd);
  for (uint32_t i = 0; i < list.Length(); i++) {
    Where w = wd;
    w.instruction = i;
    Instruction ins = instructionOf(list.Get(i), dev, worldSize, w);
    dev.streams[ins.stream].push_back(i);
    dev.instructions.push_back(std::move(ins));
  }
  foldWaits(dev, list, wd);
  checkAcyclic(dev, wd);
  return dev;
}

// `device` / `communicator`: {kind, ...options} or undefined (the default kind); the kind reads its options.
Plugin pluginOf(const Napi::Value& v, const char* field, const char* defaultKind) {
  Plugin p{defaultKind, {}, field};
  if (v.IsUndefined()) return p;
  Napi::Object o = objectOf(v, field);
  if (!o.Get("kind").IsString()) refuse(JsClass::TypeError, {}, std::string(field) + ".kind must be a string");
  p.kind = o.Get("kind").As<Napi::String>().Utf8Value();
  p.options = attrsOf(o, field);
  p.options.strings.erase("kind");
  return p;
}

}  // namespace

Program parseProgram(const Napi::Object& desc) {
  Program program;
  if (!desc.Get("timeoutSeconds").IsUndefined()) {
    const Napi::Value t = desc.Get("timeoutSeconds");
    // Bounded so the communicator's deadline (now + timeout in clock ticks) cannot overflow.
    if (!t.IsNumber() || !(t.As<Napi::Number>().DoubleValue() > 0) || !(t.As<Napi::Number>().DoubleValue() <= 1e6)) {
      refuse(JsClass::TypeError, {}, "timeoutSeconds must be a number of seconds in (0, 1e6]");
    }
    program.timeoutSeconds = t.As<Napi::Number>().DoubleValue();
  }
  if (!desc.Get("blasThreads").IsUndefined()) {
    const size_t b = sizeOf(desc.Get("blasThreads"), "blasThreads");
    if (b < 1 || b > 1024) refuse(JsClass::RangeError, {}, "blasThreads must be between 1 and 1024");
    program.blasThreads = static_cast<int>(b);
  }
  if (!desc.Get("hostThreads").IsUndefined()) {
    const size_t t = sizeOf(desc.Get("hostThreads"), "hostThreads");
    if (t > 1024) refuse(JsClass::RangeError, {}, "hostThreads must be between 0 and 1024");
    program.hostThreads = static_cast<int>(t);
  }
  Napi::Array devices = arrayOf(desc.Get("devices"), "devices");
  const size_t n = devices.Length();
  if (n < 1) refuse(JsClass::RangeError, {}, "a cluster needs at least one device");

  // The world: this process runs `devices`, ranks ranks[d] of worldSize (by default the whole world, 0..n-1).
  size_t world = n;
  if (!desc.Get("worldSize").IsUndefined()) {
    world = sizeOf(desc.Get("worldSize"), "worldSize");
    if (world > INT_MAX) refuse(JsClass::RangeError, {}, "worldSize must be below 2^31");
    if (world < n) {
      refuse(JsClass::RangeError, {}, "worldSize " + std::to_string(world) + " is smaller than this process's " + std::to_string(n) + " devices");
    }
  }
  program.worldSize = static_cast<int>(world);
  std::vector<int> ranks;
  if (desc.Get("ranks").IsUndefined()) {
    for (size_t d = 0; d < n; d++) ranks.push_back(static_cast<int>(d));
  } else {
    Napi::Array a = arrayOf(desc.Get("ranks"), "ranks");
    if (a.Length() != n) refuse(JsClass::RangeError, {}, "ranks has " + std::to_string(a.Length()) + " entries for " + std::to_string(n) + " devices");
    for (uint32_t d = 0; d < n; d++) {
      const size_t r = sizeOf(a.Get(d), "ranks[" + std::to_string(d) + "]");
      if (r >= world || (d > 0 && static_cast<int>(r) <= ranks.back())) {
        refuse(JsClass::RangeError, {}, "ranks must be strictly ascending global ranks in [0, " + std::to_string(world) + "): ranks[" +
                                            std::to_string(d) + "] is " + std::to_string(r));
      }
      ranks.push_back(static_cast<int>(r));
    }
  }
  program.device = pluginOf(desc.Get("device"), "device", "cpu");
  program.communicator = pluginOf(desc.Get("communicator"), "communicator", "inprocess");

  // Each device's memory: an arena larger than its device's is refused before it is allocated (Device::allocate).
  std::vector<size_t> limits;
  if (!desc.Get("memoryLimitBytes").IsUndefined()) {
    Napi::Array a = arrayOf(desc.Get("memoryLimitBytes"), "memoryLimitBytes");
    if (a.Length() != n) {
      refuse(JsClass::RangeError, {}, "memoryLimitBytes has " + std::to_string(a.Length()) + " entries for " + std::to_string(n) + " devices");
    }
    for (uint32_t d = 0; d < n; d++) limits.push_back(sizeOf(a.Get(d), "memoryLimitBytes[" + std::to_string(d) + "]"));
  }
  for (size_t d = 0; d < n; d++) {
    Where wd;
    wd.device = ranks[d];
    wd.localDevice = static_cast<int>(d);
    std::optional<size_t> limit;
    if (!limits.empty()) limit = limits[d];
    program.devices.push_back(deviceOf(devices.Get(static_cast<uint32_t>(d)), program.worldSize, ranks[d], limit, wd));
  }
  return program;
}

}  // namespace fsm
