// The vocabulary-parallel cross-entropy of a tensor-parallel group (Megatron-LM's), in the pieces lowering
// strings between the group's collectives (src/lower/tensor-parallel.ts): each rank holds the logits of its
// 1/parts of the classes, and only row statistics travel, never the logits.
//   fsm_vocab_ce_max(logits [..., Vl]) → [R]: each row's largest logit here (the ranks' are all-gathered);
//   fsm_vocab_ce_sums(logits, targets, maxes [parts, R]) → [2, R]: Σ exp(l − M) over this rank's classes and
//     the target's logit (0 where another rank holds it), M the row's largest over the ranks (all-reduced);
//   fsm_vocab_ce_loss(sums [2, R], maxes) → []: the mean over rows of log S + M − z, the whole loss;
//   fsm_vocab_ce_grad(dloss, logits, targets, sums, maxes) → [..., Vl]: (exp(l − M)/S − onehot)·dloss/R.
// `tensor_rank` (which lowering adds) places this rank's classes at [rank·Vl, (rank+1)·Vl). Sums in double
// where the whole-vocabulary kernel (loss.cc) sums in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

struct Rows {
  int64_t rows, local, first, whole;
};

Rows rowsOf(const Tensor& logits, const Attrs& attrs, int64_t parts) {
  const int64_t local = logits.shape.back();
  const int64_t rank = static_cast<int64_t>(attrs.number("tensor_rank"));
  return {logits.numel() / local, local, rank * local, local * parts};
}

void checkTarget(int32_t t, int64_t v) {
  if (t < 0 || t >= v) throw std::out_of_range("cross_entropy target " + std::to_string(t) + " is out of range [0, " + std::to_string(v) + ")");
}

/** Row r's largest logit over every rank, from the all-gathered per-rank maxima [parts, R]. */
double rowMax(const Tensor& maxes, int64_t r, int64_t rows) {
  const float* m = maxes.f32();
  double best = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < maxes.shape[0]; k++) best = std::max(best, static_cast<double>(m[k * rows + r]));
  return best;
}

void vocabMax(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  const int64_t v = in[0].shape.back();
  float* y = out[0].f32();
  for (int64_t r = 0; r < in[0].numel() / v; r++) y[r] = *std::max_element(x + r * v, x + (r + 1) * v);
}

void vocabSums(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Rows R = rowsOf(in[0], attrs, in[2].shape[0]);
  const float* x = in[0].f32();
  const int32_t* t = in[1].i32();
  float* s = out[0].f32();
  for (int64_t r = 0; r < R.rows; r++) {
    checkTarget(t[r], R.whole);
    const double m = rowMax(in[2], r, R.rows);
    double sum = 0.0;
    for (int64_t c = 0; c < R.local; c++) sum += std::exp(x[r * R.local + c] - m);
    const int64_t c = t[r] - R.first;
    s[r] = static_cast<float>(sum);
    s[R.rows + r] = c >= 0 && c < R.local ? x[r * R.local + c] : 0.0f;
  }
}

void vocabLoss(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t rows = in[0].shape[1];
  const float* s = in[0].f32();
  double sum = 0.0;
  for (int64_t r = 0; r < rows; r++) sum += std::log(static_cast<double>(s[r])) + rowMax(in[1], r, rows) - s[rows + r];
  out[0].f32()[0] = static_cast<float>(sum / static_cast<double>(rows));
}

void vocabGrad(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Rows R = rowsOf(in[1], attrs, in[4].shape[0]);
  const double scale = in[0].f32()[0] / static_cast<double>(R.rows);
  const float* x = in[1].f32();
  const int32_t* t = in[2].i32();
  const float* s = in[3].f32();
  float* y = out[0].f32();
  for (int64_t r = 0; r < R.rows; r++) {
    checkTarget(t[r], R.whole);
    const double m = rowMax(in[4], r, R.rows);
    const double sum = s[r];
    for (int64_t c = 0; c < R.local; c++) {
      const double onehot = c + R.first == t[r] ? 1.0 : 0.0;
      y[r * R.local + c] = static_cast<float>((std::exp(x[r * R.local + c] - m) / sum - onehot) * scale);
    }
  }
}

}  // namespace

REGISTER_KERNEL("fsm_vocab_ce_max", vocabMax, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_vocab_ce_sums", vocabSums, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_vocab_ce_loss", vocabLoss, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_vocab_ce_grad", vocabGrad, FillsOutputs::Yes);

}  // namespace fsm
