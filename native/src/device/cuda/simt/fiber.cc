// The SIMT emulator (fiber.h): blocks run one after another on the calling host thread; inside a block every
// thread is a fiber with its own guarded stack, and a scheduler resumes them round-robin. A fiber gives up the
// host thread only at a barrier, so code between barriers runs as one uninterrupted piece, and a pass in which
// no fiber can move means a barrier that some thread never reaches. Switching is a few instructions on x86-64
// (callee-saved registers and the stack pointer: fibers of one host thread share its signal mask and floating
// point state, which ucontext would save and restore with a system call each switch); ucontext elsewhere.
#include "device/cuda/simt/fiber.h"

#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <sstream>
#include <vector>

namespace fsm {
namespace simt {
namespace {

constexpr size_t kStackBytes = 128 * 1024;
constexpr size_t kGuardBytes = 4096;  // below each stack, unmapped: an overflow faults instead of corrupting
constexpr unsigned kMaxThreads = 1024;
constexpr unsigned kWarp = 32;
constexpr size_t kSlotBytes = 16;

enum class State { Running, AtBlockBarrier, AtWarpBarrier, Done };

#if defined(__x86_64__)
// A context is the saved stack pointer; the callee-saved registers sit on the stack it points to.
struct Context {
  void* sp = nullptr;
};
extern "C" void fsm_simt_switch(void** save, void* resume);
// Saves rbp, rbx, r12-r15 on the current stack, stores its pointer in *save (rdi), continues on resume (rsi).
asm(R"(
  .text
  .p2align 4
  .type fsm_simt_switch, @function
fsm_simt_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size fsm_simt_switch, .-fsm_simt_switch
)");
void switchTo(Context& from, Context& to) { fsm_simt_switch(&from.sp, to.sp); }
#else
using Context = ucontext_t;
void switchTo(Context& from, Context& to) { swapcontext(&from, &to); }
#endif

struct Fiber {
  Context context;
  State state = State::Running;
  uint64_t waitGeneration = 0;
  uint64_t exchanges = 0;  // warp exchanges this thread made (picks the exchange buffer's half)
  ThreadView view{};
};

struct Warp {
  unsigned arrived = 0;  // lanes at the current warp barrier
  uint64_t generation = 0;
  unsigned char slots[2][kWarp][kSlotBytes];
};

/** One host thread's emulator state: its stacks and fibers (kept between grids), and the block running now. */
struct Host {
  std::vector<void*> stacks;  // each kGuardBytes + kStackBytes, guard first
  std::vector<Fiber> fibers = std::vector<Fiber>(kMaxThreads);
  Warp warps[kMaxThreads / kWarp];
  Context scheduler;
  unsigned threads = 0;
  unsigned blockArrived = 0;
  uint64_t blockGeneration = 0;
  Fiber* current = nullptr;
  const std::function<void()>* body = nullptr;
  std::string error;  // the first thread's failure in this block
  std::vector<unsigned char> shared;
  bool running = false;

  ~Host() {
    for (void* s : stacks) munmap(s, kGuardBytes + kStackBytes);
  }

