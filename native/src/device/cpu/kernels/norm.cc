// Normalization kernels over the last dimension, as src/interp/kernels/norm.ts: layer_norm (biased variance,
// as torch) and rms_norm, each with an input gradient and a scale gradient that recompute the row statistics
// from x. Row statistics and the scale gradient's sums run in double, as the interpreter's do; the input
// gradient's sums over dy and its elementwise pass run in f32, as PyTorch's do (normGradRow). All in loops the
// compiler vectorizes (vectorize.h); rows (the scale gradient's columns) split over the device's kernel
// threads, every sum in one order whatever the count.
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

// The row sums are inline (vec::laneSum), compiled into each per-row function's clone; one sum per loop, since
// GCC 12 vectorizes a loop of running sums only when it keeps one array of them.

/** Σx, or Σ(x − mean)² when `squares`, in double, 8 lanes. */
template <bool squares>
inline double rowSum(const float* x, int64_t d, double mean) {
  return vec::laneSum<double, 8>(d, [=](int64_t c) { return squares ? (x[c] - mean) * (x[c] - mean) : static_cast<double>(x[c]); });
}

/** Σg with g = dy·w, or Σg·(x − mean) when `deviations` (x − mean from the mean's two f32 parts, as in
 *  normGradRow), in f32: 16 lanes folded pairwise, within a few f32 ulp of Σ|term|. That moves dx by a few ulp
 *  of its terms: these sums are means subtracted from a row's terms, not results of their own. */
template <bool deviations>
inline float gradSum(const float* dy, const float* x, const float* w, int64_t d, float meanHi, float meanLo) {
  return vec::laneSum<float, 16>(d, [=](int64_t c) { return deviations ? dy[c] * w[c] * ((x[c] - meanHi) - meanLo) : dy[c] * w[c]; });
}

/** One row's mean (0 for rms_norm) and 1/√(var + eps) (layer_norm) or 1/√(mean(x²) + eps) (rms_norm). */
struct RowStats {
  double mean;
  double rstd;
};

FSM_CPU_CLONES RowStats rowStats(const float* x, int64_t d, double eps, bool centered) {
  const double mean = centered ? rowSum<false>(x, d, 0.0) / static_cast<double>(d) : 0.0;
  return {mean, 1 / std::sqrt(rowSum<true>(x, d, mean) / static_cast<double>(d) + eps)};
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

// One row of the input gradient. With g = dy·w and x̂ = (x − mean)·rstd: dx = rstd·(g − mean(g) − x̂·mean(g·x̂))
// (no mean(g) for rms_norm), i.e. dx = a·g − b − (x − mean)·k with a = rstd, b = rstd·mean(g) and
// k = rstd·mean(g·x̂)·rstd. The row's statistics run in double, as everywhere here; the rest in f32, as
// PyTorch's f32 kernel runs all of it (in double, these passes took twice as long as the whole row takes now):
// x − mean is formed from the mean's two f32 parts, exact where x is near the mean, so a row's offset from 0
// costs no digits, and a, b and k are rounded once. Within a few f32 ulp of the double formula's terms.
FSM_CPU_CLONES void normGradRow(const float* dy, const float* x, const float* w, float* dx, int64_t d, double eps, bool centered) {
  const RowStats st = rowStats(x, d, eps, centered);
  const float meanHi = static_cast<float>(st.mean), meanLo = static_cast<float>(st.mean - meanHi);
  const double mg = centered ? gradSum<false>(dy, x, w, d, 0.0f, 0.0f) / static_cast<double>(d) : 0.0;
  const double mgx = st.rstd * gradSum<true>(dy, x, w, d, meanHi, meanLo) / static_cast<double>(d);
  const float a = static_cast<float>(st.rstd), b = static_cast<float>(st.rstd * mg), k = static_cast<float>(st.rstd * mgx * st.rstd);
  for (int64_t c = 0; c < d; c++) dx[c] = a * (dy[c] * w[c]) - b - ((x[c] - meanHi) - meanLo) * k;
}

// Operands dy, x, weight. Rows over the kernel threads.
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
    for (int64_t r = r0; r < r1; r++) normGradRow(dy + r * d, x + r * d, w, dx + r * d, d, eps, centered);
  });
}

/** acc[c] += dy·(x − mean)·rstd down `rows` rows (row stride d, stats[2r], stats[2r + 1] each row's mean and
 *  rstd) over n columns, each column's terms in row order. */
FSM_CPU_CLONES void addScaledRows(double* acc, const float* dy, const float* x, const double* stats, int64_t rows, int64_t d, int64_t n) {
  vec::addRowBlocks(acc, rows, n, [=](int64_t r, int64_t c) { return static_cast<double>(dy[r * d + c]) * (x[r * d + c] - stats[2 * r]) * stats[2 * r + 1]; });
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
    addScaledRows(acc + c0, dy + c0, x + c0, stats, rows, d, c1 - c0);
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
