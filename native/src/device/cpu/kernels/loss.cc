// Loss kernels (src/interp/kernels/loss.ts): mean cross-entropy over rows (torch's default reduction) and
// mean squared error, with their gradients scaled by the incoming scalar gradient. The means and each row's
// log-sum-exp are accumulated in double, as in the interpreter, so long sums keep f32's precision.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

void checkTarget(int32_t t, int64_t v) {
  if (t < 0 || t >= v) {
    throw std::out_of_range("cross_entropy target " + std::to_string(t) + " is out of range [0, " + std::to_string(v) + ")");
  }
}

// log Σ exp over one row of v logits, max-subtracted.
double logSumExp(const float* x, int64_t v) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < v; c++) max = std::max(max, static_cast<double>(x[c]));
  double s = 0.0;
  for (int64_t c = 0; c < v; c++) s += std::exp(x[c] - max);
  return max + std::log(s);
}

// cross_entropy(logits[..., V], targets[...] i32): mean over rows of lse(row) − row[target].
void crossEntropy(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  const int32_t* t = in[1].i32();
  const int64_t v = in[0].shape.back();
  const int64_t rows = in[1].numel();
  double sum = 0.0;
  for (int64_t r = 0; r < rows; r++) {
    checkTarget(t[r], v);
    sum += logSumExp(x + r * v, v) - x[r * v + t[r]];
  }
  out[0].f32()[0] = static_cast<float>(sum / static_cast<double>(rows));
}

// cross_entropy_grad(dloss, logits, targets): (softmax − onehot(targets)) · dloss / rows.
void crossEntropyGrad(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[1].f32();
  const int32_t* t = in[2].i32();
  const int64_t v = in[1].shape.back();
  const int64_t rows = in[2].numel();
  const double scale = in[0].f32()[0] / static_cast<double>(rows);
  float* y = out[0].f32();
  for (int64_t r = 0; r < rows; r++) {
    checkTarget(t[r], v);
    const float* row = x + r * v;
    const double lse = logSumExp(row, v);
    for (int64_t c = 0; c < v; c++) y[r * v + c] = static_cast<float>((std::exp(row[c] - lse) - (c == t[r] ? 1.0 : 0.0)) * scale);
  }
}

// mse_loss(a, b): mean of (a − b)².
void mseLoss(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* a = in[0].f32();
  const float* b = in[1].f32();
  const int64_t n = in[0].numel();
  double s = 0.0;
  for (int64_t k = 0; k < n; k++) {
    const double d = static_cast<double>(a[k]) - b[k];
    s += d * d;
  }
  out[0].f32()[0] = static_cast<float>(s / static_cast<double>(n));
}

// mse_loss_grad(dloss, a, b): 2·(a − b)·dloss / numel.
void mseLossGrad(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* a = in[1].f32();
  const float* b = in[2].f32();
  const int64_t n = in[1].numel();
  const double scale = 2.0 * in[0].f32()[0] / static_cast<double>(n);
  float* y = out[0].f32();
  for (int64_t k = 0; k < n; k++) y[k] = static_cast<float>((static_cast<double>(a[k]) - b[k]) * scale);
}

}  // namespace

REGISTER_KERNEL("cross_entropy", crossEntropy);
REGISTER_KERNEL("cross_entropy_grad", crossEntropyGrad);
REGISTER_KERNEL("mse_loss", mseLoss);
REGISTER_KERNEL("mse_loss_grad", mseLossGrad);

}  // namespace fsm
