// Lookup kernels on the CUDA device, as device/cpu/kernels/embedding.cc: positions, embedding and its weight
// gradient. Ids out of the table's range are reported to the device's error record (the CPU's message after
// the step). The gradient is deterministic: the rows are sorted by id with a stable radix sort in the
// workspace, then each table row sums its dy rows in row order, in double, exactly as the CPU does. A
// vocabulary-parallel table (the tensor-parallel pass's `parts`, and `tensor_rank`, which lowering adds per
// device) holds rows [first, first + num) of the whole: other ids look up zeros and add to no row here.
#include "core/vocab_rows.h"
#include "device/cuda/device_code.h"

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

constexpr int kThreads = 256;

// positions{n}: 0..n-1 as i32 (the output has length n).
__global__ void positionsKernel(int32_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = static_cast<int32_t>(i);
  }
}

void positions(const KernelContext& ctx, const std::vector<Tensor>&, std::vector<Tensor>& out, const Attrs&) {
  const int64_t n = out[0].numel();
  launch(ctx, positionsKernel, dim3(blocksFor(ctx, n, kThreads)), dim3(kThreads), 0, out[0].i32(), n);
}

__device__ __forceinline__ bool inRange(int32_t id, int64_t num) { return id >= 0 && id < num; }

// out[r, c] = w[ids[r] - first, c], zero for an id of another rank's rows: one thread an element, neighbouring
// threads neighbouring columns (coalesced rows). A bad id is reported once, by its row's column-0 thread;
// that row is left as it is.
__global__ void embeddingKernel(const int32_t* ids, Floats w, FloatsOut y, int64_t rows, int64_t dim, VocabRows table, DeviceError* error, int instruction) {
  const int64_t n = rows * dim;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = k / dim, c = k - r * dim;
    const int32_t id = ids[r];
    if (!inRange(id, table.whole)) {
      if (c == 0) reportError(error, kErrorEmbeddingIndex, instruction, id, table.whole);
      continue;
    }
    const int64_t row = id - table.first;
    y.set(k, row >= 0 && row < table.num ? w[row * dim + c] : 0.0f);
  }
}

// The ids alone checked (a table with no columns has nothing to copy, but its ids are still checked).
__global__ void checkIdsKernel(const int32_t* ids, int64_t rows, int64_t num, DeviceError* error, int instruction) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!inRange(ids[r], num)) reportError(error, kErrorEmbeddingIndex, instruction, ids[r], num);
  }
}

// embedding(ids, w[num, dim]): out[..., :] = w[ids[...], :].
void embedding(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int32_t* ids = intsIn(in[0]);
  const int64_t num = in[1].shape[0], dim = in[1].shape[1];
  const VocabRows table = vocabRows(attrs, num);
  const int64_t rows = in[0].numel();
  if (out[0].numel() != rows * dim) throw std::invalid_argument("embedding: the output must hold a table row per id");
  if (dim == 0) {
    if (rows > 0) launch(ctx, checkIdsKernel, dim3(blocksFor(ctx, rows, kThreads)), dim3(kThreads), 0, ids, rows, table.whole, ctx.error, ctx.instruction);
    return;
  }
  launch(ctx, embeddingKernel, dim3(blocksFor(ctx, rows * dim, kThreads)), dim3(kThreads), 0, ids, floatsIn(in[1]), floatsOut(out[0]), rows, dim, table,
         ctx.error, ctx.instruction);
}

// --- embedding_grad_weight ---------------------------------------------------------------------------------
//
// 1. keys[r] = ids[r] − first (an id out of range is reported, and one of another rank's rows is not; both get
//    the key num, past every row, and are skipped), rows[r] = r.
// 2. A least-significant-digit radix sort of (key, row) by key, 8 bits a pass, as many passes as num needs
//    (two for a 50k vocabulary). Each pass is stable (a tile of 256 keys per block: a histogram per tile, one
//    exclusive scan over (digit, tile) in digit-major order, then a scatter that ranks each key among the
//    tile's equal digits with warp votes), so equal ids keep their rows in ascending order. Integer work only:
//    the result does not depend on timing.
// 3. A warp per sorted position that starts a run of equal keys sums that run's dy rows in order, in double,
//    lanes across the columns (coalesced), and writes its table row. Rows no id selects stay as they arrived.

constexpr int kRadixBits = 8;
constexpr int kRadix = 1 << kRadixBits;
constexpr int kTileKeys = 256;  // one key per thread of a 256-thread block
constexpr int kTileWarps = kTileKeys / 32;
constexpr int kScanThreads = 1024;

struct SortLayout {
  int64_t rows, tiles;
  size_t keys[2], vals[2], counts;  // byte offsets into the workspace
  size_t bytes;
};

