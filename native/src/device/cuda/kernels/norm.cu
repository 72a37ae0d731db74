// Normalization kernels over the last dimension on the CUDA device, as device/cpu/kernels/norm.cc: layer_norm
// (biased variance) and rms_norm, their input gradients (a row per warp, or per block for long rows, the row's
// statistics recomputed from x) and their weight gradients (Σ over rows of dy·x̂ as a deterministic column
// reduction through the workspace). Statistics are two-pass (mean, then Σ(x − mean)²) in f32.
#include "device/cuda/rows.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;
struct RowStats {
  float mean;  // 0 for rms_norm
  float rstd;  // 1/√(var + eps) or 1/√(mean(x²) + eps)
};

/** Row r's statistics, returned to every member of the team. */
template <class Team, bool centered>
__device__ RowStats rowStats(Floats x, int64_t base, int64_t d, float eps, float* scratch) {
  float mean = 0.0f;
  if (centered) {
    float s = 0.0f;
    for (int64_t c = Team::rank(); c < d; c += Team::size()) s += x[base + c];
    mean = Team::sum(s, scratch) / static_cast<float>(d);
  }
  float v = 0.0f;
  for (int64_t c = Team::rank(); c < d; c += Team::size()) {
    const float t = x[base + c] - mean;
    v += t * t;
  }
  const float var = Team::sum(v, scratch) / static_cast<float>(d);
  return {mean, 1.0f / sqrtf(var + eps)};
}

// y = x̂·w + b.
template <class Team, bool centered>
__global__ void normForwardKernel(Floats x, Floats w, Floats b, bool hasBias, FloatsOut y, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = Team::first(); r < rows; r += Team::stride()) {
    const int64_t base = r * d;
    const RowStats st = rowStats<Team, centered>(x, base, d, eps, scratch);
    for (int64_t c = Team::rank(); c < d; c += Team::size()) {
      y.set(base + c, (x[base + c] - st.mean) * st.rstd * w[c] + (hasBias ? b[c] : 0.0f));
    }
  }
}

// With g = dy·w: layer_norm dx = rstd·(g − mean(g) − x̂·mean(g·x̂)); rms_norm dx = rstd·(g − x̂·mean(g·x̂)).
template <class Team, bool centered>
__global__ void normGradInputKernel(Floats dy, Floats x, Floats w, FloatsOut dx, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = Team::first(); r < rows; r += Team::stride()) {
    const int64_t base = r * d;
    const RowStats st = rowStats<Team, centered>(x, base, d, eps, scratch);
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t c = Team::rank(); c < d; c += Team::size()) {
      const float g = dy[base + c] * w[c];
      sg += g;
      sgx += g * (x[base + c] - st.mean) * st.rstd;
    }
    const float mg = centered ? Team::sum(sg, scratch) / static_cast<float>(d) : 0.0f;
    const float mgx = Team::sum(sgx, scratch) / static_cast<float>(d);
    for (int64_t c = Team::rank(); c < d; c += Team::size()) {
      const float xh = (x[base + c] - st.mean) * st.rstd;
      dx.set(base + c, st.rstd * (dy[base + c] * w[c] - mg - xh * mgx));
    }
  }
}

// The weight gradient's first pass: (mean, rstd) of every row into stats[2r], stats[2r + 1].
template <class Team, bool centered>
__global__ void rowStatsKernel(Floats x, float* stats, int64_t rows, int64_t d, float eps) {
  __shared__ float scratch[32];
  for (int64_t r = Team::first(); r < rows; r += Team::stride()) {
    const RowStats st = rowStats<Team, centered>(x, r * d, d, eps, scratch);
    if (Team::rank() == 0) {
      stats[2 * r] = st.mean;
      stats[2 * r + 1] = st.rstd;
    }
  }
}

// Second pass: block (i, k) sums dy·x̂ of its columns (a thread each, so reads are coalesced along a row) over
// row chunk k, into partial[k·d + c].
__global__ void columnPartialsKernel(Floats dy, Floats x, const float* stats, float* partial, int64_t rows, int64_t d, int64_t rowsPerChunk) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= d) return;
  const int64_t r0 = blockIdx.y * rowsPerChunk;
  const int64_t r1 = r0 + rowsPerChunk < rows ? r0 + rowsPerChunk : rows;
  float acc = 0.0f;
  for (int64_t r = r0; r < r1; r++) acc += dy[r * d + c] * (x[r * d + c] - stats[2 * r]) * stats[2 * r + 1];
  partial[blockIdx.y * d + c] = acc;
}

// Final pass: each column's chunk sums added in chunk order.
__global__ void columnTotalsKernel(const float* partial, FloatsOut dw, int64_t d, int64_t chunks) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < d; c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int64_t k = 0; k < chunks; k++) s += partial[k * d + c];
    dw.set(c, s);
  }
}

