// Layout kernels (src/interp/kernels/layout.ts): reshape, transpose (two dims swapped) and sum_to
// (un-broadcasting, the gradient of broadcasting).
#include <algorithm>
#include <utility>

#include "device/cpu/kernels/broadcast.h"
#include "device/cpu/registry.h"

namespace fsm {
namespace {

// Row-major data does not move; the copy keeps the output independent of the operand.
void reshape(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  std::copy(x, x + in[0].numel(), out[0].f32());
}

// Walks the output in order, reading the input through its strides with the two dims swapped.
void transpose(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t rank = in[0].rank();
  const int64_t a = axisOf(attrs.number("dim0"), rank);
  const int64_t b = axisOf(attrs.number("dim1"), rank);
  std::vector<int64_t> shape = in[0].shape;
  std::vector<int64_t> st = stridesOf(in[0].shape);
  std::swap(shape[a], shape[b]);
  std::swap(st[a], st[b]);
  const float* x = in[0].f32();
  float* y = out[0].f32();
  const int64_t n = out[0].numel();
  StridedWalk w(shape, {st});
  for (int64_t k = 0; k < n; k++, w.next()) y[k] = x[w.offset(0)];
}

// Sums x down to the output's shape (which broadcasts to x's): each element of x adds into the one it was
// broadcast from. The target shape attribute is not passed to kernels; the output arrives with it. Sums run
// in double, as in the interpreter.
void sumTo(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* x = in[0].f32();
  const int64_t n = in[0].numel();
  std::vector<double> acc(static_cast<size_t>(out[0].numel()), 0.0);
  StridedWalk w(in[0].shape, {broadcastStrides(out[0].shape, in[0].shape)});
  for (int64_t k = 0; k < n; k++, w.next()) acc[w.offset(0)] += x[k];
  std::copy(acc.begin(), acc.end(), out[0].f32());
}

}  // namespace

REGISTER_KERNEL("reshape", reshape);
REGISTER_KERNEL("transpose", transpose);
REGISTER_KERNEL("sum_to", sumTo);

}  // namespace fsm
