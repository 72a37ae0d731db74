// Lookup kernels (src/interp/kernels/embedding.ts): positions, embedding and its weight gradient (a
// scatter-add). Ids out of the table's range are errors, with the interpreter's message. A vocabulary-parallel
// table (the tensor-parallel pass's `parts`, and `tensor_rank`, which lowering adds per device) holds rows
// [rank·num, (rank+1)·num) of the whole: other ids look up zeros and add to no row here.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/vocab_rows.h"
#include "device/cpu/registry.h"

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
void embedding(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int32_t* ids = in[0].i32();
  const float* w = in[1].f32();
  const int64_t num = in[1].shape[0], dim = in[1].shape[1];
  const VocabRows local = vocabRows(attrs, num);
  float* y = out[0].f32();
  const int64_t rows = in[0].numel();
  for (int64_t r = 0; r < rows; r++) {
    checkId(ids[r], local.whole);
    const int64_t row = ids[r] - local.first;
    if (row >= 0 && row < num) std::copy(w + row * dim, w + (row + 1) * dim, y + r * dim);
    else std::fill(y + r * dim, y + (r + 1) * dim, 0.0f);
  }
}

// embedding_grad_weight(dy[..., dim], ids[...]){num}: each row of dy adds into the table row its id
// selected; the output is the [num, dim] table. Each touched row sums in double in row order, as the
// interpreter does; untouched rows stay as the caller zeroed them, so a 50k-row vocabulary costs only the
// rows the batch uses (a double copy of the whole table faulted in hundreds of MB per call).
void embeddingGradWeight(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const float* dy = in[0].f32();
  const int32_t* ids = in[1].i32();
  const int64_t num = out[0].shape[0], dim = out[0].shape[1];
  const VocabRows local = vocabRows(attrs, num);
  const int64_t rows = in[1].numel();
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; r++) {
    checkId(ids[r], local.whole);
    if (ids[r] >= local.first && ids[r] < local.first + num) order.push_back(r);
  }
  // Rows grouped by id, in their original order within a group.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
  std::vector<double> acc(static_cast<size_t>(dim));
  float* table = out[0].f32();
  for (size_t k = 0; k < order.size();) {
    const int32_t id = ids[order[k]];
    std::fill(acc.begin(), acc.end(), 0.0);
    for (; k < order.size() && ids[order[k]] == id; k++) {
      const float* g = dy + order[k] * dim;
      for (int64_t c = 0; c < dim; c++) acc[static_cast<size_t>(c)] += g[c];
    }
    for (int64_t c = 0; c < dim; c++) table[(id - local.first) * dim + c] = static_cast<float>(acc[static_cast<size_t>(c)]);
  }
}

}  // namespace

REGISTER_KERNEL("positions", positions, FillsOutputs::Yes);
REGISTER_KERNEL("embedding", embedding, FillsOutputs::Yes);
REGISTER_KERNEL("embedding_grad_weight", embeddingGradWeight);

}  // namespace fsm
