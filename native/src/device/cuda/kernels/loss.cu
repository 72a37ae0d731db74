// Losses on the CUDA device, as device/cpu/kernels/loss.cc: mean cross-entropy over rows (torch's default) and
// mean squared error, and their gradients scaled by the incoming scalar gradient (a device tensor, read in the
// kernel). Cross-entropy takes a block a row (vocabularies of 50k: max, then Σ exp, as block reductions); each
// row's loss goes to the workspace in double and one block adds them in row order, so the mean is the same
// every run. A target out of range is reported as the CPU's error (that row adds nothing).
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

/** log Σ exp of one row, max-subtracted; the whole block computes it, every thread gets it. */
__device__ __forceinline__ float rowLogSumExp(Floats x, int64_t base, int64_t v, float* scratch) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) m = fmaxf(m, x[base + c]);
  m = blockMax(m, scratch);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < v; c += blockDim.x) s += expf(x[base + c] - m);
  return m + logf(blockSum(s, scratch));
}

__global__ void rowLossKernel(Floats x, const int32_t* t, double* losses, int64_t rows, int64_t v, DeviceError* error, int instruction) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t target = t[r];
    const float lse = rowLogSumExp(x, r * v, v, scratch);
    if (threadIdx.x == 0) {
      const bool ok = target >= 0 && target < v;
      if (!ok) reportError(error, kErrorTargetIndex, instruction, target, v);
      losses[r] = ok ? static_cast<double>(lse) - static_cast<double>(x[r * v + target]) : 0.0;
    }
  }
}

// One block: Σ values (each thread a fixed stride of them, then the fixed tree), scaled, into y[0].
__global__ void meanKernel(const double* values, int64_t n, double scale, FloatsOut y) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += values[i];
  s = blockSumDouble(s, scratch);
  if (threadIdx.x == 0) y.set(0, static_cast<float>(s * scale));
}

size_t crossEntropyWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
  return static_cast<size_t>(in[1].numel()) * sizeof(double);
}

void crossEntropy(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t v = in[0].shape.back();
  const int64_t rows = in[1].numel();
  if (ctx.workspaceBytes < crossEntropyWorkspace(in, out, attrs)) throw std::logic_error("internal: cross_entropy launched without its workspace");
  double* losses = static_cast<double*>(ctx.workspace);
  if (rows > 0) {
    launch(ctx, rowLossKernel, dim3(blocksFor(ctx, rows, 1)), dim3(kThreads), 0, floatsIn(in[0]), intsIn(in[1]), losses, rows, v, ctx.error, ctx.instruction);
  }
  launch(ctx, meanKernel, dim3(1), dim3(kThreads), 0, static_cast<const double*>(losses), rows, 1.0 / static_cast<double>(rows), floatsOut(out[0]));
}

// (softmax − onehot(target)) · dloss / rows, a block a row.
__global__ void crossEntropyGradKernel(Floats dloss, Floats x, const int32_t* t, FloatsOut y, int64_t rows, int64_t v, DeviceError* error, int instruction) {
  __shared__ float scratch[32];
  const float scale = static_cast<float>(static_cast<double>(dloss[0]) / static_cast<double>(rows));
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t target = t[r];
    if (threadIdx.x == 0 && (target < 0 || target >= v)) reportError(error, kErrorTargetIndex, instruction, target, v);
    const float lse = rowLogSumExp(x, r * v, v, scratch);
    for (int64_t c = threadIdx.x; c < v; c += blockDim.x) y.set(r * v + c, (expf(x[r * v + c] - lse) - (c == target ? 1.0f : 0.0f)) * scale);
  }
}

void crossEntropyGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t v = in[1].shape.back();
  const int64_t rows = in[2].numel();
  if (rows == 0) return;
  launch(ctx, crossEntropyGradKernel, dim3(blocksFor(ctx, rows, 1)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), intsIn(in[2]), floatsOut(out[0]), rows,
         v, ctx.error, ctx.instruction);
}

// --- mean squared error ------------------------------------------------------------------------------------

// Blocks from the size alone (so the workspace and the summation order do not depend on the device).
constexpr int64_t kItemsPerBlock = 16 * kThreads;
constexpr int64_t kMaxBlocks = 1024;
int64_t squareBlocks(int64_t n) { return std::max<int64_t>(1, std::min(kMaxBlocks, (n + kItemsPerBlock - 1) / kItemsPerBlock)); }

__global__ void squaredErrorKernel(Floats a, Floats b, int64_t n, double* partial) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    s += d * d;
  }
  s = blockSumDouble(s, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

size_t mseWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
  return static_cast<size_t>(squareBlocks(in[0].numel())) * sizeof(double);
}

void mseLoss(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t n = in[0].numel();
  const int64_t blocks = squareBlocks(n);
  if (ctx.workspaceBytes < mseWorkspace(in, out, attrs)) throw std::logic_error("internal: mse_loss launched without its workspace");
  double* partial = static_cast<double*>(ctx.workspace);
  launch(ctx, squaredErrorKernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), n, partial);
  launch(ctx, meanKernel, dim3(1), dim3(kThreads), 0, static_cast<const double*>(partial), blocks, 1.0 / static_cast<double>(n), floatsOut(out[0]));
}

// 2·(a − b)·dloss / numel.
__global__ void mseGradKernel(Floats dloss, Floats a, Floats b, FloatsOut y, int64_t n) {
  const double scale = 2.0 * static_cast<double>(dloss[0]) / static_cast<double>(n);
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, static_cast<float>((static_cast<double>(a[k]) - static_cast<double>(b[k])) * scale));
  }
}

void mseLossGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = in[1].numel();
  launch(ctx, mseGradKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsIn(in[2]), floatsOut(out[0]), n);
}

}  // namespace

REGISTER_CUDA_KERNEL("cross_entropy", crossEntropy, crossEntropyWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("cross_entropy_grad", crossEntropyGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("mse_loss", mseLoss, mseWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("mse_loss_grad", mseLossGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
