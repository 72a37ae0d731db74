// Optimizer kernels, as src/interp/kernels/optimizer.ts (torch.optim's formulas): clipping as
// torch.nn.utils.clip_grad_norm_, SGD with momentum (dampening 0) and Nesterov, Adam with L2 weight decay,
// AdamW with decoupled weight decay. The updates run in f32 in torch.optim's order of operations, as PyTorch's
// f32 kernels do, in loops the compiler vectorizes (vectorize.h): they are memory-bound, and double arithmetic
// with a scalar square root and divide per element ran at a seventh of the memory's speed. Within a few f32
// ulp of the interpreter's double. Norms sum squares in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"
#include "device/cpu/scratch.h"
#include "device/cpu/vectorize.h"

namespace fsm {
namespace {

/** Parameters per chunk of an update over the device's kernel threads (elementwise: the same bits however
 *  split). */
constexpr int64_t kGrain = 16384;

/** Added to the norm before dividing, as torch's clip_grad_norm_ (CLIP_EPS in src/graph/ops/clip_coef.ts). */
constexpr double kClipEps = 1e-6;

/** Elements per block of sum_squares: each block is summed on its own and the blocks' sums are added in block
 *  order, so the result does not depend on how the blocks are split over the kernel threads. */
constexpr int64_t kSquaresBlock = 8192;

/** Σ x² in double, in 16 lanes. */
FSM_CPU_CLONES double squaresOf(const float* x, int64_t n) {
  return vec::laneSum<double, 16>(n, [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
}

void sumSquares(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  const int64_t n = in[0].numel();
  const int64_t blocks = (n + kSquaresBlock - 1) / kSquaresBlock;
  double* partial = scratch<double>(0, static_cast<size_t>(blocks));
  parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) partial[b] = squaresOf(x + b * kSquaresBlock, std::min(kSquaresBlock, n - b * kSquaresBlock));
  });
  double s = 0;
  for (int64_t b = 0; b < blocks; b++) s += partial[b];
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
float clipOf(const std::vector<Tensor>& in, const Attrs& attrs) {
  return attrs.boolean("clip") ? in.back().f32()[0] : 1.0f;
}

// The update loops run in place (the executor gives an update its parameter's and state's own bytes as
// outputs) or into separate outputs; each element reads only its own index either way (FSM_IVDEP).

/** SGD's constants in f32, as torch's f32 kernels take their Python scalars. */
struct SgdConstants {
  float lr, mu, wd, clip;
  bool nesterov;
};

// g = grad·clip + wd·p; buf = μ·buf + g; p −= lr·(nesterov ? g + μ·buf : buf), or lr·g without a buffer.
FSM_CPU_CLONES void sgdRange(const float* p, const float* g, const float* buf, float* newP, float* newBuf, int64_t n, const SgdConstants& constants) {
  const SgdConstants k = constants;  // a copy no store can change: its fields stay in registers
  if (buf == nullptr) {
FSM_IVDEP
    for (int64_t i = 0; i < n; i++) newP[i] = p[i] - k.lr * (g[i] * k.clip + k.wd * p[i]);
    return;
  }
FSM_IVDEP
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i] * k.clip + k.wd * p[i];
    const float b = k.mu * buf[i] + gi;
    newBuf[i] = b;
    newP[i] = p[i] - k.lr * (k.nesterov ? gi + k.mu * b : b);
  }
}

// Operands param, grad, [momentum_buffer when momentum ≠ 0], [clip]; outputs the new param (and buffer).
// The buffer starts at 0, so the first step sets buf = g as torch does.
void sgdUpdate(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double mu = attrs.number("momentum");
  const SgdConstants k{static_cast<float>(attrs.number("lr")), static_cast<float>(mu), static_cast<float>(attrs.number("weight_decay")), clipOf(in, attrs), attrs.boolean("nesterov")};
  const float* p = in[0].f32();
  const float* g = in[1].f32();
  const float* buf = mu != 0 ? in[2].f32() : nullptr;
  float* newP = out[0].f32();
  float* newBuf = buf ? out[1].f32() : nullptr;
  parallelFor(in[0].numel(), kGrain, [&](int64_t i0, int64_t i1) {
    sgdRange(p + i0, g + i0, buf ? buf + i0 : nullptr, newP + i0, newBuf ? newBuf + i0 : nullptr, i1 - i0, k);
  });
}

/** Adam's constants in f32: scalars that torch.optim computes in double (1 − β, lr/(1 − β1^t), √(1 − β2^t)),
 *  rounded once, as its f32 kernels take them. */
struct AdamConstants {
  float b2, oneMinusB1, oneMinusB2, eps, wd, decay, stepSize, sqrtBc2, clip;
  bool decoupled;
};

// torch.optim.Adam's single-tensor and foreach order: g = grad·clip (+ wd·p for Adam; AdamW first scales p by
// 1 − lr·wd); m.lerp_(g, 1 − β1); v = β2·v + (1 − β2)·g·g; p −= stepSize·(m / (√v / √bc2 + eps)). lerp as
// torch computes it: from m for a weight below ½, else from g.
FSM_CPU_CLONES void adamRange(const float* p, const float* g, const float* m, const float* v, float* newP, float* newM, float* newV, int64_t n, const AdamConstants& constants) {
  const AdamConstants k = constants;  // a copy no store can change: the branch on `decoupled` leaves the loop
  const bool fromM = k.oneMinusB1 < 0.5f;
FSM_IVDEP
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i] * k.clip;
    float pi = p[i];
    if (k.decoupled) pi *= k.decay;
    else gi += k.wd * p[i];
    const float d = gi - m[i];
    const float mi = vec::select(fromM, m[i] + k.oneMinusB1 * d, gi - d * (1.0f - k.oneMinusB1));
    const float vi = k.b2 * v[i] + k.oneMinusB2 * gi * gi;
    newM[i] = mi;
    newV[i] = vi;
    newP[i] = pi - k.stepSize * (mi / (std::sqrt(vi) / k.sqrtBc2 + k.eps));
  }
}

// Operands param, grad, exp_avg, exp_avg_sq, step (already incremented), [clip]; outputs p, m, v.
void adamUpdate(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double lr = attrs.number("lr"), b1 = attrs.number("beta1"), b2 = attrs.number("beta2");
  const double wd = attrs.number("weight_decay");
  const double t = in[4].f32()[0];
  const AdamConstants k{
      static_cast<float>(b2),
      static_cast<float>(1 - b1),
      static_cast<float>(1 - b2),
      static_cast<float>(attrs.number("eps")),
      static_cast<float>(wd),
      static_cast<float>(1 - lr * wd),
      static_cast<float>(lr / (1 - std::pow(b1, t))),
      static_cast<float>(std::sqrt(1 - std::pow(b2, t))),
      clipOf(in, attrs),
      attrs.boolean("decoupled"),
  };
  const float* p = in[0].f32();
  const float* g = in[1].f32();
  const float* m = in[2].f32();
  const float* v = in[3].f32();
  float* newP = out[0].f32();
  float* newM = out[1].f32();
  float* newV = out[2].f32();
  parallelFor(in[0].numel(), kGrain, [&](int64_t i0, int64_t i1) {
    adamRange(p + i0, g + i0, m + i0, v + i0, newP + i0, newM + i0, newV + i0, i1 - i0, k);
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