SortLayout sortLayout(int64_t rows) {
  SortLayout l;
  l.rows = rows;
  l.tiles = (rows + kTileKeys - 1) / kTileKeys;
  const size_t column = static_cast<size_t>(rows) * sizeof(uint32_t);
  l.keys[0] = 0;
  l.vals[0] = column;
  l.keys[1] = 2 * column;
  l.vals[1] = 3 * column;
  l.counts = 4 * column;
  l.bytes = rows == 0 ? 0 : l.counts + static_cast<size_t>(kRadix * l.tiles) * sizeof(uint32_t);
  return l;
}

__global__ void sortInitKernel(const int32_t* ids, int64_t rows, VocabRows table, uint32_t* keys, uint32_t* vals, DeviceError* error, int instruction) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows; r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t id = ids[r];
    if (!inRange(id, table.whole)) reportError(error, kErrorEmbeddingIndex, instruction, id, table.whole);
    const int64_t row = id - table.first;
    keys[r] = inRange(id, table.whole) && row >= 0 && row < table.num ? static_cast<uint32_t>(row) : static_cast<uint32_t>(table.num);
    vals[r] = static_cast<uint32_t>(r);
  }
}

// counts[d · tiles + tile] = how many keys of this block's tile have digit d (shared-memory integer atomics:
// a count, whatever the order).
__global__ void digitCountKernel(const uint32_t* keys, int64_t rows, int shift, uint32_t* counts, int64_t tiles) {
  __shared__ int hist[kRadix];
  hist[threadIdx.x] = 0;
  __syncthreads();
  const int64_t j = blockIdx.x * static_cast<int64_t>(kTileKeys) + threadIdx.x;
  if (j < rows) atomicAdd(&hist[(keys[j] >> shift) & (kRadix - 1)], 1);
  __syncthreads();
  counts[threadIdx.x * tiles + blockIdx.x] = static_cast<uint32_t>(hist[threadIdx.x]);
}

// counts := its exclusive prefix sums, in one block: each thread a contiguous run, the runs' totals scanned
// with warp shuffles.
__global__ void exclusiveScanKernel(uint32_t* counts, int64_t n) {
  __shared__ uint32_t warpTotals[32];
  const int64_t per = (n + blockDim.x - 1) / blockDim.x;
  const int64_t begin = threadIdx.x * per, end = begin + per < n ? begin + per : n;
  uint32_t local = 0;
  for (int64_t i = begin; i < end; i++) local += counts[i];
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  uint32_t v = local;  // inclusive scan within the warp
  for (unsigned o = 1; o < 32; o <<= 1) {
    const uint32_t t = __shfl_up_sync(kFullMask, v, o);
    if (lane >= o) v += t;
  }
  if (lane == 31) warpTotals[warp] = v;
  __syncthreads();
  if (warp == 0) {  // a whole warp: every lane reaches the shuffles
    uint32_t w = lane < warps ? warpTotals[lane] : 0;
    for (unsigned o = 1; o < 32; o <<= 1) {
      const uint32_t t = __shfl_up_sync(kFullMask, w, o);
      if (lane >= o) w += t;
    }
    warpTotals[lane] = w;
  }
  __syncthreads();
  uint32_t run = (warp > 0 ? warpTotals[warp - 1] : 0) + v - local;
  for (int64_t i = begin; i < end; i++) {
    const uint32_t c = counts[i];
    counts[i] = run;
    run += c;
  }
}

// Moves each key of this block's tile to its sorted place for this digit: after every key of a smaller digit
// (anywhere) and every equal digit of an earlier tile (the scan), of an earlier warp of this tile
// (warpCounts), and of an earlier lane of its warp (the lanes whose votes match its digit on all 8 bits).
__global__ void digitScatterKernel(const uint32_t* keys, const uint32_t* vals, uint32_t* keysOut, uint32_t* valsOut, int64_t rows, int shift,
                                   const uint32_t* offsets, int64_t tiles) {
  __shared__ uint32_t warpCounts[kTileWarps * kRadix];
  for (int i = threadIdx.x; i < kTileWarps * kRadix; i += kTileKeys) warpCounts[i] = 0;
  __syncthreads();
  const int64_t j = blockIdx.x * static_cast<int64_t>(kTileKeys) + threadIdx.x;
  const bool valid = j < rows;
  const uint32_t key = valid ? keys[j] : 0;
  const uint32_t d = (key >> shift) & (kRadix - 1);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned peers = __ballot_sync(kFullMask, valid);
  for (int b = 0; b < kRadixBits; b++) {
    const bool bit = (d >> b) & 1u;
    const unsigned votes = __ballot_sync(kFullMask, bit);
    peers &= bit ? votes : ~votes;
  }
  const unsigned rank = static_cast<unsigned>(__popc(peers & ((1u << lane) - 1u)));
  if (valid && rank == 0) warpCounts[warp * kRadix + d] = static_cast<uint32_t>(__popc(peers));
  __syncthreads();
  if (valid) {
    uint32_t dest = offsets[d * tiles + blockIdx.x] + rank;
    for (unsigned w = 0; w < warp; w++) dest += warpCounts[w * kRadix + d];
    keysOut[dest] = key;
    valsOut[dest] = vals[j];
  }
}

