// Lookup kernels (src/interp/kernels/embedding.ts): positions, embedding and its weight gradient (a
// scatter-add). Ids out of the table's range are errors, with the interpreter's message.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernel.h"

namespace fsm {
namespace {

void checkId(int32_t id, int64_t num) {
  if (id < 0 || id >= num) {
    throw std::out_of_range("embedding index " + std::to_string(id) + " is out of range [0, " + std::to_string(num) + ")");
  }
}

// positions{n}: 0..n-1 as i32. The n attribute is a dim, not passed to kernels; the output has length n.
void positions(const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs&) {
  int32_t* y = out[0].i32();
  const int64_t n = out[0].numel();
  for (int64_t i = 0; i < n; i++) y[i] = static_cast<int32_t>(i);
}

// embedding(ids, w[num, dim]): out[..., :] = w[ids[...], :].
void embedding(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const int32_t* ids = in[0].i32();
  const float* w = in[1].f32();
  const int64_t num = in[1].shape[0], dim = in[1].shape[1];
  float* y = out[0].f32();
  const int64_t rows = in[0].numel();
  for (int64_t r = 0; r < rows; r++) {
    checkId(ids[r], num);
    std::copy(w + ids[r] * dim, w + (ids[r] + 1) * dim, y + r * dim);
  }
}

// embedding_grad_weight(dy[..., dim], ids[...]){num}: each row of dy adds into the table row its id
// selected; the output is the [num, dim] table. Sums run in double, as in the interpreter.
void embeddingGradWeight(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const float* dy = in[0].f32();
  const int32_t* ids = in[1].i32();
  const int64_t num = out[0].shape[0], dim = out[0].shape[1];
  const int64_t rows = in[1].numel();
  std::vector<double> acc(static_cast<size_t>(num * dim), 0.0);
  for (int64_t r = 0; r < rows; r++) {
    checkId(ids[r], num);
    for (int64_t c = 0; c < dim; c++) acc[ids[r] * dim + c] += dy[r * dim + c];
  }
  std::copy(acc.begin(), acc.end(), out[0].f32());
}

}  // namespace

REGISTER_KERNEL("positions", positions);
REGISTER_KERNEL("embedding", embedding);
REGISTER_KERNEL("embedding_grad_weight", embeddingGradWeight);

}  // namespace fsm
