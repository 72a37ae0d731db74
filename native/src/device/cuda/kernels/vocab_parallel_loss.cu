// The vocabulary-parallel cross-entropy's pieces on the CUDA device, as device/cpu/kernels/vocab_parallel_loss.cc
// (its comment says what each computes): a thread a row for the row statistics, a thread an element for the
// gradient, and the loss's mean in one block in a fixed order. Targets outside the whole vocabulary are the
// CPU's error, found on the device.
#include <cmath>

#include "device/cuda/rows.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

/** Row r's largest logit over the ranks, from the all-gathered maxima [parts, rows]. */
__device__ float rowMax(const float* maxes, int64_t parts, int64_t rows, int64_t r) {
  float m = -INFINITY;
  for (int64_t k = 0; k < parts; k++) m = fmaxf(m, maxes[k * rows + r]);
  return m;
}

__global__ void maxKernel(Floats x, float* y, int64_t rows, int64_t v) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float m = -INFINITY;
    for (int64_t c = 0; c < v; c++) m = fmaxf(m, x[r * v + c]);
    y[r] = m;
  }
}

__global__ void sumsKernel(Floats x, const int32_t* targets, const float* maxes, float* sums, int64_t rows, int64_t local, int64_t first, int64_t parts,
                           DeviceError* error, int instruction) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t t = targets[r];
    if (t < 0 || t >= local * parts) reportError(error, kErrorTargetIndex, instruction, t, local * parts);
    const double m = rowMax(maxes, parts, rows, r);
    double s = 0.0;
    for (int64_t c = 0; c < local; c++) s += exp(static_cast<double>(x[r * local + c]) - m);
    const int64_t c = t - first;
    sums[r] = static_cast<float>(s);
    sums[rows + r] = c >= 0 && c < local ? x[r * local + c] : 0.0f;
  }
}

__global__ void lossKernel(const float* sums, const float* maxes, int64_t rows, int64_t parts, FloatsOut out) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += logf(sums[r]) + rowMax(maxes, parts, rows, r) - sums[rows + r];
  s = blockSum(s, scratch);
  if (threadIdx.x == 0) out.set(0, s / static_cast<float>(rows));
}

__global__ void gradKernel(Floats dloss, Floats x, const int32_t* targets, const float* sums, const float* maxes, FloatsOut dx, int64_t rows, int64_t local,
                           int64_t first, int64_t parts) {
  const float scale = dloss[0] / static_cast<float>(rows);
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < rows * local; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / local, c = k % local;
    const float onehot = c + first == targets[r] ? 1.0f : 0.0f;
    dx.set(k, (expf(x[k] - rowMax(maxes, parts, rows, r)) / sums[r] - onehot) * scale);
  }
}

int64_t rankOf(const Attrs& attrs) { return static_cast<int64_t>(attrs.number("tensor_rank")); }

void vocabMax(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t v = in[0].shape.back();
  const int64_t rows = in[0].numel() / v;
  if (rows > 0) launch(ctx, maxKernel, dim3(blocksFor(ctx, rows, kThreads)), dim3(kThreads), 0, floatsIn(in[0], "logits"), out[0].f32(), rows, v);
}

void vocabSums(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t local = in[0].shape.back();
  const int64_t rows = in[0].numel() / local;
  const int64_t parts = in[2].shape[0];
  if (rows > 0) {
    launch(ctx, sumsKernel, dim3(blocksFor(ctx, rows, kThreads)), dim3(kThreads), 0, floatsIn(in[0], "logits"), intsIn(in[1]), static_cast<const float*>(in[2].f32()),
           out[0].f32(), rows, local, rankOf(attrs) * local, parts, ctx.error, ctx.instruction);
  }
}

void vocabLoss(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  launch(ctx, lossKernel, dim3(1), dim3(1024), 0, static_cast<const float*>(in[0].f32()), static_cast<const float*>(in[1].f32()), in[0].shape[1], in[1].shape[0],
         floatsOut(out[0]));
}

void vocabGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t local = in[1].shape.back();
  const int64_t rows = in[1].numel() / local;
  if (rows == 0) return;
  launch(ctx, gradKernel, dim3(blocksFor(ctx, rows * local, kThreads)), dim3(kThreads), 0, floatsIn(in[0], "dloss"), floatsIn(in[1], "logits"), intsIn(in[2]),
         static_cast<const float*>(in[3].f32()), static_cast<const float*>(in[4].f32()), floatsOut(out[0]), rows, local, rankOf(attrs) * local, in[4].shape[0]);
}

}  // namespace

REGISTER_CUDA_KERNEL("fsm_vocab_ce_max", vocabMax, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_vocab_ce_sums", vocabSums, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_vocab_ce_loss", vocabLoss, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_vocab_ce_grad", vocabGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
