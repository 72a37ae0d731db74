// Softmax along any dimension (max-subtracted) and its gradient from the output on the CUDA device, as
// device/cpu/kernels/softmax.cc. The tensor is viewed as [outer, n, inner] around the axis: along the last
// dimension (inner 1) a row goes to a warp, or a block for long rows; otherwise a thread walks a strided line,
// neighbouring threads taking neighbouring lines so reads stay coalesced.
#include "core/strides.h"
#include "device/cuda/rows.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

template <class Team>
__global__ void softmaxRowsKernel(Floats x, FloatsOut y, int64_t rows, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t r = Team::first(); r < rows; r += Team::stride()) {
    const int64_t base = r * n;
    const MaxSum ms = rowMaxSum<Team>(x, base, n, scratch);
    for (int64_t c = Team::rank(); c < n; c += Team::size()) y.set(base + c, expf(x[base + c] - ms.max) / ms.sum);
  }
}

__global__ void softmaxStridedKernel(Floats x, FloatsOut y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < outer * inner; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = k / inner * n * inner + k % inner;
    MaxSum ms;
    for (int64_t i = 0; i < n; i++) ms.add(x[base + i * inner]);
    for (int64_t i = 0; i < n; i++) y.set(base + i * inner, expf(x[base + i * inner] - ms.max) / ms.sum);
  }
}

// dx = y·(dy − Σ dy·y) along the axis.
template <class Team>
__global__ void softmaxGradRowsKernel(Floats dy, Floats y, FloatsOut dx, int64_t rows, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t r = Team::first(); r < rows; r += Team::stride()) {
    const int64_t base = r * n;
    float dot = 0.0f;
    for (int64_t c = Team::rank(); c < n; c += Team::size()) dot += dy[base + c] * y[base + c];
    dot = Team::sum(dot, scratch);
    for (int64_t c = Team::rank(); c < n; c += Team::size()) dx.set(base + c, y[base + c] * (dy[base + c] - dot));
  }
}

__global__ void softmaxGradStridedKernel(Floats dy, Floats y, FloatsOut dx, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < outer * inner; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = k / inner * n * inner + k % inner;
    float dot = 0.0f;
    for (int64_t i = 0; i < n; i++) dot += dy[base + i * inner] * y[base + i * inner];
    for (int64_t i = 0; i < n; i++) {
      const int64_t e = base + i * inner;
      dx.set(e, y[e] * (dy[e] - dot));
    }
  }
}


/** Launches the row kernel (a warp or a block a row) when the axis is innermost, the strided one otherwise. */
template <typename RowsKernel, typename StridedKernel, typename... Args>
void byLayout(const KernelContext& ctx, const AroundAxis& g, RowsKernel warpRows, RowsKernel blockRows, StridedKernel strided, Args... args) {
  if (g.outer * g.n * g.inner == 0) return;
  if (g.inner == 1 && g.n <= kWarpRowMax) {
    launch(ctx, warpRows, dim3(blocksFor(ctx, g.outer, kThreads / 32)), dim3(kThreads), 0, args..., g.outer, g.n);
  } else if (g.inner == 1) {
    launch(ctx, blockRows, dim3(blocksFor(ctx, g.outer, 1)), dim3(g.n > 8 * 1024 ? 1024 : kThreads), 0, args..., g.outer, g.n);
  } else {
    launch(ctx, strided, dim3(blocksFor(ctx, g.outer * g.inner, kThreads)), dim3(kThreads), 0, args..., g.outer, g.n, g.inner);
  }
}

void softmax(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AroundAxis g = aroundAxis(in[0].shape, attrs.number("dim"));
  byLayout(ctx, g, softmaxRowsKernel<WarpRows>, softmaxRowsKernel<BlockRows>, softmaxStridedKernel, floatsIn(in[0], "x"),
                              floatsOut(out[0]));
}

// Operands dy, y.
void softmaxGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AroundAxis g = aroundAxis(in[1].shape, attrs.number("dim"));
  byLayout(ctx, g, softmaxGradRowsKernel<WarpRows>, softmaxGradRowsKernel<BlockRows>, softmaxGradStridedKernel,
                                      floatsIn(in[0], "dy"), floatsIn(in[1], "y"), floatsOut(out[0]));
}

}  // namespace

REGISTER_CUDA_KERNEL("softmax", softmax, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("softmax_grad", softmaxGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
