// Activation kernels on the CUDA device, as device/cpu/kernels/activation.cc: relu, gelu (exact, erf), silu and
// their gradients. The CPU evaluates in double; here f32 formulas chosen to lose no accuracy where the naive
// ones would (erfc for Φ, sigmoid from e^-|x|), so results stay within a few ulp and double units (slow on
// sm_75) are not needed. relu and relu_grad are exact, so they agree with the CPU bit for bit.
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr float kSqrt1_2 = 0.70710678118654752440f;     // 1/√2
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/√(2π)

// NaN stays NaN (x <= 0 is false for it), as in PyTorch: a poisoned activation must reach the loss.
struct Relu {
  static FSM_HD float f(float x) { return x <= 0.0f ? 0.0f : x; }
  // dy · (0 or 1): the CPU's product, exactly (a zero keeps dy's sign; an Inf or NaN dy gives NaN).
  static FSM_HD float df(float x) { return x > 0.0f ? 1.0f : 0.0f; }
};

// Φ(x) = erfc(−x/√2)/2: no cancellation for negative x, where 1 + erf(x/√2) would lose every digit.
struct Gelu {
  static FSM_HD float f(float x) { return 0.5f * x * erfcf(-x * kSqrt1_2); }
  static FSM_HD float df(float x) { return 0.5f * erfcf(-x * kSqrt1_2) + x * kInvSqrt2Pi * expf(-0.5f * x * x); }
};

// σ(x) and 1 − σ(x) from t = e^−|x| ≤ 1: neither overflows nor cancels for any x.
struct Silu {
  static FSM_HD void sigmoid(float x, float& s, float& rest) {
    const float t = expf(-fabsf(x));
    const float r = 1.0f / (1.0f + t);
    s = x >= 0.0f ? r : t * r;
    rest = x >= 0.0f ? t * r : r;
  }
  static FSM_HD float f(float x) {
    float s, rest;
    sigmoid(x, s, rest);
    return x * s;
  }
  static FSM_HD float df(float x) {
    float s, rest;
    sigmoid(x, s, rest);
    return s * (1.0f + x * rest);
  }
};

template <typename F>
__global__ void unaryKernel(Floats x, FloatsOut y, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, F::f(x[k]));
  }
}

// f_grad(dy, v): dx = dy · f'(v), v the forward input.
template <typename F>
__global__ void gradKernel(Floats dy, Floats v, FloatsOut dx, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dx.set(k, dy[k] * F::df(v[k]));
  }
}

constexpr int kThreads = 256;

template <typename F>
void unary(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = in[0].numel();
  launch(ctx, unaryKernel<F>, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), n);
}

template <typename F>
void grad(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = in[1].numel();
  launch(ctx, gradKernel<F>, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsOut(out[0]), n);
}

}  // namespace

REGISTER_CUDA_KERNEL("relu", unary<Relu>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("relu_grad", grad<Relu>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("gelu", unary<Gelu>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("gelu_grad", grad<Gelu>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("silu", unary<Silu>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("silu_grad", grad<Silu>, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
