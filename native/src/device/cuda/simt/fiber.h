// The SIMT emulator: runs a CUDA grid on the calling host thread, block after block, each block's threads as
// cooperative fibers, so the CUDA device's own kernel sources (device/cuda/kernels/*.cu, compiled as C++ with
// FSM_SIMT) run and are tested on machines without a GPU. A fiber switches only at a barrier
// (__syncthreads, __syncwarp, a warp shuffle or vote), so a kernel's shared memory and warp exchanges behave
// as on a GPU; a barrier some threads never reach (a divergent __syncthreads, a shuffle whose mask names an
// exited lane) is reported as an error instead of hanging — the bug it would be on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

namespace fsm {
namespace simt {

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

/** What a running emulated thread sees: its CUDA built-in variables. */
struct ThreadView {
  uint3 threadIdx;
  uint3 blockIdx;
  dim3 blockDim;
  dim3 gridDim;
  unsigned linear;  // threadIdx.x + blockDim.x·(threadIdx.y + blockDim.y·threadIdx.z)
};

/** The thread the calling fiber emulates (valid only inside runGrid's body). */
const ThreadView& current();

/** A kernel error found by the emulator (a deadlock at a barrier, an exception in a thread, a bad launch). */
class SimtError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** Runs body once per thread of the grid (blocks in order, each block's threads as fibers). `sharedBytes`
 *  of dynamic shared memory per block (dynamicShared()). Throws SimtError. Reentrant per host thread only in
 *  the sense that different host threads may run grids at once; a body must not launch a grid. */
void runGrid(dim3 grid, dim3 block, size_t sharedBytes, const std::function<void()>& body);

/** The block's dynamic shared memory (16-byte aligned; its contents are undefined at block start). */
void* dynamicShared();

/** __syncthreads: every thread of the block arrives before any goes on. */
void syncBlock();

/** Exchanges one value among the lanes of the calling warp that `mask` names (all must call): each lane gives
 *  `bytes` bytes at `value` and gets lane `from`'s into `out`, or its own when `from` is outside the warp or
 *  not in the mask. Also __syncwarp when bytes == 0. */
void warpExchange(unsigned mask, const void* value, size_t bytes, int from, void* out);

/** This thread's lane in its warp (threads are numbered linearly, 32 to a warp, as on a GPU). */
unsigned laneId();
/** The lanes of the calling warp that exist (a block's last warp may be partial). */
unsigned warpLanes();

}  // namespace simt
}  // namespace fsm
