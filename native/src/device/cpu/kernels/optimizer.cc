// Optimizer kernels, as src/interp/kernels/optimizer.ts (torch.optim exactly): clipping as
// torch.nn.utils.clip_grad_norm_, SGD with momentum (dampening 0) and Nesterov, Adam with L2 weight decay,
// AdamW with decoupled weight decay. Arithmetic in double, rounded to f32 once per stored value.
#include <algorithm>
#include <cmath>
#include <vector>

#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

/** Parameters per chunk of an update over the device's kernel threads (elementwise: the same bits however
 *  split). */
constexpr int64_t kGrain = 16384;

/** Added to the norm before dividing, as torch's clip_grad_norm_ (CLIP_EPS in src/graph/ops/clip_coef.ts). */
constexpr double kClipEps = 1e-6;

void sumSquares(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  const int64_t n = in[0].numel();
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += static_cast<double>(x[i]) * x[i];
  out[0].f32()[0] = static_cast<float>(s);
}

// Operands: n scalar sums of squares; √Σ.
void globalNorm(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  double s = 0;
  for (const Tensor& t : in) s += t.f32()[0];
  out[0].f32()[0] = static_cast<float>(std::sqrt(s));
}

void clipCoef(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  out[0].f32()[0] = static_cast<float>(std::min(1.0, attrs.number("max_norm") / (in[0].f32()[0] + kClipEps)));
}

void stepIncrement(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  out[0].f32()[0] = static_cast<float>(in[0].f32()[0] + 1.0);
}

/** The clipping factor: the last operand when the `clip` attribute is set, else 1. */
double clipOf(const std::vector<Tensor>& in, const Attrs& attrs) {
  return attrs.boolean("clip") ? in.back().f32()[0] : 1.0;
}

// Operands param, grad, [momentum_buffer when momentum ≠ 0], [clip]; outputs the new param (and buffer).
// g = grad·clip + wd·p; buf = μ·buf + g (buf starts at 0, so the first step sets buf = g as torch does);
// p −= lr·(nesterov ? g + μ·buf : buf), or lr·g without momentum.
void sgdUpdate(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double lr = attrs.number("lr"), mu = attrs.number("momentum"), wd = attrs.number("weight_decay");
  const bool nesterov = attrs.boolean("nesterov");
  const double clip = clipOf(in, attrs);
  const float* p = in[0].f32();
  const float* g = in[1].f32();
  const float* buf = mu != 0 ? in[2].f32() : nullptr;
  float* newP = out[0].f32();
  float* newBuf = buf ? out[1].f32() : nullptr;
  parallelFor(in[0].numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const double gi = g[i] * clip + wd * p[i];
      double step = gi;
      if (buf) {
        const double b = mu * buf[i] + gi;
        newBuf[i] = static_cast<float>(b);
        step = nesterov ? gi + mu * b : b;
      }
      newP[i] = static_cast<float>(p[i] - lr * step);
    }
  });
}

// Operands param, grad, exp_avg, exp_avg_sq, step (already incremented), [clip]; outputs p, m, v.
// m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²; p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + eps).
// Adam adds wd·p to g; AdamW (decoupled) first scales p by (1 − lr·wd).
void adamUpdate(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double lr = attrs.number("lr"), b1 = attrs.number("beta1"), b2 = attrs.number("beta2");
  const double eps = attrs.number("eps"), wd = attrs.number("weight_decay");
  const bool decoupled = attrs.boolean("decoupled");
  const double clip = clipOf(in, attrs);
  const double t = in[4].f32()[0];
  const double bc1 = 1 - std::pow(b1, t), sqrtBc2 = std::sqrt(1 - std::pow(b2, t));
  const float* p = in[0].f32();
  const float* g = in[1].f32();
  const float* m = in[2].f32();
  const float* v = in[3].f32();
  float* newP = out[0].f32();
  float* newM = out[1].f32();
  float* newV = out[2].f32();
  parallelFor(in[0].numel(), kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      double gi = g[i] * clip;
      double pi = p[i];
      if (decoupled) pi *= 1 - lr * wd;
      else gi += wd * p[i];
      const double mi = b1 * m[i] + (1 - b1) * gi;
      const double vi = b2 * v[i] + (1 - b2) * gi * gi;
      newM[i] = static_cast<float>(mi);
      newV[i] = static_cast<float>(vi);
      newP[i] = static_cast<float>(pi - (lr / bc1) * (mi / (std::sqrt(vi) / sqrtBc2 + eps)));
    }
  });
}

}  // namespace

REGISTER_KERNEL("sum_squares", sumSquares, FillsOutputs::Yes);
REGISTER_KERNEL("global_norm", globalNorm, FillsOutputs::Yes);
REGISTER_KERNEL("clip_coef", clipCoef, FillsOutputs::Yes);
REGISTER_KERNEL("step_increment", stepIncrement, FillsOutputs::Yes);
REGISTER_KERNEL("sgd_update", sgdUpdate, FillsOutputs::Yes);
REGISTER_KERNEL("adam_update", adamUpdate, FillsOutputs::Yes);

}  // namespace fsm
