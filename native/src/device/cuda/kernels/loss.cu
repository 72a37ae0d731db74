// Loss kernels on the CUDA device, as device/cpu/kernels/loss.cc: mean cross-entropy over rows (a row per
// block, its log-sum-exp in one read; per-row losses through the workspace into a fixed-order mean) and mean
// squared error (per-block partial sums, then a fixed-order total), with their gradients scaled by the incoming
// scalar gradient, which is read on the device.
#include "device/cuda/rows.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
/** The most partial sums a reduction over elements leaves for its final pass (mse_loss's workspace). */
constexpr int64_t kMaxPartials = 1024;

/** Reports target t of row r when it is outside [0, v); true when it is inside. */
__device__ bool targetInRange(int32_t t, int64_t v, DeviceError* error, int instruction) {
  if (t >= 0 && t < v) return true;
  reportError(error, kErrorTargetIndex, instruction, t, v);
  return false;
}

// losses[r] = lse(row r) − row r[target]: a block a row.
__global__ void crossEntropyRowsKernel(Floats x, const int32_t* targets, float* losses, int64_t rows, int64_t v, DeviceError* error, int instruction) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * v;
    const MaxSum ms = rowMaxSum<BlockRows>(x, base, v, scratch);
    if (threadIdx.x == 0) {
      const int32_t t = targets[r];
      losses[r] = targetInRange(t, v, error, instruction) ? ms.max + logf(ms.sum) - x[base + t] : NAN;
    }
  }
}

// out = Σ parts[0..count) / divisor, in one block, in a fixed order.
__global__ void totalKernel(const float* parts, int64_t count, float divisor, FloatsOut out) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) s += parts[k];
  s = blockSum(s, scratch);
  if (threadIdx.x == 0) out.set(0, s / divisor);
}

// dx = (softmax(row) − onehot(target))·dloss/rows; dloss is a device scalar.
__global__ void crossEntropyGradKernel(Floats dloss, Floats x, const int32_t* targets, FloatsOut dx, int64_t rows, int64_t v, DeviceError* error,
                                       int instruction) {
  __shared__ float scratch[32];
  const float scale = dloss[0] / static_cast<float>(rows);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * v;
    const MaxSum ms = rowMaxSum<BlockRows>(x, base, v, scratch);
    const int32_t t = targets[r];
    if (threadIdx.x == 0) targetInRange(t, v, error, instruction);
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x) {
      dx.set(base + c, (expf(x[base + c] - ms.max) / ms.sum - (c == t ? 1.0f : 0.0f)) * scale);
    }
  }
}

// Block b's share of Σ (a − b)², a grid-stride sum, into parts[b].
__global__ void squaredErrorPartsKernel(Floats a, Floats b, float* parts, int64_t n) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float d = a[k] - b[k];
    s += d * d;
  }
  s = blockSum(s, scratch);
  if (threadIdx.x == 0) parts[blockIdx.x] = s;
}

// dx = 2·(a − b)·dloss/n, in double and rounded once, as the CPU.
__global__ void mseGradKernel(Floats dloss, Floats a, Floats b, FloatsOut dx, int64_t n) {
  const double scale = 2.0 * static_cast<double>(dloss[0]) / static_cast<double>(n);
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dx.set(k, static_cast<float>((static_cast<double>(a[k]) - b[k]) * scale));
  }
}

/** Threads a block for a row of v logits: more for a large vocabulary. */
int rowThreads(int64_t v) { return v > 8 * 1024 ? 1024 : kThreads; }

size_t crossEntropyWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
  return sizeof(float) * static_cast<size_t>(in[1].numel());
}

// cross_entropy(logits[..., V], targets[...] i32): mean over rows of lse(row) − row[target].
void crossEntropy(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t v = in[0].shape.back();
  const int64_t rows = in[1].numel();
  float* losses = static_cast<float*>(ctx.workspace);
  if (rows > 0) {
    launch(ctx, crossEntropyRowsKernel, dim3(blocksFor(ctx, rows, 1)), dim3(rowThreads(v)), 0, floatsIn(in[0], "logits"), intsIn(in[1]), losses, rows, v,
           ctx.error, ctx.instruction);
  }
  launch(ctx, totalKernel, dim3(1), dim3(1024), 0, static_cast<const float*>(losses), rows, static_cast<float>(rows), floatsOut(out[0]));
}

// cross_entropy_grad(dloss, logits, targets).
void crossEntropyGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t v = in[1].shape.back();
  const int64_t rows = in[2].numel();
  if (rows == 0) return;
  launch(ctx, crossEntropyGradKernel, dim3(blocksFor(ctx, rows, 1)), dim3(rowThreads(v)), 0, floatsIn(in[0], "dloss"), floatsIn(in[1], "logits"),
         intsIn(in[2]), floatsOut(out[0]), rows, v, ctx.error, ctx.instruction);
}

/** Blocks of mse_loss's first pass: from the size alone (so the sum's order, and its bits, are the same on any
 *  GPU), at least 4 elements a thread, at most kMaxPartials blocks (enough to fill an H200 several times). */
unsigned partialBlocks(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + 4 * kThreads - 1) / (4 * kThreads), kMaxPartials))); }

size_t mseWorkspace(const std::vector<Tensor>&, const std::vector<Tensor>&, const Attrs&) { return sizeof(float) * kMaxPartials; }

// mse_loss(a, b): mean of (a − b)².
void mseLoss(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = in[0].numel();
  float* parts = static_cast<float*>(ctx.workspace);
  const unsigned blocks = partialBlocks(n);
  launch(ctx, squaredErrorPartsKernel, dim3(blocks), dim3(kThreads), 0, floatsIn(in[0], "a"), floatsIn(in[1], "b"), parts, n);
  launch(ctx, totalKernel, dim3(1), dim3(1024), 0, static_cast<const float*>(parts), static_cast<int64_t>(blocks), static_cast<float>(n), floatsOut(out[0]));
}

// mse_loss_grad(dloss, a, b).
void mseLossGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = in[1].numel();
  if (n == 0) return;
  launch(ctx, mseGradKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0], "dloss"), floatsIn(in[1], "a"), floatsIn(in[2], "b"),
         floatsOut(out[0]), n);
}

}  // namespace

REGISTER_CUDA_KERNEL("cross_entropy", crossEntropy, crossEntropyWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("cross_entropy_grad", crossEntropyGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("mse_loss", mseLoss, mseWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("mse_loss_grad", mseLossGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