  void* stack(size_t i) {
    while (stacks.size() <= i) {
      void* p = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw SimtError("simt: cannot map a thread stack");
      mprotect(p, kGuardBytes, PROT_NONE);
      stacks.push_back(p);
    }
    return static_cast<unsigned char*>(stacks[i]) + kGuardBytes;
  }
};

thread_local Host* tlsHost = nullptr;

Host& host() {
  thread_local Host h;
  return h;
}

Host& inGrid(const char* what) {
  Host* h = tlsHost;
  if (h == nullptr || h->current == nullptr) throw SimtError(std::string("simt: ") + what + " called outside a kernel");
  return *h;
}

void yieldToScheduler(Host& h) { switchTo(h.current->context, h.scheduler); }

void fiberMain() {
  Host& h = *tlsHost;
  try {
    (*h.body)();
  } catch (const std::exception& e) {
    if (h.error.empty()) h.error = e.what();
  } catch (...) {
    if (h.error.empty()) h.error = "unknown exception in a kernel thread";
  }
  h.current->state = State::Done;
#if defined(__x86_64__)
  // Nothing to return to: back to the scheduler, never to be resumed.
  switchTo(h.current->context, h.scheduler);
  __builtin_unreachable();
#endif
  // (ucontext: uc_link returns to the scheduler.)
}

std::string where(const ThreadView& v) {
  std::ostringstream s;
  s << "block (" << v.blockIdx.x << "," << v.blockIdx.y << "," << v.blockIdx.z << ") thread (" << v.threadIdx.x << "," << v.threadIdx.y << ","
    << v.threadIdx.z << ")";
  return s.str();
}

// No fiber could move: describe who waits where.
std::string deadlock(const Host& h) {
  unsigned atBlock = 0, atWarp = 0, done = 0;
  const Fiber* example = nullptr;
  for (unsigned t = 0; t < h.threads; t++) {
    const Fiber& f = h.fibers[t];
    if (f.state == State::AtBlockBarrier) atBlock++;
    else if (f.state == State::AtWarpBarrier) {
      atWarp++;
      if (!example) example = &f;
    } else if (f.state == State::Done) done++;
  }
  std::ostringstream s;
  const ThreadView& v = h.fibers[0].view;
  s << "simt: deadlock in block (" << v.blockIdx.x << "," << v.blockIdx.y << "," << v.blockIdx.z << ") of " << h.threads
    << " threads: " << atBlock << " wait at __syncthreads, " << atWarp << " at a warp barrier (shuffle, vote or __syncwarp), " << done
    << " exited — a barrier some threads never reach";
  if (example) s << " (e.g. " << where(example->view) << ")";
  return s.str();
}

// Apart from runBlock: getcontext returns twice as far as the compiler knows, which would put the
// scheduler's locals at risk.
__attribute__((noinline)) void startFiber(Host& h, Fiber& f, unsigned t, dim3 grid, dim3 block, uint3 blockIdx) {
  f.state = State::Running;
  f.exchanges = 0;
  f.view.blockIdx = blockIdx;
  f.view.blockDim = block;
  f.view.gridDim = grid;
  f.view.linear = t;
  f.view.threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
#if defined(__x86_64__)
  // The new stack, as fsm_simt_switch pops it: six zeroed registers, then fiberMain as the return address at a
  // 16-byte boundary (so fiberMain starts as if called: rsp ≡ 8 mod 16).
  auto* top = reinterpret_cast<uintptr_t*>(static_cast<unsigned char*>(h.stack(t)) + kStackBytes);
  top -= 2;
  top[0] = reinterpret_cast<uintptr_t>(&fiberMain);
  top[1] = 0;
  top -= 6;
  for (int i = 0; i < 6; i++) top[i] = 0;
  f.context.sp = top;
#else
  getcontext(&f.context);
  f.context.uc_stack.ss_sp = h.stack(t);
  f.context.uc_stack.ss_size = kStackBytes;
  f.context.uc_link = &h.scheduler;
  makecontext(&f.context, fiberMain, 0);
#endif
}

void runBlock(Host& h, dim3 grid, dim3 block, uint3 blockIdx) {
  const unsigned n = h.threads;
  for (unsigned t = 0; t < n; t++) startFiber(h, h.fibers[t], t, grid, block, blockIdx);
  h.blockArrived = 0;
  for (unsigned w = 0; w < (n + kWarp - 1) / kWarp; w++) h.warps[w].arrived = 0;
  unsigned done = 0;
  while (done < n) {
    bool moved = false;
    for (unsigned t = 0; t < n; t++) {
      Fiber& f = h.fibers[t];
      if (f.state == State::Done) continue;
      if (f.state == State::AtBlockBarrier && f.waitGeneration == h.blockGeneration) continue;
      if (f.state == State::AtWarpBarrier && f.waitGeneration == h.warps[t / kWarp].generation) continue;
      f.state = State::Running;
      h.current = &f;
      switchTo(h.scheduler, f.context);
      h.current = nullptr;
      moved = true;
      if (f.state == State::Done) done++;
      if (!h.error.empty()) throw SimtError("simt: " + where(f.view) + ": " + h.error);
    }
    if (!moved) throw SimtError(deadlock(h));
  }
}

}  // namespace

const ThreadView& current() { return inGrid("a CUDA built-in variable").current->view; }

void runGrid(dim3 grid, dim3 block, size_t sharedBytes, const std::function<void()>& body) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    std::ostringstream s;
    s << "simt: invalid launch: grid (" << grid.x << "," << grid.y << "," << grid.z << "), block (" << block.x << "," << block.y << "," << block.z
      << ") (at most " << kMaxThreads << " threads a block)";
    throw SimtError(s.str());
  }
  Host& h = host();
  if (h.running) throw SimtError("simt: a kernel launched a grid");
  h.running = true;
  tlsHost = &h;
  h.threads = static_cast<unsigned>(threads);
  h.body = &body;
  h.error.clear();
  h.shared.assign(sharedBytes + 16, 0);
  try {
    for (unsigned z = 0; z < grid.z; z++)
      for (unsigned y = 0; y < grid.y; y++)
        for (unsigned x = 0; x < grid.x; x++) runBlock(h, grid, block, {x, y, z});
  } catch (...) {
    h.running = false;
    h.current = nullptr;
    throw;
  }
  h.running = false;
}