// A warp per sorted position j; the warp at the start of a run of equal keys sums the run.
__global__ void sumRunsKernel(const uint32_t* keys, const uint32_t* vals, Floats dy, FloatsOut table, int64_t rows, int64_t dim, int64_t num) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const int lane = threadIdx.x % 32;
  for (int64_t j = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; j < rows; j += warps) {
    const uint32_t key = keys[j];
    if (key >= num || (j > 0 && keys[j - 1] == key)) continue;
    int64_t end = j + 1;
    while (end < rows && keys[end] == key) end++;
    for (int64_t c = lane; c < dim; c += 32) {
      double acc = 0.0;
      for (int64_t i = j; i < end; i++) acc += dy[static_cast<int64_t>(vals[i]) * dim + c];
      table.set(static_cast<int64_t>(key) * dim + c, static_cast<float>(acc));
    }
  }
}

size_t embeddingGradWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs&) { return sortLayout(in[1].numel()).bytes; }

// embedding_grad_weight(dy[..., dim], ids[...]){num}: the [num, dim] table of summed rows.
void embeddingGradWeight(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const int32_t* ids = intsIn(in[1]);
  const int64_t num = out[0].shape[0], dim = out[0].shape[1];
  const VocabRows table = vocabRows(attrs, num);
  const int64_t rows = in[1].numel();
  if (in[0].numel() != rows * dim) throw std::invalid_argument("embedding_grad_weight: dy must hold a row of the table's width per id");
  if (table.whole > INT32_MAX || rows > INT32_MAX) throw std::invalid_argument("not implemented: embedding_grad_weight with more than 2^31 - 1 rows or ids");
  if (rows == 0) return;
  const SortLayout l = sortLayout(rows);
  if (ctx.workspaceBytes < l.bytes) throw std::logic_error("internal: embedding_grad_weight launched without its workspace");
  auto* ws = static_cast<uint8_t*>(ctx.workspace);
  uint32_t* keys[2] = {reinterpret_cast<uint32_t*>(ws + l.keys[0]), reinterpret_cast<uint32_t*>(ws + l.keys[1])};
  uint32_t* vals[2] = {reinterpret_cast<uint32_t*>(ws + l.vals[0]), reinterpret_cast<uint32_t*>(ws + l.vals[1])};
  uint32_t* counts = reinterpret_cast<uint32_t*>(ws + l.counts);
  launch(ctx, sortInitKernel, dim3(blocksFor(ctx, rows, kThreads)), dim3(kThreads), 0, ids, rows, table, keys[0], vals[0], ctx.error, ctx.instruction);
  // Keys run 0..num (num: a bad id), so the passes cover num's bits.
  int bits = 0;
  while (bits < 32 && (static_cast<uint64_t>(num) >> bits) != 0) bits++;
  int cur = 0;
  const unsigned tiles = gridDimension(l.tiles, "embedding_grad_weight tiles", INT32_MAX);
  for (int shift = 0; shift < bits; shift += kRadixBits, cur ^= 1) {
    launch(ctx, digitCountKernel, dim3(tiles), dim3(kTileKeys), 0, static_cast<const uint32_t*>(keys[cur]), rows, shift, counts, l.tiles);
    launch(ctx, exclusiveScanKernel, dim3(1), dim3(kScanThreads), 0, counts, kRadix * l.tiles);
    launch(ctx, digitScatterKernel, dim3(tiles), dim3(kTileKeys), 0, static_cast<const uint32_t*>(keys[cur]), static_cast<const uint32_t*>(vals[cur]),
           keys[cur ^ 1], vals[cur ^ 1], rows, shift, static_cast<const uint32_t*>(counts), l.tiles);
  }
  if (dim == 0) return;
  launch(ctx, sumRunsKernel, dim3(blocksFor(ctx, rows * 32, kThreads)), dim3(kThreads), 0, static_cast<const uint32_t*>(keys[cur]),
         static_cast<const uint32_t*>(vals[cur]), floatsIn(in[0]), floatsOut(out[0]), rows, dim, num);
}

}  // namespace

REGISTER_CUDA_KERNEL("positions", positions, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("embedding", embedding, nullptr, UsesBlas::No, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("embedding_grad_weight", embeddingGradWeight, embeddingGradWorkspace);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
