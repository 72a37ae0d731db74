// Layout kernels on the CUDA device, as device/cpu/kernels/layout.cc: reshape (a device copy), transpose (two
// dims swapped: shared-memory tiles when the last dim moves, a gather through an index map otherwise) and sum_to
// (un-broadcasting: a deterministic two-level sum in double, as the CPU sums in double).
#include "device/cuda/device_code.h"
#include "device/cuda/strided.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// Row-major data does not move; the copy keeps the output independent of the operand.
void reshape(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  if (in[0].bytes() != out[0].bytes()) throw std::invalid_argument("reshape: operands differ in size");
  if (in[0].data != out[0].data) copyOnDevice(ctx, out[0].data, in[0].data, in[0].bytes());
}

// --- transpose ---------------------------------------------------------------------------------------------

// The input seen as [P, A, M, B] with A and B the swapped dims and nothing after B: the output is [P, B, M, A],
// P·M matrices [A, B] each transposed. A 32×32 tile goes through shared memory so that both the reads (along B)
// and the writes (along A) are coalesced; the padding column keeps the column reads free of bank conflicts.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

__global__ void transposeTiles(Floats x, FloatsOut y, int64_t P, int64_t A, int64_t M, int64_t B) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tilesA = (A + kTile - 1) / kTile, tilesB = (B + kTile - 1) / kTile;
  const int64_t tiles = P * M * tilesA * tilesB;
  const int tx = threadIdx.x, ty = threadIdx.y;
  // The loop bound is the same for every thread of the block, so all of them reach both barriers.
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t tb = t % tilesB, ta = t / tilesB % tilesA, m = t / (tilesB * tilesA) % M, p = t / (tilesB * tilesA * M);
    const int64_t inBase = (p * A * M + m) * B, outBase = (p * B * M + m) * A;  // element (0, 0) of each matrix
    for (int r = ty; r < kTile; r += kTileRows) {
      const int64_t i = ta * kTile + r, j = tb * kTile + tx;
      if (i < A && j < B) tile[r][tx] = x[inBase + i * M * B + j];
    }
    __syncthreads();
    for (int r = ty; r < kTile; r += kTileRows) {
      const int64_t j = tb * kTile + r, i = ta * kTile + tx;
      if (j < B && i < A) y.set(outBase + j * M * A + i, tile[tx][r]);
    }
    __syncthreads();  // the tile is read before the next iteration overwrites it
  }
}

// Output element k reads the input through its strides with the two dims swapped.
__global__ void transposeGather(Floats x, FloatsOut y, int64_t n, IndexMap map) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t ix, unused;
    map.offsets(k, ix, unused);
    y.set(k, x[ix]);
  }
}

void transpose(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int64_t rank = in[0].rank();
  int64_t a = axisOf(attrs.number("dim0"), rank);
  int64_t b = axisOf(attrs.number("dim1"), rank);
  if (a > b) std::swap(a, b);
  const std::vector<int64_t>& s = in[0].shape;
  const int64_t n = in[0].numel();
  if (n == 0) return;
  int64_t P = 1, M = 1, Q = 1;
  for (int64_t d = 0; d < a; d++) P *= s[d];
  for (int64_t d = a + 1; d < b; d++) M *= s[d];
  for (int64_t d = b + 1; d < rank; d++) Q *= s[d];
  if (a != b && Q == 1 && s[a] > 1 && s[b] > 1) {
    const int64_t tiles = P * M * ((s[a] + kTile - 1) / kTile) * ((s[b] + kTile - 1) / kTile);
    launch(ctx, transposeTiles, dim3(blocksFor(ctx, tiles, 1)), dim3(kTile, kTileRows), 0, floatsIn(in[0]), floatsOut(out[0]), P, s[a], M, s[b]);
    return;
  }
  // The last dim stays put (runs of Q contiguous elements are read in order), or the swap moves nothing.
  std::vector<int64_t> shape = s;
  std::vector<int64_t> st = stridesOf(s);
  std::swap(shape[a], shape[b]);
  std::swap(st[a], st[b]);
  launch(ctx, transposeGather, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), n, indexMap(shape, st));
}

// --- sum_to ------------------------------------------------------------------------------------------------

// x's dims split into kept ones (the output's, in order: output element o is their row-major index) and
// reduced ones (broadcast in the output: summed over, index r). Size-1 dims are dropped. When every reduced dim
// comes before every kept one (a bias gradient [B,S,d] -> [d], or a plain copy), x[o, r] is x[r·N + o] and no
// index map is needed.
struct SumPlan {
  int64_t n = 0;        // x's elements
  int64_t N = 1;        // outputs
  int64_t R = 1;        // summands per output
  bool prefix = true;   // x is [R, N] row-major
  IndexMap kept{};      // o -> offset in x
  IndexMap reduced{};   // r -> offset in x
  int64_t chunks = 1;   // the R summands of each output split into this many chunks, summed in parallel
  int64_t chunkRows = 1;
};

// About this many threads sum chunks at once (enough to fill a large GPU), each over at least kMinChunkRows
// summands. Both depend on the shapes only, so the workspace (sized without a device) and the summation order
// (hence the bits) are the same on every device.
constexpr int64_t kTargetThreads = int64_t{1} << 17;
constexpr int64_t kMinChunkRows = 32;