void* dynamicShared() {
  Host& h = inGrid("dynamic shared memory");
  const auto p = reinterpret_cast<uintptr_t>(h.shared.data());
  return reinterpret_cast<void*>((p + 15) & ~uintptr_t{15});
}

void syncBlock() {
  Host& h = inGrid("__syncthreads");
  if (++h.blockArrived == h.threads) {
    h.blockArrived = 0;
    h.blockGeneration++;
    return;
  }
  h.current->state = State::AtBlockBarrier;
  h.current->waitGeneration = h.blockGeneration;
  yieldToScheduler(h);
}

unsigned laneId() { return inGrid("a lane id").current->view.linear % kWarp; }

unsigned warpLanes() {
  Host& h = inGrid("a warp's lanes");
  const unsigned first = h.current->view.linear / kWarp * kWarp;
  const unsigned count = std::min(kWarp, h.threads - first);
  return count == kWarp ? 0xffffffffu : (1u << count) - 1u;
}

void warpExchange(unsigned mask, const void* value, size_t bytes, int from, void* out) {
  Host& h = inGrid("a warp shuffle");
  if (bytes > kSlotBytes) throw SimtError("simt: a warp shuffle of more than 16 bytes");
  Fiber& self = *h.current;
  const unsigned lane = self.view.linear % kWarp;
  Warp& w = h.warps[self.view.linear / kWarp];
  const unsigned lanes = mask & warpLanes();
  if (!(lanes >> lane & 1u)) throw SimtError("simt: " + where(self.view) + " called a warp operation whose mask leaves it out");
  // Alternate halves: a lane can start the next exchange only after everyone arrived at this one, and by then
  // everyone has read the previous one, so writing the other half never clobbers a value still to be read.
  unsigned char(&slots)[kWarp][kSlotBytes] = w.slots[self.exchanges++ & 1];
  if (bytes) std::memcpy(slots[lane], value, bytes);
  w.arrived |= 1u << lane;
  if ((w.arrived & lanes) == lanes) {
    w.arrived = 0;
    w.generation++;
  } else {
    self.state = State::AtWarpBarrier;
    self.waitGeneration = w.generation;
    yieldToScheduler(h);
  }
  if (!bytes) return;
  const bool valid = from >= 0 && from < static_cast<int>(kWarp) && (lanes >> from & 1u);
  std::memcpy(out, valid ? slots[from] : slots[lane], bytes);
}

}  // namespace simt
}  // namespace fsm
