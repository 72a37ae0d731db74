// Normalization over the last dimension on the CUDA device, as device/cpu/kernels/norm.cc: layer_norm (biased
// variance, as torch) and rms_norm, their input gradients (a block a row, row statistics recomputed from x) and
// their weight gradients Σ_rows dy·x̂ as a deterministic column reduction — each row's statistics into the
// workspace, then per block of rows a partial sum per column, then the partials added in block order.
// Statistics and sums in f32 with fixed trees (the CPU's are double: well inside the parity tolerance).
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

/** A row's mean and 1/√(var + eps), as the weight gradient's first pass leaves them. */
struct RowStat {
  float mean;
  float rstd;
};
/** Rows each partial of a weight gradient sums (so a column's sum is rows/kRowsPerPartial partials long). */
constexpr int64_t kRowsPerPartial = 64;

/** One row's mean (0 without centering) and 1/√(var + eps) (centered) or 1/√(mean(x²) + eps). The whole block
 *  computes it; every thread gets it. */
template <bool centered>
__device__ __forceinline__ void rowStats(Floats x, int64_t base, int64_t d, float eps, float* scratch, float& mean, float& rstd) {
  float mu = 0.0f;
  if (centered) {
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) s += x[base + c];
    mu = blockSum(s, scratch) / static_cast<float>(d);
  }
  float v = 0.0f;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    const float t = x[base + c] - mu;
    v += t * t;
  }
  v = blockSum(v, scratch) / static_cast<float>(d);
  mean = mu;
  rstd = rsqrtf(v + eps);
}

// y = x̂·w + b, a block a row.
template <bool centered>
__global__ void forwardKernel(Floats x, Floats w, Floats b, bool bias, FloatsOut y, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float mean, rstd;
    rowStats<centered>(x, r * d, d, eps, scratch, mean, rstd);
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) y.set(r * d + c, (x[r * d + c] - mean) * rstd * w[c] + (bias ? b[c] : 0.0f));
  }
}

template <bool centered>
void forward(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[0].shape.back();
  const int64_t rows = in[0].numel() / d;
  const bool bias = in.size() > 2;
  launch(ctx, forwardKernel<centered>, dim3(blocksFor(ctx, rows, 1)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]),
         bias ? floatsIn(in[2]) : floatsIn(in[1]), bias, floatsOut(out[0]), rows, d, static_cast<float>(attrs.number("eps")));
}

// With g = dy·w: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)) (layer_norm); rms_norm drops mean(g).
template <bool centered>
__global__ void gradInputKernel(Floats dy, Floats x, Floats w, FloatsOut dx, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * d;
    float mean, rstd;
    rowStats<centered>(x, base, d, eps, scratch, mean, rstd);
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const float g = dy[base + c] * w[c];
      sg += g;
      sgx += g * (x[base + c] - mean) * rstd;
    }
    const float mg = centered ? blockSum(sg, scratch) / static_cast<float>(d) : 0.0f;
    const float mgx = blockSum(sgx, scratch) / static_cast<float>(d);
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const float xh = (x[base + c] - mean) * rstd;
      dx.set(base + c, rstd * (dy[base + c] * w[c] - mg - xh * mgx));
    }
  }
}

template <bool centered>
void gradInput(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = in[1].numel() / d;
  launch(ctx, gradInputKernel<centered>, dim3(blocksFor(ctx, rows, 1)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsIn(in[2]),
         floatsOut(out[0]), rows, d, static_cast<float>(attrs.number("eps")));
}

// --- weight gradient ----------------------------------------------------------------------------------------

template <bool centered>
__global__ void statsKernel(Floats x, RowStat* stats, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float mean, rstd;
    rowStats<centered>(x, r * d, d, eps, scratch, mean, rstd);
    if (threadIdx.x == 0) stats[r] = RowStat{mean, rstd};
  }
}

// partial[p][c] = Σ over rows [p·R, (p+1)·R) of dy·x̂, a thread a column (coalesced over columns).
__global__ void partialKernel(Floats dy, Floats x, const RowStat* stats, float* partial, int64_t rows, int64_t d) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= d) return;
  const int64_t p = blockIdx.y;
  const int64_t end = (p + 1) * kRowsPerPartial < rows ? (p + 1) * kRowsPerPartial : rows;
  float s = 0.0f;
  for (int64_t r = p * kRowsPerPartial; r < end; r++) {
    const RowStat st = stats[r];
    s += dy[r * d + c] * (x[r * d + c] - st.mean) * st.rstd;
  }
  partial[p * d + c] = s;
}

__global__ void columnSumKernel(const float* partial, int64_t parts, FloatsOut dw, int64_t d) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < d; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int64_t p = 0; p < parts; p++) s += partial[p * d + c];
    dw.set(c, s);
  }
}

int64_t partsOf(int64_t rows) { return (rows + kRowsPerPartial - 1) / kRowsPerPartial; }

size_t statsBytes(int64_t rows) { return (static_cast<size_t>(rows) * sizeof(RowStat) + 255) / 256 * 256; }

size_t gradWeightWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = d == 0 ? 0 : in[1].numel() / d;
  return statsBytes(rows) + static_cast<size_t>(partsOf(rows) * d) * sizeof(float);
}

template <bool centered>
void gradWeight(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = in[1].numel() / d;
  if (ctx.workspaceBytes < gradWeightWorkspace(in, out, attrs)) throw std::logic_error("internal: a norm's weight gradient launched without its workspace");
  RowStat* stats = static_cast<RowStat*>(ctx.workspace);
  float* partial = reinterpret_cast<float*>(static_cast<unsigned char*>(ctx.workspace) + statsBytes(rows));
  const int64_t parts = partsOf(rows);
  if (rows > 0) {
    launch(ctx, statsKernel<centered>, dim3(blocksFor(ctx, rows, 1)), dim3(kThreads), 0, floatsIn(in[1]), stats, rows, d, static_cast<float>(attrs.number("eps")));
    launch(ctx, partialKernel, dim3(gridDimension((d + kThreads - 1) / kThreads, "norm weight gradient columns", 2147483647),
                                    gridDimension(parts, "norm weight gradient row blocks")),
           dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), static_cast<const RowStat*>(stats), partial, rows, d);
  }
  launch(ctx, columnSumKernel, dim3(blocksFor(ctx, d, kThreads)), dim3(kThreads), 0, static_cast<const float*>(partial), parts, floatsOut(out[0]), d);
}

}  // namespace

REGISTER_CUDA_KERNEL("layer_norm", forward<true>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("layer_norm_grad_input", gradInput<true>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("layer_norm_grad_weight", gradWeight<true>, gradWeightWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("rms_norm", forward<false>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("rms_norm_grad_input", gradInput<false>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("rms_norm_grad_weight", gradWeight<false>, gradWeightWorkspace, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
