// Matrix kernels (src/interp/kernels/matmul.ts) on the project's sgemm: batched matmul with broadcast batch
// dims, and linear (weights in PyTorch's [out, in] layout) with its two gradients. sgemm accumulates in f32,
// not double as the interpreter does; at these sizes that stays well inside the parity tolerance.
#include <climits>
#include <stdexcept>
#include <string>

#include "device/cpu/gemm.h"
#include "device/cpu/kernels/broadcast.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

// sgemm takes int dimensions.
int gemmDim(int64_t d) {
  if (d > INT_MAX) throw std::invalid_argument("matrix dimension " + std::to_string(d) + " is too large for sgemm");
  return static_cast<int>(d);
}

// [..., n, k] × [..., k, m] → [..., n, m]: one sgemm per index of the output's batch dims, each operand's
// matrix found through its broadcast batch strides.
void matmul(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor& a = in[0];
  const Tensor& b = in[1];
  const std::vector<int64_t>& shape = out[0].shape;
  const int64_t n = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1], m = b.shape[b.rank() - 1];
  const std::vector<int64_t> batch(shape.begin(), shape.end() - 2);
  const std::vector<int64_t> aBatch(a.shape.begin(), a.shape.end() - 2), bBatch(b.shape.begin(), b.shape.end() - 2);
  const float* ad = a.f32();
  const float* bd = b.f32();
  float* y = out[0].f32();
  int64_t count = 1;
  for (int64_t d : batch) count *= d;
  StridedWalk w(batch, {broadcastStrides(aBatch, batch), broadcastStrides(bBatch, batch)});
  for (int64_t t = 0; t < count; t++, w.next()) {
    sgemm(false, false, gemmDim(n), gemmDim(m), gemmDim(k), 1.0f, ad + w.offset(0) * n * k, gemmDim(k),
          bd + w.offset(1) * k * m, gemmDim(m), 0.0f, y + t * n * m, gemmDim(m));
  }
}

// linear(x, w[, bias]): y = x·Wᵀ + b over the last dim, x viewed as [rows, in].
void linear(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor& w = in[1];
  const int64_t outF = w.shape[0], inF = w.shape[1];
  const int64_t rows = in[0].numel() / inF;
  float* y = out[0].f32();
  sgemm(false, true, gemmDim(rows), gemmDim(outF), gemmDim(inF), 1.0f, in[0].f32(), gemmDim(inF), w.f32(),
        gemmDim(inF), 0.0f, y, gemmDim(outF));
  if (in.size() > 2) {
    const float* bias = in[2].f32();
    for (int64_t r = 0; r < rows; r++)
      for (int64_t o = 0; o < outF; o++) y[r * outF + o] += bias[o];
  }
}

// linear_grad_input(dy, w): dx = dy·W, [rows, out] × [out, in].
void linearGradInput(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const Tensor& w = in[1];
  const int64_t outF = w.shape[0], inF = w.shape[1];
  const int64_t rows = in[0].numel() / outF;
  sgemm(false, false, gemmDim(rows), gemmDim(inF), gemmDim(outF), 1.0f, in[0].f32(), gemmDim(outF), w.f32(),
        gemmDim(inF), 0.0f, out[0].f32(), gemmDim(inF));
}

// linear_grad_weight(dy, x): dW = dyᵀ·x, [out, rows] × [rows, in].
void linearGradWeight(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t outF = out[0].shape[0], inF = out[0].shape[1];
  const int64_t rows = in[0].numel() / outF;
  sgemm(true, false, gemmDim(outF), gemmDim(inF), gemmDim(rows), 1.0f, in[0].f32(), gemmDim(outF), in[1].f32(),
        gemmDim(inF), 0.0f, out[0].f32(), gemmDim(inF));
}

}  // namespace

REGISTER_KERNEL("matmul", matmul, FillsOutputs::Yes);
REGISTER_KERNEL("linear", linear, FillsOutputs::Yes);
REGISTER_KERNEL("linear_grad_input", linearGradInput, FillsOutputs::Yes);
REGISTER_KERNEL("linear_grad_weight", linearGradWeight, FillsOutputs::Yes);

}  // namespace fsm
