// Layout kernels (src/interp/kernels/layout.ts): reshape, transpose (two dims swapped) and sum_to
// (un-broadcasting, the gradient of broadcasting).
#include <algorithm>
#include <utility>
#include <vector>

#include "device/cpu/kernels/broadcast.h"
#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"
#include "device/cpu/scratch.h"
#include "device/cpu/vectorize.h"

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

// sum_to's view of x: its dims merged into runs that the output keeps or reduces (size 1 there, or missing),
// x's size-1 dims left out. x is then [g0, g1, ...] row-major over the groups, and the output is the kept
// groups' elements, row-major in the same order.
struct Group {
  int64_t size;
  bool reduced;
};

std::vector<Group> groupsOf(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  std::vector<Group> g;
  for (size_t d = 0; d < shape.size(); d++) {
    if (shape[d] == 1) continue;
    const bool reduced = strides[d] == 0;
    if (!g.empty() && g.back().reduced == reduced) g.back().size *= shape[d];
    else g.push_back({shape[d], reduced});
  }
  return g;
}

/** The output offset of each row (an index over every group but the last), visited in order. */
class RowWalk {
 public:
  explicit RowWalk(const std::vector<Group>& g) {
    int64_t s = g.back().reduced ? 1 : g.back().size;
    for (size_t i = g.size() - 1; i-- > 0;) {
      sizes_.insert(sizes_.begin(), g[i].size);
      strides_.insert(strides_.begin(), g[i].reduced ? 0 : s);
      if (!g[i].reduced) s *= g[i].size;
    }
    counter_.assign(sizes_.size(), 0);
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t d = sizes_.size(); d-- > 0;) {
      offset_ += strides_[d];
      if (++counter_[d] < sizes_[d]) return;
      offset_ -= strides_[d] * sizes_[d];
      counter_[d] = 0;
    }
  }

 private:
  std::vector<int64_t> sizes_, strides_, counter_;
  int64_t offset_ = 0;
};

/** acc[c] += x[r·stride + c] for the rows r in [0, rows), each column's terms in row order. */
FSM_CPU_CLONES void addRows(double* acc, const float* x, int64_t rows, int64_t stride, int64_t n) {
  vec::addRowBlocks(acc, rows, n, [x, stride](int64_t r, int64_t c) { return static_cast<double>(x[r * stride + c]); });
}

/** Σ x in double, in 8 lanes (more cost more to fold than they save on rows as short as a model's width). */
FSM_CPU_CLONES double sumRow(const float* x, int64_t n) {
  return vec::laneSum<double, 8>(n, [x](int64_t j) { return static_cast<double>(x[j]); });
}

// Sums x down to the output's shape (which broadcasts to x's): each element of x adds into the one it was
// broadcast from. The target shape attribute is not passed to kernels; the output arrives with it. Sums run
// in double, as in the interpreter, each output element's in one order however the work is split: over the
// kept last group's columns (a bias gradient: each chunk adds whole columns down every row, in x's order), or
// over rows when the last group is the only one reduced (each output element one row's sum).
void sumTo(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const std::vector<int64_t> strides = broadcastStrides(out[0].shape, in[0].shape);  // refuses shapes that do not broadcast
  const float* x = in[0].f32();
  float* y = out[0].f32();
  const int64_t n = in[0].numel(), m = out[0].numel();
  const std::vector<Group> g = groupsOf(in[0].shape, strides);
  bool reduces = false;
  for (const Group& q : g) reduces = reduces || q.reduced;
  if (n == 0 || !reduces) {  // nothing summed: x's values (an empty x sums to zeros)
    if (n == 0) std::fill(y, y + m, 0.0f);
    else std::copy(x, x + n, y);
    return;
  }
  double* acc = scratch<double>(0, static_cast<size_t>(m));
  std::fill(acc, acc + m, 0.0);
  const int64_t inner = g.back().size, rows = n / inner;
  if (!g.back().reduced) {
    // Groups alternate, so the one before the columns is reduced: its rows come in runs that add into one
    // output row, and the walk over the other groups (`outer`) gives each run's output row.
    const int64_t run = g[g.size() - 2].size;
    std::vector<Group> outer = g;
    outer.erase(outer.end() - 2);
    parallelFor(inner, std::max<int64_t>(16, 65536 / rows), [&](int64_t c0, int64_t c1) {
      RowWalk w(outer);
      for (int64_t q = 0; q < rows / run; q++, w.next()) addRows(acc + w.offset() + c0, x + q * run * inner + c0, run, inner, c1 - c0);
    });
  } else if (g.size() <= 2) {  // [kept rows,] reduced: each output element is one row's sum
    parallelFor(rows, std::max<int64_t>(16, 65536 / inner), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; r++) acc[r] = sumRow(x + r * inner, inner);
    });
  } else {  // rows of different outputs interleave: in order on this thread
    RowWalk w(g);
    for (int64_t r = 0; r < rows; r++, w.next()) acc[w.offset()] += sumRow(x + r * inner, inner);
  }
  for (int64_t i = 0; i < m; i++) y[i] = static_cast<float>(acc[i]);
}

}  // namespace

REGISTER_KERNEL("reshape", reshape, FillsOutputs::Yes);
REGISTER_KERNEL("transpose", transpose, FillsOutputs::Yes);
REGISTER_KERNEL("sum_to", sumTo, FillsOutputs::Yes);

}  // namespace fsm
