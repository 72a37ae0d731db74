// How CUDA kernels walk rows: a row to a warp (short rows, several a block) or to the whole block (long
// rows), behind one "team" interface so a kernel is written once for both; and the one-read max and
// Σ exp(x − max) of a row (softmax, log-sum-exp). Included by kernel files only.
#pragma once

#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {

/** Rows up to this long go a warp each (a block of kThreads holds blockDim/32 rows); longer ones a block each. */
constexpr int64_t kWarpRowMax = 1024;

/** A row's team when rows are short: one warp, several rows a block. */
struct WarpRows {
  __device__ static int64_t first() { return static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; }
  __device__ static int64_t stride() { return static_cast<int64_t>(gridDim.x) * (blockDim.x / 32); }
  __device__ static int rank() { return threadIdx.x % 32; }
  __device__ static int size() { return 32; }
  __device__ static float sum(float v, float*) { return warpSum(v); }
  __device__ static float max(float v, float*) { return warpMax(v); }
};

/** A row's team when rows are long: the whole block (every thread of it walks the same rows, so the block
 *  reductions' barriers are reached by all). */
struct BlockRows {
  __device__ static int64_t first() { return blockIdx.x; }
  __device__ static int64_t stride() { return gridDim.x; }
  __device__ static int rank() { return threadIdx.x; }
  __device__ static int size() { return blockDim.x; }
  __device__ static float sum(float v, float* scratch) { return blockSum(v, scratch); }
  __device__ static float max(float v, float* scratch) { return blockMax(v, scratch); }
};

/** A running max m and Σ exp(x − m), so a line is read once for both. */
struct MaxSum {
  float max = -INFINITY;
  float sum = 0.0f;
  __device__ void add(float x) {
    if (x > max) {
      sum = sum * expf(max - x) + 1.0f;
      max = x;
    } else if (x != -INFINITY) {  // −∞ adds nothing (and would make −∞ − −∞ a NaN before any finite x)
      sum += expf(x - max);
    }
  }
};

/** A row's max and Σ exp(x − max) over the team: each member's running pair, rescaled to the team's max. */
template <class Team>
__device__ MaxSum rowMaxSum(Floats x, int64_t base, int64_t n, float* scratch) {
  MaxSum mine;
  for (int64_t c = Team::rank(); c < n; c += Team::size()) mine.add(x[base + c]);
  MaxSum row;
  row.max = Team::max(mine.max, scratch);
  row.sum = Team::sum(mine.max == -INFINITY ? 0.0f : mine.sum * expf(mine.max - row.max), scratch);
  return row;
}

}  // namespace FSM_CUDA_NS
}  // namespace fsm
