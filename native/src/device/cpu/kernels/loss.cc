// Loss kernels (src/interp/kernels/loss.ts): mean cross-entropy over rows (torch's default reduction) and
// mean squared error, with their gradients scaled by the incoming scalar gradient. The means and each row's
// log-sum-exp are accumulated in double, as in the interpreter, so long sums keep f32's precision; the
// cross-entropy's exponentials are f32 (rows.h), its rows split over the device's kernel threads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"
#include "device/cpu/rows.h"
#include "device/cpu/scratch.h"
#include "device/cpu/vectorize.h"

namespace fsm {
namespace {

void checkTarget(int32_t t, int64_t v) {
  if (t < 0 || t >= v) {
    throw std::out_of_range("cross_entropy target " + std::to_string(t) + " is out of range [0, " + std::to_string(v) + ")");
  }
}

/** Rows of logits per chunk over the kernel threads: about 32k logits. */
int64_t rowGrain(int64_t v) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(v, 1)); }

/** Every target in range, checked in row order first, so the error names the first bad one whatever the
 *  threads do. */
void checkTargets(const int32_t* t, int64_t rows, int64_t v) {
  for (int64_t r = 0; r < rows; r++) checkTarget(t[r], v);
}

// cross_entropy(logits[..., V], targets[...] i32): mean over rows of lse(row) − row[target], lse the row's
// log Σ exp, max-subtracted: the exponentials in f32 (vectorized), their sum, the log and the mean in double.
// Rows run over the kernel threads; the mean adds the rows' terms in row order.
void crossEntropy(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  const int32_t* t = in[1].i32();
  const int64_t v = in[0].shape.back();
  const int64_t rows = in[1].numel();
  checkTargets(t, rows, v);
  double* terms = scratch<double>(0, static_cast<size_t>(rows));
  parallelFor(rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    float* e = scratch<float>(1, static_cast<size_t>(v));
    for (int64_t r = r0; r < r1; r++) {
      const float* row = x + r * v;
      const float max = rowMax(row, v);
      expShifted(row, e, v, max);
      terms[r] = static_cast<double>(max) + std::log(sumOf(e, v)) - row[t[r]];
    }
  });
  double sum = 0.0;
  for (int64_t r = 0; r < rows; r++) sum += terms[r];
  out[0].f32()[0] = static_cast<float>(sum / static_cast<double>(rows));
}

FSM_CPU_CLONES void softmaxScaled(float* y, int64_t n, float inv, float scale) {
  for (int64_t c = 0; c < n; c++) y[c] = y[c] * inv * scale;
}

// cross_entropy_grad(dloss, logits, targets): (softmax − onehot(targets)) · dloss / rows: e^(l − max) in f32
// into the output row, scaled by 1/Σ and dloss/rows; the target's element, where softmax − 1 cancels, in
// double from its exponential.
void crossEntropyGrad(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[1].f32();
  const int32_t* t = in[2].i32();
  const int64_t v = in[1].shape.back();
  const int64_t rows = in[2].numel();
  checkTargets(t, rows, v);
  const double scale = in[0].f32()[0] / static_cast<double>(rows);
  float* y = out[0].f32();
  parallelFor(rows, rowGrain(v), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* row = x + r * v;
      float* yr = y + r * v;
      expShifted(row, yr, v, rowMax(row, v));
      const double inv = 1 / sumOf(yr, v);
      const double target = yr[t[r]];
      softmaxScaled(yr, v, static_cast<float>(inv), static_cast<float>(scale));
      yr[t[r]] = static_cast<float>((target * inv - 1.0) * scale);
    }
  });
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

REGISTER_KERNEL("cross_entropy", crossEntropy, FillsOutputs::Yes);
REGISTER_KERNEL("cross_entropy_grad", crossEntropyGrad, FillsOutputs::Yes);
REGISTER_KERNEL("mse_loss", mseLoss, FillsOutputs::Yes);
REGISTER_KERNEL("mse_loss_grad", mseLossGrad, FillsOutputs::Yes);

}  // namespace fsm
