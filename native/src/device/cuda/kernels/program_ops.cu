// The ops a lowered device program adds, on the CUDA device, as device/cpu/kernels/program_ops.cc: summing
// gradients (fsm_accumulate, fsm_add_inplace), scaling (fsm_scale) and copying bits (fsm_copy). The same
// arithmetic as the CPU's (each partial sum rounded to f32, the scale applied in double), so the same bits.
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// Up to this many operands of fsm_accumulate go to one launch (by value, as kernel parameters); more take
// further launches, each carrying the running f32 sum in the output, which is what the CPU stores between
// operands anyway.
constexpr int kBatch = 16;

struct Operands {
  Floats x[kBatch];
  // Operand i shares the output's bytes: it reads as the running sum (the CPU adds into y in place, operand by
  // operand, so such an operand has been overwritten by the time it is added).
  bool isOutput[kBatch];
  int count;
};

// y = f32(y + x_0) ... f32(y + x_k) for this batch, then (last batch only) y = f32(double(y) · scale). A sum of
// two f32 rounded once is the same in f32 as in double, so the f32 additions give the CPU's bits.
__global__ void accumulateKernel(Operands ops, FloatsOut y, int64_t n, bool last, double scale) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = y[k];
    for (int i = 0; i < ops.count; i++) acc = acc + (ops.isOutput[i] ? acc : ops.x[i][k]);
    if (last) acc = static_cast<float>(static_cast<double>(acc) * scale);
    y.set(k, acc);
  }
}

// out = scale · Σ inputs, in input order, starting from what the output holds (zero, unless it is an input).
void accumulate(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double scale = attrs.number("scale");
  const int64_t n = out[0].numel();
  for (const Tensor& t : in) {
    if (t.numel() != n) throw std::invalid_argument("fsm_accumulate: operands differ in size");
  }
  const FloatsOut y = floatsOut(out[0]);
  const dim3 grid(blocksFor(ctx, n, kThreads));
  if (n == 0) return;
  size_t next = 0;
  do {
    Operands ops{};
    for (; next < in.size() && ops.count < kBatch; ops.count++, next++) {
      ops.x[ops.count] = floatsIn(in[next]);
      ops.isOutput[ops.count] = in[next].data == out[0].data;
    }
    launch(ctx, accumulateKernel, grid, dim3(kThreads), 0, ops, y, n, next == in.size(), scale);
  } while (next < in.size());
}

// acc += x (out[0] is in[0]: an output sharing an input's bytes is never zeroed first, core/kernel_call.h).
__global__ void addKernel(FloatsOut y, Floats x, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, y[k] + x[k]);
  }
}

void addInPlace(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].data != out[0].data) throw std::invalid_argument("fsm_add_inplace: the output must be the first operand");
  if (in[1].numel() != out[0].numel()) throw std::invalid_argument("fsm_add_inplace: operands differ in size");
  const int64_t n = out[0].numel();
  launch(ctx, addKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsOut(out[0]), floatsIn(in[1]), n);
}

// y = f32(double(x) · scale); y may be x.
__global__ void scaleKernel(Floats x, FloatsOut y, int64_t n, double scale) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, static_cast<float>(static_cast<double>(x[k]) * scale));
  }
}

void scale(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  if (in[0].numel() != out[0].numel()) throw std::invalid_argument("fsm_scale: operands differ in size");
  const double k = attrs.number("scale");
  const int64_t n = out[0].numel();
  launch(ctx, scaleKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), n, k);
}

// Moves bits, so it copies any element type (16-bit storage included): an asynchronous copy on the stream.
void copy(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].numel() != out[0].numel() || in[0].dtype != out[0].dtype) throw std::invalid_argument("fsm_copy: operands differ in size or type");
  if (in[0].data != out[0].data) copyOnDevice(ctx, out[0].data, in[0].data, in[0].bytes());
}

}  // namespace

REGISTER_CUDA_KERNEL("fsm_accumulate", accumulate);
REGISTER_CUDA_KERNEL("fsm_copy", copy, nullptr, UsesBlas::No, FillsOutputs::Yes);
// Megatron's "f" entering a tensor-parallel region: forward, the value as it is (src/graph/ops/tp_copy.ts).
REGISTER_CUDA_KERNEL("tp_copy", copy, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_scale", scale, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_add_inplace", addInPlace, nullptr, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
