// Optimizer kernels on the CUDA device, as device/cpu/kernels/optimizer.cc (torch.optim exactly): the clipping
// chain (sum_squares, global_norm, clip_coef), the step count, SGD and Adam/AdamW updates. Scalars the CPU
// reads on the host (the step t, the clip factor, the norms) are device tensors, read by the kernels; the
// arithmetic is the CPU's, in double, rounded to f32 once per stored value. Reductions are fixed trees.
#include <cmath>

#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

/** Added to the norm before dividing, as torch's clip_grad_norm_ (CLIP_EPS in src/graph/ops/clip_coef.ts). */
constexpr double kClipEps = 1e-6;

constexpr int kThreads = 256;

// --- sum_squares: Σ x² in two passes: each block's share into a partial, then the partials in order ---------

// Blocks for n elements: about kItemsPerBlock each, at most kMaxBlocks. From the size alone, so the workspace
// and the summation order are the same on every device (a large tensor fills an H200: 1024 blocks of 256).
constexpr int64_t kItemsPerBlock = 16 * kThreads;
constexpr int64_t kMaxBlocks = 1024;

int64_t squareBlocks(int64_t n) { return std::max<int64_t>(1, std::min(kMaxBlocks, (n + kItemsPerBlock - 1) / kItemsPerBlock)); }

// A single block writes the result; several write partial[block].
__global__ void squaresKernel(Floats x, int64_t n, double* partial, FloatsOut y) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    s += v * v;
  }
  s = blockSumDouble(s, scratch);
  if (threadIdx.x == 0) {
    if (gridDim.x == 1) y.set(0, static_cast<float>(s));
    else partial[blockIdx.x] = s;
  }
}

__global__ void partialsKernel(const double* partial, int64_t count, FloatsOut y) {
  __shared__ double scratch[32];
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = blockSumDouble(s, scratch);
  if (threadIdx.x == 0) y.set(0, static_cast<float>(s));
}

size_t sumSquaresWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
  const int64_t blocks = squareBlocks(in[0].numel());
  return blocks > 1 ? static_cast<size_t>(blocks) * sizeof(double) : 0;
}

void sumSquares(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = in[0].numel();
  const int64_t blocks = squareBlocks(n);
  double* partial = static_cast<double*>(ctx.workspace);
  if (blocks > 1 && ctx.workspaceBytes < static_cast<size_t>(blocks) * sizeof(double)) throw std::logic_error("internal: sum_squares launched without its workspace");
  launch(ctx, squaresKernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, floatsIn(in[0]), n, partial, floatsOut(out[0]));
  if (blocks > 1) launch(ctx, partialsKernel, dim3(1), dim3(kThreads), 0, static_cast<const double*>(partial), blocks, floatsOut(out[0]));
}

// --- global_norm: √Σ of n scalar sums, added in operand order ---------------------------------------------

// Operands go to the kernel by value, up to kBatch a launch; with more, the running double sum waits in the
// workspace between launches (same stream, so in order).
constexpr int kBatch = 32;

struct Scalars {
  Floats x[kBatch];
  int count;
};

__global__ void normKernel(Scalars batch, double* running, bool first, bool last, FloatsOut y) {
  double s = first ? 0.0 : *running;
  for (int i = 0; i < batch.count; i++) s += batch.x[i][0];
  if (last) y.set(0, static_cast<float>(sqrt(s)));
  else *running = s;
}

size_t globalNormWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) { return in.size() > kBatch ? sizeof(double) : 0; }

void globalNorm(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  double* running = static_cast<double*>(ctx.workspace);
  if (in.size() > kBatch && ctx.workspaceBytes < sizeof(double)) throw std::logic_error("internal: global_norm launched without its workspace");
  size_t next = 0;
  do {
    const bool first = next == 0;
    Scalars batch{};
    for (; next < in.size() && batch.count < kBatch; batch.count++, next++) batch.x[batch.count] = floatsIn(in[next]);
    launch(ctx, normKernel, dim3(1), dim3(1), 0, batch, running, first, next == in.size(), floatsOut(out[0]));
  } while (next < in.size());
}

// --- scalars ---------------------------------------------------------------------------------------------

// min(1, max_norm / (norm + eps)) as std::min(1.0, q) (a NaN q gives 1).
__global__ void clipCoefKernel(Floats norm, FloatsOut y, double maxNorm) {
  const double q = maxNorm / (static_cast<double>(norm[0]) + kClipEps);
  y.set(0, static_cast<float>(q < 1.0 ? q : 1.0));
}

void clipCoef(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  launch(ctx, clipCoefKernel, dim3(1), dim3(1), 0, floatsIn(in[0]), floatsOut(out[0]), attrs.number("max_norm"));
}

