// Normalization kernels over the last dimension, as src/interp/kernels/norm.ts: layer_norm (biased variance,
// as torch) and rms_norm, each with an input gradient and a scale gradient that recompute the row statistics
// from x. Statistics and sums run in double, as the interpreter's do, so results round to f32 once.
#include <cmath>
#include <vector>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

/** One row's mean (0 for rms_norm) and 1/√(var + eps) (layer_norm) or 1/√(mean(x²) + eps) (rms_norm). */
struct RowStats {
  double mean;
  double rstd;
};

RowStats rowStats(const float* x, int64_t d, double eps, bool centered) {
  double mu = 0;
  if (centered) {
    for (int64_t c = 0; c < d; c++) mu += x[c];
    mu /= static_cast<double>(d);
  }
  double v = 0;
  for (int64_t c = 0; c < d; c++) v += (x[c] - mu) * (x[c] - mu);
  return {mu, 1 / std::sqrt(v / static_cast<double>(d) + eps)};
}

// Operands x, weight, [bias]: y = x̂·w + b.
template <bool centered>
void normForward(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[0].shape.back();
  const int64_t rows = in[0].numel() / d;
  const double eps = attrs.number("eps");
  const float* x = in[0].f32();
  const float* w = in[1].f32();
  const float* b = in.size() > 2 ? in[2].f32() : nullptr;
  float* y = out[0].f32();
  for (int64_t r = 0; r < rows; r++) {
    const RowStats st = rowStats(x + r * d, d, eps, centered);
    for (int64_t c = 0; c < d; c++) {
      const double v = (x[r * d + c] - st.mean) * st.rstd * w[c] + (b ? b[c] : 0.0);
      y[r * d + c] = static_cast<float>(v);
    }
  }
}

// Operands dy, x, weight. With g = dy·w and x̂ = (x − mean)·rstd: layer_norm dx = rstd·(g − mean(g) −
// x̂·mean(g·x̂)); rms_norm (no centering) dx = rstd·(g − x̂·mean(g·x̂)).
template <bool centered>
void normGradInput(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = in[1].numel() / d;
  const double eps = attrs.number("eps");
  const float* dy = in[0].f32();
  const float* x = in[1].f32();
  const float* w = in[2].f32();
  float* dx = out[0].f32();
  for (int64_t r = 0; r < rows; r++) {
    const RowStats st = rowStats(x + r * d, d, eps, centered);
    double sg = 0, sgx = 0;
    for (int64_t c = 0; c < d; c++) {
      const double g = static_cast<double>(dy[r * d + c]) * w[c];
      sg += g;
      sgx += g * (x[r * d + c] - st.mean) * st.rstd;
    }
    const double mg = centered ? sg / static_cast<double>(d) : 0.0;
    const double mgx = sgx / static_cast<double>(d);
    for (int64_t c = 0; c < d; c++) {
      const double xh = (x[r * d + c] - st.mean) * st.rstd;
      dx[r * d + c] = static_cast<float>(st.rstd * (static_cast<double>(dy[r * d + c]) * w[c] - mg - xh * mgx));
    }
  }
}

// Operands dy, x: dw = Σ_rows dy·x̂, accumulated in double across rows.
template <bool centered>
void normGradWeight(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = in[1].numel() / d;
  const double eps = attrs.number("eps");
  const float* dy = in[0].f32();
  const float* x = in[1].f32();
  std::vector<double> acc(static_cast<size_t>(d), 0.0);
  for (int64_t r = 0; r < rows; r++) {
    const RowStats st = rowStats(x + r * d, d, eps, centered);
    for (int64_t c = 0; c < d; c++) acc[c] += static_cast<double>(dy[r * d + c]) * (x[r * d + c] - st.mean) * st.rstd;
  }
  float* dw = out[0].f32();
  for (int64_t c = 0; c < d; c++) dw[c] = static_cast<float>(acc[c]);
}

}  // namespace

REGISTER_KERNEL("layer_norm", normForward<true>);
REGISTER_KERNEL("layer_norm_grad_input", normGradInput<true>);
REGISTER_KERNEL("layer_norm_grad_weight", normGradWeight<true>);
REGISTER_KERNEL("rms_norm", normForward<false>);
REGISTER_KERNEL("rms_norm_grad_input", normGradInput<false>);
REGISTER_KERNEL("rms_norm_grad_weight", normGradWeight<false>);

}  // namespace fsm
