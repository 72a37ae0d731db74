// Softmax along any dimension on the CUDA device, and its gradient from the output, as
// device/cpu/kernels/softmax.cc: the tensor as [outer, n, inner] around the axis. A contiguous axis (inner 1)
// gets a block a line (max-subtracted exponentials, block sums); a strided one a thread a line, whose reads
// are coalesced across the neighbouring lines.
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};

Around around(const std::vector<int64_t>& shape, double dim) {
  const int64_t a = axisOf(dim, static_cast<int64_t>(shape.size()));
  Around r;
  for (int64_t i = 0; i < a; i++) r.outer *= shape[i];
  r.n = shape[a];
  for (size_t i = static_cast<size_t>(a) + 1; i < shape.size(); i++) r.inner *= shape[i];
  return r;
}

__global__ void rowsKernel(Floats x, FloatsOut y, int64_t lines, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const int64_t base = l * n;
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[base + i]);
    m = blockMax(m, scratch);
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(x[base + i] - m);
    const float inv = 1.0f / blockSum(s, scratch);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y.set(base + i, expf(x[base + i] - m) * inv);
  }
}

__global__ void stridedKernel(Floats x, FloatsOut y, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < outer * inner; l += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = l / inner * n * inner + l % inner;
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, x[base + i * inner]);
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += expf(x[base + i * inner] - m);
    const float inv = 1.0f / s;
    for (int64_t i = 0; i < n; i++) y.set(base + i * inner, expf(x[base + i * inner] - m) * inv);
  }
}

void softmax(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Around g = around(in[0].shape, attrs.number("dim"));
  if (g.inner == 1) launch(ctx, rowsKernel, dim3(blocksFor(ctx, g.outer, 1)), dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), g.outer, g.n);
  else launch(ctx, stridedKernel, dim3(blocksFor(ctx, g.outer * g.inner, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), g.outer, g.n, g.inner);
}

// dx = y·(dy − Σ dy·y) along the axis.
__global__ void gradRowsKernel(Floats dy, Floats y, FloatsOut dx, int64_t lines, int64_t n) {
  __shared__ float scratch[32];
  for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
    const int64_t base = l * n;
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += dy[base + i] * y[base + i];
    const float dot = blockSum(s, scratch);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dx.set(base + i, y[base + i] * (dy[base + i] - dot));
  }
}

__global__ void gradStridedKernel(Floats dy, Floats y, FloatsOut dx, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t l = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; l < outer * inner; l += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = l / inner * n * inner + l % inner;
    float dot = 0.0f;
    for (int64_t i = 0; i < n; i++) dot += dy[base + i * inner] * y[base + i * inner];
    for (int64_t i = 0; i < n; i++) {
      const int64_t k = base + i * inner;
      dx.set(k, y[k] * (dy[k] - dot));
    }
  }
}

void softmaxGrad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Around g = around(in[1].shape, attrs.number("dim"));
  if (g.inner == 1) {
    launch(ctx, gradRowsKernel, dim3(blocksFor(ctx, g.outer, 1)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsOut(out[0]), g.outer, g.n);
  } else {
    launch(ctx, gradStridedKernel, dim3(blocksFor(ctx, g.outer * g.inner, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]),
           floatsOut(out[0]), g.outer, g.n, g.inner);
  }
}

}  // namespace

REGISTER_CUDA_KERNEL("softmax", softmax, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("softmax_grad", softmaxGrad, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
