// Normalization kernels over the last dimension, as src/interp/kernels/norm.ts: layer_norm (biased variance,
// as torch) and rms_norm, each with an input gradient and a scale gradient that recompute the row statistics
// from x. Statistics and sums run in double, as the interpreter's do, so results round to f32 once; rows (the
// scale gradient's columns) split over the device's kernel threads, every sum in one order whatever the count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"
#include "device/cpu/scratch.h"
#include "device/cpu/vectorize.h"

namespace fsm {
namespace {

/** Rows per chunk over the kernel threads: about 16k elements. */
int64_t rowGrain(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1)); }

/** One row's mean (0 for rms_norm) and 1/√(var + eps) (layer_norm) or 1/√(mean(x²) + eps) (rms_norm). Sums
 *  in double with four running sums (a fixed order; a single chain of dependent adds is what limited it). */
struct RowStats {
  double mean;
  double rstd;
};

RowStats rowStats(const float* x, int64_t d, double eps, bool centered) {
  double mu = 0;
  if (centered) {
    double s[4] = {0, 0, 0, 0};
    int64_t c = 0;
    for (; c + 4 <= d; c += 4)
      for (int k = 0; k < 4; k++) s[k] += x[c + k];
    for (; c < d; c++) s[0] += x[c];
    mu = ((s[0] + s[1]) + (s[2] + s[3])) / static_cast<double>(d);
  }
  double v[4] = {0, 0, 0, 0};
  int64_t c = 0;
  for (; c + 4 <= d; c += 4)
    for (int k = 0; k < 4; k++) v[k] += (x[c + k] - mu) * (x[c + k] - mu);
  for (; c < d; c++) v[0] += (x[c] - mu) * (x[c] - mu);
  return {mu, 1 / std::sqrt(((v[0] + v[1]) + (v[2] + v[3])) / static_cast<double>(d) + eps)};
}

// y = (x − mean)·rstd·w (+ b), each element in double and rounded once.
FSM_CPU_CLONES void normRow(const float* x, const float* w, const float* b, float* y, int64_t d, double mean, double rstd) {
  if (b)
    for (int64_t c = 0; c < d; c++) y[c] = static_cast<float>((x[c] - mean) * rstd * w[c] + b[c]);
  else
    for (int64_t c = 0; c < d; c++) y[c] = static_cast<float>((x[c] - mean) * rstd * w[c] + 0.0);
}

// Operands x, weight, [bias]: y = x̂·w + b. Rows over the kernel threads.
template <bool centered>
void normForward(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[0].shape.back();
  const int64_t rows = in[0].numel() / d;
  const double eps = attrs.number("eps");
  const float* x = in[0].f32();
  const float* w = in[1].f32();
  const float* b = in.size() > 2 ? in[2].f32() : nullptr;
  float* y = out[0].f32();
  parallelFor(rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const RowStats st = rowStats(x + r * d, d, eps, centered);
      normRow(x + r * d, w, b, y + r * d, d, st.mean, st.rstd);
    }
  });
}

// dx = rstd·(dy·w − mg − x̂·mgx), x̂ = (x − mean)·rstd.
FSM_CPU_CLONES void normGradRow(const float* dy, const float* x, const float* w, float* dx, int64_t d, double mean, double rstd, double mg, double mgx) {
  for (int64_t c = 0; c < d; c++) {
    const double xh = (x[c] - mean) * rstd;
    dx[c] = static_cast<float>(rstd * (static_cast<double>(dy[c]) * w[c] - mg - xh * mgx));
  }
}

// Operands dy, x, weight. With g = dy·w and x̂ = (x − mean)·rstd: layer_norm dx = rstd·(g − mean(g) −
// x̂·mean(g·x̂)); rms_norm (no centering) dx = rstd·(g − x̂·mean(g·x̂)). Rows over the kernel threads.
template <bool centered>
void normGradInput(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = in[1].numel() / d;
  const double eps = attrs.number("eps");
  const float* dy = in[0].f32();
  const float* x = in[1].f32();
  const float* w = in[2].f32();
  float* dx = out[0].f32();
  parallelFor(rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = x + r * d;
      const float* gr = dy + r * d;
      const RowStats st = rowStats(xr, d, eps, centered);
      double sg[4] = {0, 0, 0, 0}, sgx[4] = {0, 0, 0, 0};
      int64_t c = 0;
      for (; c + 4 <= d; c += 4) {
        for (int k = 0; k < 4; k++) {
          const double g = static_cast<double>(gr[c + k]) * w[c + k];
          sg[k] += g;
          sgx[k] += g * (xr[c + k] - st.mean) * st.rstd;
        }
      }
      for (; c < d; c++) {
        const double g = static_cast<double>(gr[c]) * w[c];
        sg[0] += g;
        sgx[0] += g * (xr[c] - st.mean) * st.rstd;
      }
      const double mg = centered ? ((sg[0] + sg[1]) + (sg[2] + sg[3])) / static_cast<double>(d) : 0.0;
      const double mgx = ((sgx[0] + sgx[1]) + (sgx[2] + sgx[3])) / static_cast<double>(d);
      normGradRow(gr, xr, w, dx + r * d, d, st.mean, st.rstd, mg, mgx);
    }
  });
}

// acc[c] += dy·(x − mean)·rstd over columns [c0, c1) of one row.
FSM_CPU_CLONES void addScaledRow(double* acc, const float* dy, const float* x, int64_t n, double mean, double rstd) {
  for (int64_t c = 0; c < n; c++) acc[c] += static_cast<double>(dy[c]) * (x[c] - mean) * rstd;
}

// Operands dy, x: dw = Σ_rows dy·x̂, accumulated in double across rows in row order: the rows' statistics
// first (rows over the kernel threads), then the sums (columns over the kernel threads).
template <bool centered>
void normGradWeight(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t d = in[1].shape.back();
  const int64_t rows = in[1].numel() / d;
  const double eps = attrs.number("eps");
  const float* dy = in[0].f32();
  const float* x = in[1].f32();
  double* stats = scratch<double>(0, static_cast<size_t>(2 * rows));
  parallelFor(rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const RowStats st = rowStats(x + r * d, d, eps, centered);
      stats[2 * r] = st.mean;
      stats[2 * r + 1] = st.rstd;
    }
  });
  double* acc = scratch<double>(1, static_cast<size_t>(d));
  std::fill(acc, acc + d, 0.0);
  parallelFor(d, std::max<int64_t>(16, 65536 / std::max<int64_t>(rows, 1)), [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; r++) addScaledRow(acc + c0, dy + r * d + c0, x + r * d + c0, c1 - c0, stats[2 * r], stats[2 * r + 1]);
  });
  float* dw = out[0].f32();
  for (int64_t c = 0; c < d; c++) dw[c] = static_cast<float>(acc[c]);
}

}  // namespace

REGISTER_KERNEL("layer_norm", normForward<true>, FillsOutputs::Yes);
REGISTER_KERNEL("layer_norm_grad_input", normGradInput<true>, FillsOutputs::Yes);
REGISTER_KERNEL("layer_norm_grad_weight", normGradWeight<true>, FillsOutputs::Yes);
REGISTER_KERNEL("rms_norm", normForward<false>, FillsOutputs::Yes);
REGISTER_KERNEL("rms_norm_grad_input", normGradInput<false>, FillsOutputs::Yes);
REGISTER_KERNEL("rms_norm_grad_weight", normGradWeight<false>, FillsOutputs::Yes);

}  // namespace fsm
