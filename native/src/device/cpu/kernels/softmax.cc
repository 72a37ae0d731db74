// Softmax along any dimension (max-subtracted) and its gradient from the output, as
// src/interp/kernels/softmax.ts; exponentials and sums in double.
#include <cmath>
#include <limits>
#include <vector>

#include "core/strides.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

void softmax(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AroundAxis g = aroundAxis(in[0].shape, attrs.number("dim"));
  const float* x = in[0].f32();
  float* y = out[0].f32();
  std::vector<double> e(static_cast<size_t>(g.n));  // one line's exponentials
  for (int64_t o = 0; o < g.outer; o++) {
    for (int64_t j = 0; j < g.inner; j++) {
      const int64_t base = o * g.n * g.inner + j;
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < g.n; i++) max = std::fmax(max, x[base + i * g.inner]);
      double sum = 0;
      for (int64_t i = 0; i < g.n; i++) sum += (e[i] = std::exp(x[base + i * g.inner] - max));
      for (int64_t i = 0; i < g.n; i++) y[base + i * g.inner] = static_cast<float>(e[i] / sum);
    }
  }
}

// Operands dy, y: dx = y·(dy − Σ dy·y) along dim.
void softmaxGrad(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const AroundAxis g = aroundAxis(in[1].shape, attrs.number("dim"));
  const float* dy = in[0].f32();
  const float* y = in[1].f32();
  float* dx = out[0].f32();
  for (int64_t o = 0; o < g.outer; o++) {
    for (int64_t j = 0; j < g.inner; j++) {
      const int64_t base = o * g.n * g.inner + j;
      double dot = 0;
      for (int64_t i = 0; i < g.n; i++) dot += static_cast<double>(dy[base + i * g.inner]) * y[base + i * g.inner];
      for (int64_t i = 0; i < g.n; i++) {
        const int64_t k = base + i * g.inner;
        dx[k] = static_cast<float>(y[k] * (dy[k] - dot));
      }
    }
  }
}

}  // namespace

REGISTER_KERNEL("softmax", softmax, FillsOutputs::Yes);
REGISTER_KERNEL("softmax_grad", softmaxGrad, FillsOutputs::Yes);

}  // namespace fsm
