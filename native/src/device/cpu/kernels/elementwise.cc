// Elementwise kernels (src/interp/kernels/elementwise.ts): the broadcasting binary ops, scale, fill and
// div_grad_b. add/sub/mul/div run in f32: one correctly rounded f32 operation equals the interpreter's double
// operation rounded to f32, so they agree bit for bit. Operands of one shape run over the device's kernel
// threads (parallel.h).
#include "device/cpu/kernels/broadcast.h"
#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

// out = f(a, b) at the broadcast shape of a and b (the output's shape).
template <typename F>
KernelFn binary(F f) {
  return [f](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
    const float* a = in[0].f32();
    const float* b = in[1].f32();
    float* y = out[0].f32();
    const std::vector<int64_t>& shape = out[0].shape;
    const int64_t n = out[0].numel();
    if (in[0].shape == shape && in[1].shape == shape) {  // the common case: no broadcasting
      parallelFor(n, 65536, [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; k++) y[k] = f(a[k], b[k]);
      });
      return;
    }
    StridedWalk w(shape, {broadcastStrides(in[0].shape, shape), broadcastStrides(in[1].shape, shape)});
    for (int64_t k = 0; k < n; k++, w.next()) y[k] = f(a[w.offset(0)], b[w.offset(1)]);
  };
}

void scale(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double factor = attrs.number("factor");
  const float* x = in[0].f32();
  float* y = out[0].f32();
  parallelFor(in[0].numel(), 65536, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) y[k] = static_cast<float>(x[k] * factor);
  });
}

// Its shape attribute is not passed to kernels; the output arrives with that shape.
void fill(const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs& attrs) {
  const float v = static_cast<float>(attrs.number("value"));
  float* y = out[0].f32();
  const int64_t n = out[0].numel();
  for (int64_t k = 0; k < n; k++) y[k] = v;
}

// div_grad_b(dy, a, b) = −dy·a/b² at the broadcast shape of a and b (dy and the output have it).
void divGradB(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* g = in[0].f32();
  const float* a = in[1].f32();
  const float* b = in[2].f32();
  float* y = out[0].f32();
  const std::vector<int64_t>& shape = out[0].shape;
  const int64_t n = out[0].numel();
  StridedWalk w(shape, {broadcastStrides(in[1].shape, shape), broadcastStrides(in[2].shape, shape)});
  for (int64_t k = 0; k < n; k++, w.next()) {
    const double bv = b[w.offset(1)];
    y[k] = static_cast<float>(-static_cast<double>(g[k]) * a[w.offset(0)] / (bv * bv));
  }
}

}  // namespace

REGISTER_KERNEL("add", binary([](float a, float b) { return a + b; }), FillsOutputs::Yes);
REGISTER_KERNEL("sub", binary([](float a, float b) { return a - b; }), FillsOutputs::Yes);
REGISTER_KERNEL("mul", binary([](float a, float b) { return a * b; }), FillsOutputs::Yes);
REGISTER_KERNEL("div", binary([](float a, float b) { return a / b; }), FillsOutputs::Yes);
REGISTER_KERNEL("scale", scale, FillsOutputs::Yes);
REGISTER_KERNEL("fill", fill, FillsOutputs::Yes);
REGISTER_KERNEL("div_grad_b", divGradB, FillsOutputs::Yes);

}  // namespace fsm