SumPlan planSum(const Tensor& x, const Tensor& y) {
  SumPlan p;
  const std::vector<int64_t> bs = broadcastStrides(y.shape, x.shape);  // throws when y does not broadcast to x
  const std::vector<int64_t> st = stridesOf(x.shape);
  std::vector<int64_t> keptShape, keptStride, reducedShape, reducedStride;
  bool seenKept = false;
  for (size_t d = 0; d < x.shape.size(); d++) {
    if (x.shape[d] == 1) continue;
    if (bs[d] != 0) {
      keptShape.push_back(x.shape[d]);
      keptStride.push_back(st[d]);
      p.N *= x.shape[d];
      seenKept = true;
    } else {
      reducedShape.push_back(x.shape[d]);
      reducedStride.push_back(st[d]);
      p.R *= x.shape[d];
      if (seenKept) p.prefix = false;
    }
  }
  p.n = x.numel();
  if (!p.prefix) {
    p.kept = indexMap(keptShape, keptStride);
    p.reduced = indexMap(reducedShape, reducedStride);
  }
  if (p.n == 0) return p;
  const int64_t byThreads = (kTargetThreads + p.N - 1) / p.N, byRows = (p.R + kMinChunkRows - 1) / kMinChunkRows;
  p.chunks = std::max<int64_t>(1, std::min(byThreads, byRows));
  p.chunkRows = (p.R + p.chunks - 1) / p.chunks;
  p.chunks = (p.R + p.chunkRows - 1) / p.chunkRows;  // no empty chunk
  return p;
}

// Thread j sums chunk c = j / N of output o = j % N (neighbouring threads: neighbouring outputs, so the reads
// of the prefix case are coalesced) in double, in row order; with one chunk that is the output, else a partial
// stored at partial[o·chunks + c] for the final pass.
template <bool prefix>
__global__ void sumChunks(Floats x, FloatsOut y, double* partial, SumPlan p) {
  const int64_t items = p.N * p.chunks;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < items; j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = j % p.N, c = j / p.N;
    const int64_t r0 = c * p.chunkRows, r1 = r0 + p.chunkRows < p.R ? r0 + p.chunkRows : p.R;
    double s = 0.0;
    if (prefix) {
      for (int64_t r = r0; r < r1; r++) s += x[r * p.N + o];
    } else {
      int64_t base, unused, off;
      p.kept.offsets(o, base, unused);
      for (int64_t r = r0; r < r1; r++) {
        p.reduced.offsets(r, off, unused);
        s += x[base + off];
      }
    }
    if (p.chunks == 1) y.set(o, static_cast<float>(s));
    else partial[o * p.chunks + c] = s;
  }
}

// A warp per output: lane l adds chunks l, l+32, ... in order, then a fixed butterfly joins the lanes.
__global__ void sumPartials(const double* partial, FloatsOut y, int64_t N, int64_t chunks) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  // Whole warps share o, so every lane of a warp reaches the shuffles.
  for (int64_t o = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; o < N; o += warps) {
    double s = 0.0;
    for (int64_t c = lane; c < chunks; c += 32) s += partial[o * chunks + c];
    for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(kFullMask, s, m);
    if (lane == 0) y.set(o, static_cast<float>(s));
  }
}

// Shapes that do not broadcast need none: the launch then throws the CPU's error, as a kernel error.
size_t sumToWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>& out, const Attrs&) {
  try {
    const SumPlan p = planSum(in[0], out[0]);
    return p.chunks > 1 ? static_cast<size_t>(p.N * p.chunks) * sizeof(double) : 0;
  } catch (const std::invalid_argument&) {
    return 0;
  }
}

// Sums x down to the output's shape (which broadcasts to x's). The target shape attribute is not passed to
// kernels; the output arrives with it (zero-filled, so an empty x leaves it zero).
void sumTo(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs&) {
  const SumPlan p = planSum(in[0], out[0]);
  if (p.n == 0) return;
  double* partial = static_cast<double*>(ctx.workspace);
  if (p.chunks > 1 && ctx.workspaceBytes < static_cast<size_t>(p.N * p.chunks) * sizeof(double)) {
    throw std::logic_error("internal: sum_to launched without its workspace");
  }
  const dim3 grid(blocksFor(ctx, p.N * p.chunks, kThreads));
  if (p.prefix) launch(ctx, sumChunks<true>, grid, dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), partial, p);
  else launch(ctx, sumChunks<false>, grid, dim3(kThreads), 0, floatsIn(in[0]), floatsOut(out[0]), partial, p);
  if (p.chunks > 1) {
    launch(ctx, sumPartials, dim3(blocksFor(ctx, p.N * 32, kThreads)), dim3(kThreads), 0, static_cast<const double*>(partial), floatsOut(out[0]), p.N, p.chunks);
  }
}

}  // namespace

REGISTER_CUDA_KERNEL("reshape", reshape, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("transpose", transpose, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("sum_to", sumTo, sumToWorkspace, UsesBlas::No, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
