// Mixed-precision kernels on the CUDA device, as device/cpu/kernels/precision_ops.cc: fsm_cast between the
// storage types (core/half.h's conversions, so the bits equal the CPU's), fsm_scale_by (a scalar held in a
// device tensor: the loss scale, read by the kernel) and fsm_nonfinite (the overflow flag of an fp16 step).
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// Floats reads bf16/f16 with fromBf16/fromF16 and FloatsOut writes them with toBf16/toF16, so one kernel covers
// every direction the CPU converts.
__global__ void convertKernel(Floats x, FloatsOut y, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, x[k]);
  }
}

bool isFloat(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }

// out = in converted to out's dtype: f32 <-> bf16/f16, or a copy when both have the same dtype (out may be in:
// then nothing moves). Operands of different dtypes must not overlap.
void cast(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in.size() != 1 || out.size() != 1) throw std::invalid_argument("fsm_cast: takes one input and one output");
  const Tensor& x = in[0];
  Tensor& y = out[0];
  if (x.numel() != y.numel()) throw std::invalid_argument("fsm_cast: operands differ in size");
  const int64_t n = x.numel();
  if (x.dtype == y.dtype) {
    if (x.data != y.data) copyOnDevice(ctx, y.data, x.data, x.bytes());
    return;
  }
  // The CPU converts f32 to and from each 16-bit type, nothing else (not bf16 <-> f16, nothing with i32).
  if (!isFloat(x.dtype) || !isFloat(y.dtype) || (x.dtype != DType::F32 && y.dtype != DType::F32)) {
    throw std::invalid_argument(std::string("fsm_cast: cannot convert ") + dtypeName(x.dtype) + " to " + dtypeName(y.dtype));
  }
  launch(ctx, convertKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(x), floatsOut(y), n);
}

// y = f32(double(x) · (double(s[0]) · scale)); s lives on the device, so each thread reads it (one cached load).
__global__ void scaleByKernel(Floats x, Floats s, FloatsOut y, int64_t n, double scale) {
  const double k = static_cast<double>(s[0]) * scale;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(i, static_cast<float>(static_cast<double>(x[i]) * k));
  }
}

void scaleBy(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  if (in.size() != 2 || out.size() != 1) throw std::invalid_argument("fsm_scale_by: takes inputs [x, s] and one output");
  if (in[0].numel() != out[0].numel()) throw std::invalid_argument("fsm_scale_by: x and y differ in size");
  if (in[1].numel() != 1) throw std::invalid_argument("fsm_scale_by: s must hold one element");
  const double scale = attrs.has("scale") ? attrs.number("scale") : 1.0;
  const int64_t n = out[0].numel();
  launch(ctx, scaleByKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsIn(in[1]), floatsOut(out[0]), n, scale);
}

// Up to this many inputs of fsm_nonfinite to one launch (by value); more take further launches.
constexpr int kBatch = 16;

struct Inputs {
  Floats x[kBatch];
  int64_t n[kBatch];
  int count;
};

// Any thread that sees NaN or ±Inf (all exponent bits set) writes 1 to the flag, which arrives zeroed: every
// writer stores the same value, so the result does not depend on which of them comes last.
__global__ void nonfiniteKernel(Inputs in, float* flag) {
  bool bad = false;
  for (int t = 0; t < in.count; t++) {
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < in.n[t]; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      bad = bad || (bitsOf(in.x[t][i]) & 0x7f800000u) == 0x7f800000u;
    }
  }
  if (bad) *flag = 1.0f;
}

void nonfinite(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (out.size() != 1 || out[0].numel() != 1) throw std::invalid_argument("fsm_nonfinite: the output must be one f32 element");
  float* flag = out[0].f32();
  size_t next = 0;
  while (next < in.size()) {
    Inputs batch{};
    int64_t most = 0;
    for (; next < in.size() && batch.count < kBatch; batch.count++, next++) {
      batch.x[batch.count] = floatsIn(in[next]);
      batch.n[batch.count] = in[next].numel();
      most = std::max(most, in[next].numel());
    }
    if (most > 0) launch(ctx, nonfiniteKernel, dim3(blocksFor(ctx, most, kThreads)), dim3(kThreads), 0, batch, flag);
  }
}

}  // namespace

REGISTER_CUDA_KERNEL("fsm_cast", cast, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_scale_by", scaleBy, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_nonfinite", nonfinite);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
