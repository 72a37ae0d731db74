// The ops a lowered device program adds to the graph's (src/lower/):
// summing a micro-batch's gradient into its replica's accumulator, averaging the accumulators over replicas,
// scaling a gradient sum, and copying a value (a first gradient, an update into its parameter's or state's slot).
#include <cstring>

#include "device/cpu/registry.h"

namespace fsm {
namespace {

// out = scale · Σ inputs, summed in input order with each partial sum rounded to f32 and the product
// computed in double then rounded: the reference executor's arithmetic (a Float32Array accumulated in JS),
// so both engines give the same bits.
void accumulate(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const double scale = attrs.number("scale");
  float* y = out[0].f32();
  const int64_t n = out[0].numel();
  for (const Tensor& t : in) {
    if (t.numel() != n) throw std::invalid_argument("fsm_accumulate: operands differ in size");
    const float* x = t.f32();
    for (int64_t i = 0; i < n; i++) y[i] = static_cast<float>(static_cast<double>(y[i]) + static_cast<double>(x[i]));
  }
  for (int64_t i = 0; i < n; i++) y[i] = static_cast<float>(static_cast<double>(y[i]) * scale);
}

// acc += x in place (out[0] is in[0]: an output sharing an input's bytes is never zeroed first,
// core/kernel_call.h), each sum rounded to f32 as
// the reference executor's Float32Array accumulation rounds it.
void addInPlace(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].data != out[0].data) throw std::invalid_argument("fsm_add_inplace: the output must be the first operand");
  if (in[1].numel() != out[0].numel()) throw std::invalid_argument("fsm_add_inplace: operands differ in size");
  float* y = out[0].f32();
  const float* x = in[1].f32();
  const int64_t n = out[0].numel();
  for (int64_t i = 0; i < n; i++) y[i] = static_cast<float>(static_cast<double>(y[i]) + static_cast<double>(x[i]));
}

// y = scale · x, elementwise (y may be x: the cluster scales a gradient sum in place), the product in double
// then rounded as fsm_accumulate's.
void scale(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  if (in[0].numel() != out[0].numel()) throw std::invalid_argument("fsm_scale: operands differ in size");
  const double k = attrs.number("scale");
  const float* x = in[0].f32();
  float* y = out[0].f32();
  const int64_t n = out[0].numel();
  for (int64_t i = 0; i < n; i++) y[i] = static_cast<float>(static_cast<double>(x[i]) * k);
}

// Moves bits, so it copies any element type (16-bit storage included).
void copy(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].numel() != out[0].numel() || in[0].dtype != out[0].dtype) throw std::invalid_argument("fsm_copy: operands differ in size or type");
  std::memcpy(out[0].data, in[0].data, in[0].bytes());
}

}  // namespace

REGISTER_KERNEL("fsm_accumulate", accumulate);
REGISTER_KERNEL("fsm_copy", copy, FillsOutputs::Yes);
// Megatron's "f" entering a tensor-parallel region: forward, the value as it is (src/graph/ops/tp_copy.ts).
REGISTER_KERNEL("tp_copy", copy, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_scale", scale, FillsOutputs::Yes);
REGISTER_KERNEL("fsm_add_inplace", addInPlace);

}  // namespace fsm
