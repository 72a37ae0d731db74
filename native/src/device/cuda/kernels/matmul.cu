// Matrix kernels on the CUDA device, as device/cpu/kernels/matmul.cc: batched matmul with broadcast batch dims,
// and linear (weights in PyTorch's [out, in] layout) with its two gradients — every product one cuBLAS call
// (blas.h, f32 accumulation) on operands of any float storage; a bias is broadcast into the output first and
// the product added onto it (β = 1), so a 16-bit output is rounded once.
#include "device/cuda/blas.h"
#include "device/cuda/device_code.h"
#include "device/cuda/strided.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

/** A row-major operand for Blas: `ld` at least 1 (cuBLAS refuses 0 even where nothing is read, k = 0). */
Matrix matrixOf(const Tensor& t, int64_t ld, int64_t stride = 0, int64_t offset = 0) {
  const int type = floatTypeOf(t, "matrix operand");
  return {static_cast<const char*>(t.data) + offset * static_cast<int64_t>(elementBytes(t.dtype)), type, std::max<int64_t>(ld, 1), stride};
}

// y[r, c] = bias[c] over [rows, cols]: the C a β = 1 product adds onto.
__global__ void broadcastRows(Floats bias, FloatsOut y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, bias[k % cols]);
  }
}

/** How a broadcast batch operand strides through the output's `count` batch members: a whole matrix per member
 *  (it has them all), 0 (one matrix shared by all), or -1 (partly broadcast: neither). */
int64_t batchStride(const std::vector<int64_t>& batch, int64_t count, int64_t matrix) {
  int64_t members = 1;
  for (int64_t d : batch) members *= d;
  return members == count ? matrix : members == 1 ? 0 : -1;
}

// [..., n, k] × [..., k, m] → [..., n, m]: one strided-batched gemm when each operand's batch is full or fully
// broadcast; otherwise one gemm per batch member, each operand's matrix found through its broadcast strides.
void matmul(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  if (a.rank() < 2 || b.rank() < 2) throw std::invalid_argument("matmul operands must have at least 2 dimensions");
  const std::vector<int64_t>& shape = out[0].shape;
  const int64_t n = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1], m = b.shape[b.rank() - 1];
  const std::vector<int64_t> batch(shape.begin(), shape.end() - 2);
  const std::vector<int64_t> aBatch(a.shape.begin(), a.shape.end() - 2), bBatch(b.shape.begin(), b.shape.end() - 2);
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  if (count == 0 || n == 0 || m == 0) return;
  const int yType = floatTypeOf(out[0], "matmul output");
  const int64_t sa = batchStride(aBatch, count, n * k), sb = batchStride(bBatch, count, k * m);
  if (sa >= 0 && sb >= 0) {
    ctx.blas->gemm(false, false, n, m, k, 1.0f, matrixOf(a, k, sa), matrixOf(b, m, sb), 0.0f, out[0].data, yType, m, n * m, count);
    return;
  }
  const IndexMap map = indexMap(batch, broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch));
  char* y = static_cast<char*>(out[0].data);
  for (int64_t t = 0; t < count; t++) {
    int64_t ia, ib;
    map.offsets(t, ia, ib);
    ctx.blas->gemm(false, false, n, m, k, 1.0f, matrixOf(a, k, 0, ia * n * k), matrixOf(b, m, 0, ib * k * m), 0.0f,
                   y + t * n * m * static_cast<int64_t>(elementBytes(out[0].dtype)), yType, m, 0, 1);
  }
}

// linear(x, w[, bias]): y = x·Wᵀ + b over the last dim, x viewed as [rows, in].
void linear(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor& w = in[1];
  const int64_t outF = w.shape[0], inF = w.shape[1];
  const int64_t rows = inF == 0 ? out[0].numel() / std::max<int64_t>(outF, 1) : in[0].numel() / inF;
  if (rows == 0 || outF == 0) return;
  const FloatsOut y = floatsOut(out[0], "linear output");
  float beta = 0.0f;
  if (in.size() > 2) {
    launch(ctx, broadcastRows, dim3(blocksFor(ctx, rows * outF, kThreads)), dim3(kThreads), 0, floatsIn(in[2], "linear bias"), y, rows, outF);
    beta = 1.0f;
  }
  ctx.blas->gemm(false, true, rows, outF, inF, 1.0f, matrixOf(in[0], inF), matrixOf(w, inF), beta, y.data, y.type, outF, 0, 1);
}

// linear_grad_input(dy, w): dx = dy·W, [rows, out] × [out, in].
void linearGradInput(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor& w = in[1];
  const int64_t outF = w.shape[0], inF = w.shape[1];
  const int64_t rows = outF == 0 ? out[0].numel() / std::max<int64_t>(inF, 1) : in[0].numel() / outF;
  ctx.blas->gemm(false, false, rows, inF, outF, 1.0f, matrixOf(in[0], outF), matrixOf(w, inF), 0.0f, out[0].data,
                 floatTypeOf(out[0], "linear_grad_input output"), inF, 0, 1);
}

// linear_grad_weight(dy, x): dW = dyᵀ·x, [out, rows] × [rows, in].
void linearGradWeight(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t outF = out[0].shape[0], inF = out[0].shape[1];
  const int64_t rows = outF == 0 ? 0 : in[0].numel() / outF;
  ctx.blas->gemm(true, false, outF, inF, rows, 1.0f, matrixOf(in[0], outF), matrixOf(in[1], inF), 0.0f, out[0].data,
                 floatTypeOf(out[0], "linear_grad_weight output"), inF, 0, 1);
}

}  // namespace

REGISTER_CUDA_KERNEL("matmul", matmul, nullptr, UsesBlas::Yes, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("linear", linear, nullptr, UsesBlas::Yes, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("linear_grad_input", linearGradInput, nullptr, UsesBlas::Yes, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("linear_grad_weight", linearGradWeight, nullptr, UsesBlas::Yes, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