/** The shape of a row-wise launch: a warp a row for short rows, a block a row for long ones. */
struct RowLaunch {
  bool warpRows;
  dim3 grid;
  dim3 block;
};

RowLaunch rowLaunch(const KernelContext& ctx, int64_t rows, int64_t d) {
  if (d <= kWarpRowMax) return {true, dim3(blocksFor(ctx, rows, kThreads / 32)), dim3(kThreads)};
  return {false, dim3(blocksFor(ctx, rows, 1)), dim3(d > 8 * 1024 ? 1024 : kThreads)};
}

/** The tensor's last dimension and the number of rows before it. */
void rowsOf(const Tensor& x, int64_t& rows, int64_t& d) {
  if (x.shape.empty()) throw std::invalid_argument("normalization of a scalar: it has no last dimension");
  d = x.shape.back();
  rows = d > 0 ? x.numel() / d : 0;
}

// Operands x, weight, [bias].
template <bool centered>
void normForward(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  int64_t rows, d;
  rowsOf(in[0], rows, d);
  if (rows == 0) return;
  const float eps = static_cast<float>(attrs.number("eps"));
  const bool hasBias = in.size() > 2;
  const Floats b = hasBias ? floatsIn(in[2], "bias") : Floats{nullptr, kF32};
  const RowLaunch l = rowLaunch(ctx, rows, d);
  launch(ctx, l.warpRows ? normForwardKernel<WarpRows, centered> : normForwardKernel<BlockRows, centered>, l.grid, l.block, 0,
         floatsIn(in[0], "x"), floatsIn(in[1], "weight"), b, hasBias, floatsOut(out[0]), rows, d, eps);
}

// Operands dy, x, weight.
template <bool centered>
void normGradInput(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  int64_t rows, d;
  rowsOf(in[1], rows, d);
  if (rows == 0) return;
  const float eps = static_cast<float>(attrs.number("eps"));
  const RowLaunch l = rowLaunch(ctx, rows, d);
  launch(ctx, l.warpRows ? normGradInputKernel<WarpRows, centered> : normGradInputKernel<BlockRows, centered>, l.grid, l.block, 0,
         floatsIn(in[0], "dy"), floatsIn(in[1], "x"), floatsIn(in[2], "weight"), floatsOut(out[0]), rows, d, eps);
}

// The weight gradient's column reduction: rows in at most kMaxChunks chunks of at least kMinChunkRows, so the
// final pass adds few partials per column and the workspace stays small whatever the row count.
constexpr int64_t kMinChunkRows = 32;
constexpr int64_t kMaxChunks = 256;

struct Chunks {
  int64_t count, rows;
};

Chunks chunksOf(int64_t rows) {
  const int64_t count = std::max<int64_t>(1, std::min(kMaxChunks, (rows + kMinChunkRows - 1) / kMinChunkRows));
  return {count, (rows + count - 1) / count};
}

size_t gradWeightWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) {
  int64_t rows, d;
  rowsOf(in[1], rows, d);
  return sizeof(float) * static_cast<size_t>(2 * rows + chunksOf(rows).count * d);
}

// Operands dy, x: dw = Σ_rows dy·x̂.
template <bool centered>
void normGradWeight(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  int64_t rows, d;
  rowsOf(in[1], rows, d);
  if (rows == 0) return;  // dw stays as it arrived: zero
  const float eps = static_cast<float>(attrs.number("eps"));
  const Chunks chunks = chunksOf(rows);
  float* stats = static_cast<float*>(ctx.workspace);
  float* partial = stats + 2 * rows;
  const Floats x = floatsIn(in[1], "x");
  const RowLaunch l = rowLaunch(ctx, rows, d);
  launch(ctx, l.warpRows ? rowStatsKernel<WarpRows, centered> : rowStatsKernel<BlockRows, centered>, l.grid, l.block, 0, x, stats, rows, d, eps);
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (d + 31) / 32 * 32));
  const dim3 grid(gridDimension((d + threads - 1) / threads, "columns", 0x7fffffff), static_cast<unsigned>(chunks.count));
  launch(ctx, columnPartialsKernel, grid, dim3(threads), 0, floatsIn(in[0], "dy"), x, static_cast<const float*>(stats), partial, rows, d, chunks.rows);
  launch(ctx, columnTotalsKernel, dim3(blocksFor(ctx, d, kThreads)), dim3(kThreads), 0, static_cast<const float*>(partial), floatsOut(out[0]), d, chunks.count);
}

}  // namespace

REGISTER_CUDA_KERNEL("layer_norm", normForward<true>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("layer_norm_grad_input", normGradInput<true>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("layer_norm_grad_weight", normGradWeight<true>, gradWeightWorkspace, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("rms_norm", normForward<false>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("rms_norm_grad_input", normGradInput<false>, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("rms_norm_grad_weight", normGradWeight<false>, gradWeightWorkspace, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
