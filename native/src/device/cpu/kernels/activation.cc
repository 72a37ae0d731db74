// Activation kernels (src/interp/kernels/elementwise.ts): relu, gelu, silu and their gradients. gelu and silu
// are evaluated in double and rounded once, as the interpreter does, so f32 intermediates add no error.
#include <cmath>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

// y = f(x) elementwise.
template <typename F>
KernelFn unary(F f) {
  return [f](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
    const float* x = in[0].f32();
    float* y = out[0].f32();
    const int64_t n = in[0].numel();
    for (int64_t i = 0; i < n; i++) y[i] = static_cast<float>(f(static_cast<double>(x[i])));
  };
}

// f_grad(dy, v): dx = dy · f'(v) elementwise, v the forward input.
template <typename F>
KernelFn gradOf(F df) {
  return [df](const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
    const float* dy = in[0].f32();
    const float* v = in[1].f32();
    float* dx = out[0].f32();
    const int64_t n = in[1].numel();
    for (int64_t i = 0; i < n; i++) dx[i] = static_cast<float>(dy[i] * df(static_cast<double>(v[i])));
  };
}

constexpr double kSqrt1_2 = 0.70710678118654752440;     // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/√(2π)

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Exact GELU x·Φ(x), Φ(x) = (1 + erf(x/√2))/2 (PyTorch's default, not the tanh approximation).
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x * kSqrt1_2)); }
double geluGrad(double x) { return 0.5 * (1.0 + std::erf(x * kSqrt1_2)) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x); }

double silu(double x) { return x * sigmoid(x); }
double siluGrad(double x) {
  const double s = sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}

}  // namespace

// NaN stays NaN (x <= 0 is false for it), as in PyTorch: a poisoned activation must reach the loss.
REGISTER_KERNEL("relu", unary([](double x) { return x <= 0.0 ? 0.0 : x; }));
REGISTER_KERNEL("relu_grad", gradOf([](double x) { return x > 0.0 ? 1.0 : 0.0; }));
REGISTER_KERNEL("gelu", unary(gelu));
REGISTER_KERNEL("gelu_grad", gradOf(geluGrad));
REGISTER_KERNEL("silu", unary(silu));
REGISTER_KERNEL("silu_grad", gradOf(siluGrad));

}  // namespace fsm
