// Elementwise kernels on the CUDA device, as device/cpu/kernels/elementwise.cc: the broadcasting binary ops
// (add, sub, mul, div in f32, so they agree with the CPU bit for bit), scale and div_grad_b (in double,
// rounded once, as the CPU), and fill. Grid-stride loops; a broadcast operand is read through an index map.
#include "device/cuda/device_code.h"
#include "device/cuda/strided.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

enum class BinaryOp { Add, Sub, Mul, Div };

template <BinaryOp op>
FSM_HD float apply(float a, float b) {
  if (op == BinaryOp::Add) return a + b;
  if (op == BinaryOp::Sub) return a - b;
  if (op == BinaryOp::Mul) return a * b;
  return a / b;
}

template <BinaryOp op>
__global__ void binarySame(Floats a, Floats b, FloatsOut y, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, apply<op>(a[k], b[k]));
  }
}

template <BinaryOp op>
__global__ void binaryBroadcast(Floats a, Floats b, FloatsOut y, int64_t n, IndexMap map) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    map.offsets(k, ia, ib);
    y.set(k, apply<op>(a[ia], b[ib]));
  }
}

constexpr int kThreads = 256;

template <BinaryOp op>
void binary(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const std::vector<int64_t>& shape = out[0].shape;
  const int64_t n = out[0].numel();
  const dim3 grid(blocksFor(ctx, n, kThreads));
  if (in[0].shape == shape && in[1].shape == shape) {
    launch(ctx, binarySame<op>, grid, dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsOut(out[0]), n);
    return;
  }
  const IndexMap map = indexMap(shape, broadcastStrides(in[0].shape, shape), broadcastStrides(in[1].shape, shape));
  launch(ctx, binaryBroadcast<op>, grid, dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsOut(out[0]), n, map);
}

__global__ void scaleKernel(Floats x, FloatsOut y, int64_t n, double factor) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, static_cast<float>(static_cast<double>(x[k]) * factor));
  }
}

void scale(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t n = in[0].numel();
  launch(ctx, scaleKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), n, attrs.number("factor"));
}

__global__ void fillKernel(FloatsOut y, int64_t n, float value) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) y.set(k, value);
}

// Its shape attribute is not passed to kernels; the output arrives with that shape.
void fill(const KernelContext& ctx, const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t n = out[0].numel();
  launch(ctx, fillKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsOut(out[0]), n, static_cast<float>(attrs.number("value")));
}

// div_grad_b(dy, a, b) = −dy·a/b² at the broadcast shape of a and b (dy and the output have it).
__global__ void divGradBKernel(Floats g, Floats a, Floats b, FloatsOut y, int64_t n, IndexMap map) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ia, ib;
    map.offsets(k, ia, ib);
    const double bv = b[ib];
    y.set(k, static_cast<float>(-static_cast<double>(g[k]) * a[ia] / (bv * bv)));
  }
}

void divGradB(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const std::vector<int64_t>& shape = out[0].shape;
  const int64_t n = out[0].numel();
  const IndexMap map = indexMap(shape, broadcastStrides(in[1].shape, shape), broadcastStrides(in[2].shape, shape));
  launch(ctx, divGradBKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsIn(in[2]),
         floatsOut(out[0]), n, map);
}

}  // namespace

REGISTER_CUDA_KERNEL("add", binary<BinaryOp::Add>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("sub", binary<BinaryOp::Sub>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("mul", binary<BinaryOp::Mul>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("div", binary<BinaryOp::Div>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("scale", scale, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fill", fill, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("div_grad_b", divGradB, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