__global__ void stepIncrementKernel(Floats t, FloatsOut y) { y.set(0, static_cast<float>(static_cast<double>(t[0]) + 1.0)); }

void stepIncrement(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  launch(ctx, stepIncrementKernel, dim3(1), dim3(1), 0, floatsIn(in[0]), floatsOut(out[0]));
}

// --- updates ---------------------------------------------------------------------------------------------

/** The clipping factor's operand: the last one when the `clip` attribute is set (else none: the factor is 1). */
Floats clipOf(const std::vector<Tensor>& in, const Attrs& attrs) {
  return attrs.boolean("clip") ? floatsIn(in.back()) : Floats{nullptr, kF32};
}

__device__ __forceinline__ double clipFactor(const Floats& clip) { return clip.data ? static_cast<double>(clip[0]) : 1.0; }

struct SgdConfig {
  double lr, mu, wd;
  bool momentum, nesterov;
};

// g = grad·clip + wd·p; buf = μ·buf + g; p −= lr·(nesterov ? g + μ·buf : buf), or lr·g without momentum.
// Outputs may be the inputs (updated in place): each element is read before it is written.
__global__ void sgdKernel(Floats p, Floats g, Floats buf, Floats clip, FloatsOut newP, FloatsOut newBuf, int64_t n, SgdConfig c) {
  const double factor = clipFactor(clip);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double pi = p[i];
    const double gi = static_cast<double>(g[i]) * factor + c.wd * pi;
    double step = gi;
    if (c.momentum) {
      const double b = c.mu * static_cast<double>(buf[i]) + gi;
      newBuf.set(i, static_cast<float>(b));
      step = c.nesterov ? gi + c.mu * b : b;
    }
    newP.set(i, static_cast<float>(pi - c.lr * step));
  }
}

// Operands param, grad, [momentum_buffer when momentum ≠ 0], [clip]; outputs the new param (and buffer).
void sgdUpdate(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  SgdConfig c{attrs.number("lr"), attrs.number("momentum"), attrs.number("weight_decay"), false, attrs.boolean("nesterov")};
  c.momentum = c.mu != 0;
  const Floats clip = clipOf(in, attrs);
  const Floats buf = c.momentum ? floatsIn(in[2]) : Floats{nullptr, kF32};
  const FloatsOut newBuf = c.momentum ? floatsOut(out[1]) : FloatsOut{nullptr, kF32};
  const int64_t n = in[0].numel();
  launch(ctx, sgdKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), buf, clip, floatsOut(out[0]), newBuf, n, c);
}

struct AdamConfig {
  double lr, b1, b2, eps, wd;
  bool decoupled;
};

// m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + eps). Adam adds wd·p to g;
// AdamW first scales p by (1 − lr·wd). t (already incremented) is a device scalar: the bias corrections are
// computed by each thread once, before its elements.
__global__ void adamKernel(Floats p, Floats g, Floats m, Floats v, Floats step, Floats clip, FloatsOut newP, FloatsOut newM, FloatsOut newV, int64_t n,
                           AdamConfig c) {
  const double factor = clipFactor(clip);
  const double t = step[0];
  const double bc1 = 1 - pow(c.b1, t), sqrtBc2 = sqrt(1 - pow(c.b2, t));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double gi = static_cast<double>(g[i]) * factor;
    const double p0 = p[i];
    double pi = p0;
    if (c.decoupled) pi *= 1 - c.lr * c.wd;
    else gi += c.wd * p0;
    const double mi = c.b1 * static_cast<double>(m[i]) + (1 - c.b1) * gi;
    const double vi = c.b2 * static_cast<double>(v[i]) + (1 - c.b2) * gi * gi;
    newM.set(i, static_cast<float>(mi));
    newV.set(i, static_cast<float>(vi));
    newP.set(i, static_cast<float>(pi - (c.lr / bc1) * (mi / (sqrt(vi) / sqrtBc2 + c.eps))));
  }
}

// Operands param, grad, exp_avg, exp_avg_sq, step, [clip]; outputs p, m, v.
void adamUpdate(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AdamConfig c{attrs.number("lr"), attrs.number("beta1"), attrs.number("beta2"), attrs.number("eps"), attrs.number("weight_decay"), attrs.boolean("decoupled")};
  const Floats clip = clipOf(in, attrs);
  const int64_t n = in[0].numel();
  launch(ctx, adamKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsIn(in[2]), floatsIn(in[3]),
         floatsIn(in[4]), clip, floatsOut(out[0]), floatsOut(out[1]), floatsOut(out[2]), n, c);
}

}  // namespace

REGISTER_CUDA_KERNEL("sum_squares", sumSquares, sumSquaresWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("global_norm", globalNorm, globalNormWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("clip_coef", clipCoef, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("step_increment", stepIncrement, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("sgd_update", sgdUpdate, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("adam_update", adamUpdate, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
