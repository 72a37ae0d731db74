// Fused self-attention and its input gradient on the CUDA device, as device/cpu/kernels/attention.cc (the
// conventions are src/interp/kernels/attention.ts's: packed QKV [query heads | key heads | value heads],
// grouped-query attention by ⌊h / (heads / kv_heads)⌋, HF Llama rotate_half rotary embeddings, scores/√hd,
// causal mask j > i). The projections run on cuBLAS into the launch's workspace; a split kernel adds the bias,
// rotates and lays q, k, v out head-major; FlashAttention-style tiled kernels never materialise the S×S
// probabilities: the forward keeps an online softmax over key tiles (and leaves each row's logsumexp for the
// backward), the backward (FlashAttention-2) recomputes them tile by tile — dk and dv with a block per key tile
// and kv head, dq with a block per query tile and head — so every sum has one owner (no atomics) and a fixed
// order. Two paths: with 16-bit x and W_qkv and a head dim that is a multiple of 16, q, k, v (and the
// backward's dctx) are stored 16-bit and every tile product runs on tensor cores (WMMA, f32 accumulation; the
// softmax in f32 through shared memory), when the kernels loaded for the device have them (sm_80 and later);
// otherwise q, k, v are f32 and the tile products f32 FMAs on shared-memory tiles (dotRows, accumulate).
// Rotations run in double, as on the CPU.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "device/cuda/blas.h"
#include "device/cuda/device_code.h"
#include "device/cuda/tensor_cores.h"

#ifndef FSM_UNROLL
#ifdef __CUDACC__
#define FSM_UNROLL _Pragma("unroll")
#else
#define FSM_UNROLL
#endif
#endif

namespace fsm {
namespace FSM_CUDA_NS {
namespace {

/** Base of the rotary frequencies (Llama's rope_theta; ROPE_BASE in attention.ts). */
constexpr double kRopeBase = 10000;
/** The largest head dim the tiled kernels take (gpt2: 64, llama: 128). */
constexpr int64_t kMaxHeadDim = 128;
constexpr int kThreads = 256;      // the elementwise kernels' blocks
constexpr int kTileThreads = 128;  // the tiled kernels' blocks: 4 warps

// A tensor-parallel device (the pass's `parts` = p) computes H = heads / p query and K = kv_heads / p key/value
// heads of the whole model's head dim (src/graph/ops/attention.ts attentionWidths): its context is C = H·hd
// wide, W_proj is [d, C] (the row-parallel half of Megatron's split), and the output bias is added after the
// group's all-reduce, not here.
struct Dims {
  int64_t B, S, d, H, K, hd;
  int64_t W;  // width of the packed projection, (H + 2K)·hd
  int64_t C;  // width of the context, H·hd (d unless the heads are split)
  bool causal, rope, bias;
  bool projBias;  // b_proj is an operand (bias, heads not split)
};

int64_t partsOf(const Attrs& attrs) { return attrs.has("parts") ? static_cast<int64_t>(attrs.number("parts")) : 1; }

/** Operands of the forward: x, W_qkv, [b_qkv], W_proj, [b_proj]; b_proj only where the heads are not split. */
size_t forwardOperands(const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  return 3 + (bias ? 1 : 0) + (bias && partsOf(attrs) == 1 ? 1 : 0);
}

/** The dims of an attention over x [B, S, d] with these weights; throws for shapes the op cannot have. */
Dims dimsOf(const Tensor& x, const Tensor& wqkv, const Tensor& wproj, const Attrs& attrs) {
  if (x.rank() != 3) throw std::invalid_argument("attention input must be [B, S, d]");
  Dims D;
  D.B = x.shape[0];
  D.S = x.shape[1];
  D.d = x.shape[2];
  const int64_t parts = partsOf(attrs);
  const int64_t heads = static_cast<int64_t>(attrs.number("heads"));
  const int64_t kv = attrs.has("kv_heads") ? static_cast<int64_t>(attrs.number("kv_heads")) : heads;
  // x is the whole d wide on every rank of the group: the head dim is the model's.
  if (heads < 1 || kv < 1 || D.d % heads != 0 || heads % kv != 0) {
    throw std::invalid_argument("attention needs heads dividing d and kv_heads dividing heads, got d " + std::to_string(D.d) + ", heads " +
                                std::to_string(heads) + ", kv_heads " + std::to_string(kv));
  }
  if (parts < 1 || heads % parts != 0 || kv % parts != 0) {
    throw std::invalid_argument("attention split over " + std::to_string(parts) + " ranks needs parts dividing heads (" + std::to_string(heads) +
                                ") and kv_heads (" + std::to_string(kv) + ")");
  }
  D.H = heads / parts;
  D.K = kv / parts;
  D.hd = D.d / heads;
  D.W = (D.H + 2 * D.K) * D.hd;
  D.C = D.H * D.hd;
  D.causal = attrs.boolean("causal");
  D.rope = attrs.boolean("rope");
  D.bias = attrs.boolean("bias");
  D.projBias = D.bias && parts == 1;
  if (D.hd > kMaxHeadDim) {
    throw std::invalid_argument("not implemented: attention with head dim " + std::to_string(D.hd) + " on the CUDA device (at most " +
                                std::to_string(kMaxHeadDim) + ")");
  }
  if (wqkv.shape != std::vector<int64_t>{D.W, D.d} || wproj.shape != std::vector<int64_t>{D.d, D.C}) {
    throw std::invalid_argument("attention weights must be W_qkv [" + std::to_string(D.W) + ", " + std::to_string(D.d) + "] and W_proj [" +
                                std::to_string(D.d) + ", " + std::to_string(D.C) + "]");
  }
  return D;
}

void expectOperands(const std::vector<Tensor>& in, size_t count, const char* op) {
  if (in.size() != count) {
    throw std::invalid_argument(std::string(op) + " takes " + std::to_string(count) + " operands with this bias attribute, got " + std::to_string(in.size()));
  }
}

// --- workspace ------------------------------------------------------------------------------------------

/** Head rows of the tensor-core path are padded with zero rows to a multiple of this, so its tiles are whole. */
constexpr int64_t kPadRows = 64;

int64_t paddedRows(int64_t S) { return (S + kPadRows - 1) / kPadRows * kPadRows; }

/** The tensor-core path's 16-bit type for these operands (x and W_qkv bf16, or both f16, and a head dim that
 *  is a multiple of 16), or kF32 for the f32 path. Whether the device runs it is asked at launch (tensorCores). */
int tensorCoreType(const Dims& D, const Tensor& x, const Tensor& wqkv) {
  const int type = floatTypeOf(x, "attention input");
  return type != kF32 && floatTypeOf(wqkv, "W_qkv") == type && D.hd % 16 == 0 ? type : static_cast<int>(kF32);
}

/** Byte offsets of the launch's scratch regions (each 256-byte aligned) and their total. */
struct Layout {
  size_t qkv = 0;              // f32 [B·S, W]; once split into heads: the forward's context, or the backward's dq | dk | dv
  size_t cos = 0, sin = 0;     // f64 [S, hd/2] rotary tables (rope only)
  size_t q = 0, k = 0, v = 0;  // head-major, rotated: q [B,H,S,hd], k and v [B,K,S,hd]; f32, or 16-bit with S padded
  size_t dctx = 0;             // backward: f32 [B·S, d] = dy·W_proj
  size_t dout = 0;             // backward, tensor cores: dctx 16-bit, head-major [B,H,S,hd] with S padded
  size_t lse = 0, delta = 0;   // backward: f32 [B,H,S], each row's logsumexp and D = rowsum(dctx∘ctx)
  size_t bytes = 0;
};

size_t region(size_t& at, size_t bytes) {
  const size_t here = at;
  at += (bytes + 255) / 256 * 256;
  return here;
}

// The forward's context ([B·S, d], at most 4 bytes an element) and the gradients dq | dk | dv ([B·S·W] f32 in
// all, unpadded on both paths) fit where qkv was, which nothing reads after the split.
Layout layoutOf(const Dims& D, bool backward, bool tensorCores) {
  Layout L;
  size_t at = 0;
  const size_t f = sizeof(float), rows = static_cast<size_t>(D.B * D.S);
  const size_t headRows = static_cast<size_t>(D.B * (tensorCores ? paddedRows(D.S) : D.S)), e = tensorCores ? 2 : f;
  L.qkv = region(at, rows * D.W * f);
  if (D.rope) {
    L.cos = region(at, static_cast<size_t>(D.S * (D.hd / 2)) * sizeof(double));
    L.sin = region(at, static_cast<size_t>(D.S * (D.hd / 2)) * sizeof(double));
  }
  L.q = region(at, headRows * D.H * D.hd * e);
  L.k = region(at, headRows * D.K * D.hd * e);
  L.v = region(at, headRows * D.K * D.hd * e);
  if (backward) {
    L.dctx = region(at, rows * D.C * f);
    if (tensorCores) L.dout = region(at, headRows * D.H * D.hd * 2);
    L.lse = region(at, rows * D.H * f);
    L.delta = region(at, rows * D.H * f);
  }
  L.bytes = at;
  return L;
}

/** The scratch a launch may need: the path is chosen at launch (by the kernels the device loaded), so it covers
 *  both paths these operands can take. */
size_t workspaceOf(const Dims& D, bool backward, int tensorCoreType) {
  const size_t f32 = layoutOf(D, backward, false).bytes;
  return tensorCoreType == kF32 ? f32 : std::max(f32, layoutOf(D, backward, true).bytes);
}

template <typename T>
T* at(const KernelContext& ctx, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(ctx.workspace) + offset);
}

// --- layout kernels -------------------------------------------------------------------------------------

/** Per-head tensors: q [B,H,S,hd], k and v [B,K,S,hd] (or their gradients), f32 or 16-bit bits; S is the rows
 *  a head has (the tensor-core path's are padded to kPadRows). */
template <typename T>
struct HeadsOf {
  T* q;
  T* k;
  T* v;
  int64_t S, H, K, hd;

  /** Row s of packed head j (j < H: query head j; then the K key heads; then the K value heads) of batch b. */
  FSM_HD T* row(int64_t b, int64_t s, int64_t j) const {
    if (j < H) return q + ((b * H + j) * S + s) * hd;
    if (j < H + K) return k + ((b * K + j - H) * S + s) * hd;
    return v + ((b * K + j - H - K) * S + s) * hd;
  }
};
using Heads = HeadsOf<float>;
using Heads16 = HeadsOf<uint16_t>;

/** How q, k, v are stored from f32: as f32, or as the bits of a 16-bit WMMA element type E. */
template <typename E>
struct Stored {
  using T = uint16_t;
  static FSM_HD T of(float v) { return Bits16<E>::of(v); }
};
template <>
struct Stored<float> {
  using T = float;
  static FSM_HD T of(float v) { return v; }
};

// cos/sin of the angles s·base^(−2e/hd), [S, hd/2], in double as the CPU's tables.
__global__ void ropeTables(double* cosT, double* sinT, int64_t S, int64_t half, int64_t hd) {
  const int64_t n = S * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n; t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double angle = static_cast<double>(t / half) * pow(kRopeBase, -static_cast<double>(2 * (t % half)) / static_cast<double>(hd));
    cosT[t] = cos(angle);
    sinT[t] = sin(angle);
  }
}

/** Element e of a head vector after rotate_half (sign +1) or its inverse (−1), given e's partner (e ± hd/2);
 *  an odd head dim's last element is not rotated. */
FSM_HD double rotated(double a, double partner, int64_t e, int64_t half, double c, double sn, double sign) {
  if (e >= 2 * half) return a;
  return e < half ? a * c - sign * partner * sn : a * c + sign * partner * sn;
}

// qkv [B·S, W] (+ bias) → head-major q, k, v (heads.S ≥ S rows a head; the rows past S are zeros), queries
// and keys rotated: a thread per element of the heads.
template <typename E>
__global__ void splitHeads(const float* qkv, Floats bias, bool hasBias, const double* cosT, const double* sinT, bool rope,
                           HeadsOf<typename Stored<E>::T> heads, int64_t B, int64_t S) {
  const int64_t rows = heads.S, hd = heads.hd, half = hd / 2, W = (heads.H + 2 * heads.K) * hd;
  const int64_t n = B * rows * W;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n; t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = t % W, j = c / hd, e = c % hd, s = t / W % rows, b = t / W / rows;
    double a = 0.0;
    if (s < S) {
      const int64_t r = b * S + s;
      a = qkv[r * W + c] + (hasBias ? static_cast<double>(bias[c]) : 0.0);
      if (rope && j < heads.H + heads.K && e < 2 * half) {
        const int64_t pc = e < half ? c + half : c - half;
        const double partner = qkv[r * W + pc] + (hasBias ? static_cast<double>(bias[pc]) : 0.0);
        const int64_t te = s * half + e % half;
        a = rotated(a, partner, e, half, cosT[te], sinT[te], 1);
      }
    }
    heads.row(b, s, j)[e] = Stored<E>::of(static_cast<float>(a));
  }
}

// dq, dk, dv head-major → dqkv [B·S, W], the query and key gradients un-rotated (the rotation is orthogonal:
// its gradient is the inverse rotation): a thread per element of dqkv.
__global__ void packHeads(Heads grads, const double* cosT, const double* sinT, bool rope, FloatsOut dqkv, int64_t B) {
  const int64_t S = grads.S, hd = grads.hd, half = hd / 2, W = (grads.H + 2 * grads.K) * hd;
  const int64_t n = B * S * W;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n; t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / W, c = t % W, j = c / hd, e = c % hd, s = r % S;
    const float* from = grads.row(r / S, s, j);
    double a = from[e];
    if (rope && j < grads.H + grads.K && e < 2 * half) {
      const int64_t te = s * half + e % half;
      a = rotated(a, from[e < half ? e + half : e - half], e, half, cosT[te], sinT[te], -1);
    }
    dqkv.set(t, static_cast<float>(a));
  }
}

// y[r, c] = bias[c] over [rows, cols]: the C a β = 1 product adds onto.
__global__ void broadcastRows(Floats bias, FloatsOut y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n; k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y.set(k, bias[k % cols]);
  }
}

// --- tiles ----------------------------------------------------------------------------------------------

/** The tiled kernels' shapes for head dims up to HD: tiles of T rows (queries or keys) by HD dims, padded by
 *  one float a row so a warp's column reads hit distinct banks, and small enough that a block's tiles stay
 *  under 48 KiB of shared memory (no opt-in needed). A tile row belongs to kSub adjacent lanes: thread
 *  (row, sub) holds columns sub + kSub·j of the row's scores and dims sub + kSub·j of its accumulators. */
template <int HD>
struct Tile {
  static constexpr int T = HD <= 64 ? 32 : 16;
  static constexpr int kSub = kTileThreads / T;
  static constexpr int kCols = T / kSub;
  static constexpr int kDims = HD / kSub;
  static constexpr int kLd = HD + 1;
  static constexpr int kLdP = T + 1;
  static constexpr int kMatrix = T * kLd;  // floats of a [T, HD] tile
  static constexpr int kScores = T * kLdP;  // floats of a [T, T] tile
};

/** Rows [r0, r0 + T) of a [rows, hd] matrix (row r at src + r·ld) into a shared tile, zero past `rows` and hd. */
template <int HD>
__device__ __forceinline__ void loadTile(float* tile, const float* src, int64_t ld, int64_t r0, int64_t rows, int64_t hd) {
  using Tl = Tile<HD>;
  for (int t = threadIdx.x; t < Tl::T * HD; t += blockDim.x) {
    const int r = t / HD, e = t % HD;
    tile[r * Tl::kLd + e] = r0 + r < rows && e < hd ? src[(r0 + r) * ld + e] : 0.0f;
  }
}

/** out[j] = a[row]·b[sub + kSub·j]: this thread's share of the [T, T] tile a·bᵀ. */
template <int HD>
__device__ __forceinline__ void dotRows(const float* a, const float* b, int row, int sub, float (&out)[Tile<HD>::kCols]) {
  using Tl = Tile<HD>;
  FSM_UNROLL
  for (int j = 0; j < Tl::kCols; j++) out[j] = 0.0f;
  const float* ar = a + row * Tl::kLd;
  for (int e = 0; e < HD; e++) {
    const float x = ar[e];
    FSM_UNROLL
    for (int j = 0; j < Tl::kCols; j++) out[j] += x * b[(sub + Tl::kSub * j) * Tl::kLd + e];
  }
}

/** acc[j] += Σ_c p[row, c]·v[c, sub + kSub·j]: this thread's share of the [T, HD] tile p·v. */
template <int HD>
__device__ __forceinline__ void accumulate(const float* p, const float* v, int row, int sub, float (&acc)[Tile<HD>::kDims]) {
  using Tl = Tile<HD>;
  const float* pr = p + row * Tl::kLdP;
  for (int c = 0; c < Tl::T; c++) {
    const float w = pr[c];
    FSM_UNROLL
    for (int j = 0; j < Tl::kDims; j++) acc[j] += w * v[c * Tl::kLd + sub + Tl::kSub * j];
  }
}

/** The max and the sum over a tile row's kSub lanes (a fixed butterfly: every lane gets the same bits). */
template <int kSub>
__device__ __forceinline__ float rowMax(float v) {
  for (int o = kSub / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
template <int kSub>
__device__ __forceinline__ float rowSum(float v) {
  for (int o = kSub / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

/** What the tiled kernels share: the heads, the row stride of the context and its gradient, the score scale, the mask. */
struct Flash {
  Heads heads;
  int64_t d;    // the row stride of context and dctx ([B·S, C], head h at columns h·hd)
  float scale;  // 1/√hd
  bool causal;
};

// Forward, one block per (query tile, batch · head): context = softmax(q·kᵀ/√hd)·v with an online softmax over
// key tiles; when `lse` is given, each row's logsumexp and D = rowsum(dctx∘context) for the backward.
template <int HD>
__global__ void __launch_bounds__(kTileThreads) flashForward(Flash f, FloatsOut context, float* lse, const float* dctx, float* delta) {
  using Tl = Tile<HD>;
  FSM_DYNAMIC_SHARED(float, shared);
  float* qs = shared;
  float* ks = qs + Tl::kMatrix;
  float* vs = ks + Tl::kMatrix;
  float* ps = vs + Tl::kMatrix;
  const Heads& hs = f.heads;
  const int64_t S = hs.S, hd = hs.hd, bh = blockIdx.x, b = bh / hs.H, h = bh % hs.H, g = h / (hs.H / hs.K);
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * Tl::T;
  const int row = threadIdx.x / Tl::kSub, sub = threadIdx.x % Tl::kSub;
  const int64_t i = i0 + row;
  const float* kh = hs.k + (b * hs.K + g) * S * hd;
  const float* vh = hs.v + (b * hs.K + g) * S * hd;
  loadTile<HD>(qs, hs.q + bh * S * hd, hd, i0, S, hd);

  float m = -INFINITY, l = 0.0f, acc[Tl::kDims];
  FSM_UNROLL
  for (int j = 0; j < Tl::kDims; j++) acc[j] = 0.0f;
  const int64_t end = f.causal ? (i0 + Tl::T < S ? i0 + Tl::T : S) : S;
  for (int64_t j0 = 0; j0 < end; j0 += Tl::T) {
    __syncthreads();  // the last tile's readers are done with ks, vs, ps
    loadTile<HD>(ks, kh, hd, j0, S, hd);
    loadTile<HD>(vs, vh, hd, j0, S, hd);
    __syncthreads();
    float s[Tl::kCols];
    dotRows<HD>(qs, ks, row, sub, s);
    float tileMax = -INFINITY;
    FSM_UNROLL
    for (int j = 0; j < Tl::kCols; j++) {
      const int64_t col = j0 + sub + Tl::kSub * j;
      s[j] = col < S && (!f.causal || col <= i) ? s[j] * f.scale : -INFINITY;
      tileMax = fmaxf(tileMax, s[j]);
    }
    const float mNew = fmaxf(m, rowMax<Tl::kSub>(tileMax));
    const float base = mNew == -INFINITY ? 0.0f : mNew;  // a row that has seen no key yet keeps zeros
    const float correction = expf(m - base);
    float sum = 0.0f;
    FSM_UNROLL
    for (int j = 0; j < Tl::kCols; j++) {
      const float p = expf(s[j] - base);
      ps[row * Tl::kLdP + sub + Tl::kSub * j] = p;
      sum += p;
    }
    l = l * correction + rowSum<Tl::kSub>(sum);
    m = mNew;
    FSM_UNROLL
    for (int j = 0; j < Tl::kDims; j++) acc[j] *= correction;
    __syncthreads();
    accumulate<HD>(ps, vs, row, sub, acc);
  }

  const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // l > 0 on every row of the sequence: key 0 is always seen
  const int64_t o = (b * S + i) * f.d + h * hd;
  float dot = 0.0f;
  FSM_UNROLL
  for (int j = 0; j < Tl::kDims; j++) {
    const int64_t e = sub + Tl::kSub * j;
    if (i < S && e < hd) {
      const float c = acc[j] * inv;
      context.set(o + e, c);
      if (delta) dot += c * dctx[o + e];
    }
  }
  if (delta) dot = rowSum<Tl::kSub>(dot);
  if (i < S && sub == 0) {
    if (lse) lse[bh * S + i] = m + logf(l);
    if (delta) delta[bh * S + i] = dot;
  }
}

// Backward for keys, one block per (key tile, batch · kv head): dv = Σ pᵀ·dctx and dk = Σ dsᵀ·q over the query
// tiles of every query head reading this kv head, in a fixed order, ds = p∘(dp − D)/√hd and dp = dctx·vᵀ.
template <int HD>
__global__ void __launch_bounds__(kTileThreads) flashBackwardKV(Flash f, const float* dctx, const float* lse, const float* delta, Heads grads) {
  using Tl = Tile<HD>;
  FSM_DYNAMIC_SHARED(float, shared);
  float* ks = shared;
  float* vs = ks + Tl::kMatrix;
  float* qs = vs + Tl::kMatrix;
  float* dos = qs + Tl::kMatrix;
  float* pt = dos + Tl::kMatrix;  // [key, query] tiles: p and ds transposed
  float* dst = pt + Tl::kScores;
  float* lseS = dst + Tl::kScores;
  float* deltaS = lseS + Tl::T;
  const Heads& hs = f.heads;
  const int64_t S = hs.S, hd = hs.hd, bg = blockIdx.x, b = bg / hs.K, g = bg % hs.K, rep = hs.H / hs.K;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * Tl::T;
  const int row = threadIdx.x / Tl::kSub, sub = threadIdx.x % Tl::kSub;
  const int64_t c = j0 + row;  // this thread's key
  loadTile<HD>(ks, hs.k + bg * S * hd, hd, j0, S, hd);
  loadTile<HD>(vs, hs.v + bg * S * hd, hd, j0, S, hd);

  float dk[Tl::kDims], dv[Tl::kDims];
  FSM_UNROLL
  for (int j = 0; j < Tl::kDims; j++) dk[j] = dv[j] = 0.0f;
  for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
    const int64_t bh = b * hs.H + h;
    // Causal: the query tiles before this key tile see none of its keys (tiles are aligned, T by T).
    for (int64_t i0 = f.causal ? j0 : 0; i0 < S; i0 += Tl::T) {
      __syncthreads();  // the last tile's readers are done with qs, dos, pt, dst
      loadTile<HD>(qs, hs.q + bh * S * hd, hd, i0, S, hd);
      loadTile<HD>(dos, dctx + b * S * f.d + h * hd, f.d, i0, S, hd);
      for (int t = threadIdx.x; t < Tl::T; t += blockDim.x) {
        lseS[t] = i0 + t < S ? lse[bh * S + i0 + t] : 0.0f;
        deltaS[t] = i0 + t < S ? delta[bh * S + i0 + t] : 0.0f;
      }
      __syncthreads();
      float s[Tl::kCols], dp[Tl::kCols];
      dotRows<HD>(ks, qs, row, sub, s);
      dotRows<HD>(vs, dos, row, sub, dp);
      FSM_UNROLL
      for (int j = 0; j < Tl::kCols; j++) {
        const int col = sub + Tl::kSub * j;
        const int64_t i = i0 + col;
        const float p = i < S && c < S && (!f.causal || c <= i) ? expf(s[j] * f.scale - lseS[col]) : 0.0f;
        pt[row * Tl::kLdP + col] = p;
        dst[row * Tl::kLdP + col] = p * (dp[j] - deltaS[col]) * f.scale;
      }
      __syncthreads();
      accumulate<HD>(pt, dos, row, sub, dv);
      accumulate<HD>(dst, qs, row, sub, dk);
    }
  }
  if (c < S) {
    FSM_UNROLL
    for (int j = 0; j < Tl::kDims; j++) {
      const int64_t e = sub + Tl::kSub * j;
      if (e < hd) {
        grads.k[(bg * S + c) * hd + e] = dk[j];
        grads.v[(bg * S + c) * hd + e] = dv[j];
      }
    }
  }
}

// Backward for queries, one block per (query tile, batch · head): dq = Σ ds·k over the key tiles.
template <int HD>
__global__ void __launch_bounds__(kTileThreads) flashBackwardQ(Flash f, const float* dctx, const float* lse, const float* delta, Heads grads) {
  using Tl = Tile<HD>;
  FSM_DYNAMIC_SHARED(float, shared);
  float* qs = shared;
  float* dos = qs + Tl::kMatrix;
  float* ks = dos + Tl::kMatrix;
  float* vs = ks + Tl::kMatrix;
  float* dss = vs + Tl::kMatrix;
  const Heads& hs = f.heads;
  const int64_t S = hs.S, hd = hs.hd, bh = blockIdx.x, b = bh / hs.H, h = bh % hs.H, g = h / (hs.H / hs.K);
  const int64_t i0 = static_cast<int64_t>(blockIdx.y) * Tl::T;
  const int row = threadIdx.x / Tl::kSub, sub = threadIdx.x % Tl::kSub;
  const int64_t i = i0 + row;
  const float* kh = hs.k + (b * hs.K + g) * S * hd;
  const float* vh = hs.v + (b * hs.K + g) * S * hd;
  loadTile<HD>(qs, hs.q + bh * S * hd, hd, i0, S, hd);
  loadTile<HD>(dos, dctx + b * S * f.d + h * hd, f.d, i0, S, hd);
  const float rowLse = i < S ? lse[bh * S + i] : 0.0f, rowDelta = i < S ? delta[bh * S + i] : 0.0f;

  float dq[Tl::kDims];
  FSM_UNROLL
  for (int j = 0; j < Tl::kDims; j++) dq[j] = 0.0f;
  const int64_t end = f.causal ? (i0 + Tl::T < S ? i0 + Tl::T : S) : S;
  for (int64_t j0 = 0; j0 < end; j0 += Tl::T) {
    __syncthreads();  // the last tile's readers are done with ks, vs, dss
    loadTile<HD>(ks, kh, hd, j0, S, hd);
    loadTile<HD>(vs, vh, hd, j0, S, hd);
    __syncthreads();
    float s[Tl::kCols], dp[Tl::kCols];
    dotRows<HD>(qs, ks, row, sub, s);
    dotRows<HD>(dos, vs, row, sub, dp);
    FSM_UNROLL
    for (int j = 0; j < Tl::kCols; j++) {
      const int col = sub + Tl::kSub * j;
      const int64_t key = j0 + col;
      const float p = i < S && key < S && (!f.causal || key <= i) ? expf(s[j] * f.scale - rowLse) : 0.0f;
      dss[row * Tl::kLdP + col] = p * (dp[j] - rowDelta) * f.scale;
    }
    __syncthreads();
    accumulate<HD>(dss, ks, row, sub, dq);
  }
  if (i < S) {
    FSM_UNROLL
    for (int j = 0; j < Tl::kDims; j++) {
      const int64_t e = sub + Tl::kSub * j;
      if (e < hd) grads.q[(bh * S + i) * hd + e] = dq[j];
    }
  }
}

// --- tensor-core tiles ----------------------------------------------------------------------------------

/** The tensor-core kernels' shapes for head dims up to HD (a multiple of 16). A block is 4 warps, each owning 16
 *  rows of the block's own tile (queries in the forward and dq kernels, keys in the dk/dv one) and holding them
 *  as WMMA fragments; the other side (keys, or queries) is staged in shared memory kStep rows at a time. Row
 *  strides (elements) keep every WMMA tile 32-byte aligned and shift shared-memory banks from row to row. */
template <int HD>
struct Tc {
  static constexpr int kWarps = kTileThreads / 32;
  static constexpr int kRows = 16 * kWarps;           // a block's own rows
  static constexpr int kStep = HD <= 64 ? 64 : 32;    // rows of the other side a step
  static constexpr int kDims = HD / 16;               // 16-wide column blocks of a head
  static constexpr int kLd = HD + 8;                  // a staged [kStep, HD] 16-bit tile
  static constexpr int kLdS = kStep + 4;              // the forward's [16, kStep] f32 scores, a warp
  static constexpr int kLdP = kStep + 8;              // and their 16-bit probabilities
  static constexpr int kLdC = 16 + 4;                 // the backward's [16, 16] f32 chunks, a warp
  static constexpr int kLdH = 16 + 8;                 // and 16-bit ones
  static constexpr size_t kTile = size_t{kStep} * kLd * 2;
  static constexpr size_t kChunk = 16 * kLdC * 4, kChunk16 = 16 * kLdH * 2;
  // Shared bytes: the forward's k and v tiles and, a warp, scores and probabilities; dk/dv's q and dctx tiles,
  // their rows' logsumexp and D, and, a warp, s, dp, p, ds chunks; dq's k and v tiles and s, dp, ds chunks.
  static constexpr size_t kForwardWarp = 16 * kLdS * 4 + 16 * kLdP * 2;
  static constexpr size_t kForward = 2 * kTile + kWarps * kForwardWarp;
  static constexpr size_t kKeysWarp = 2 * kChunk + 2 * kChunk16;
  static constexpr size_t kKeys = 2 * kTile + 2 * kStep * 4 + kWarps * kKeysWarp;
  static constexpr size_t kQueriesWarp = 2 * kChunk + kChunk16;
  static constexpr size_t kQueries = 2 * kTile + kWarps * kQueriesWarp;
  static_assert(kTile % 32 == 0 && kChunk % 32 == 0 && kChunk16 % 32 == 0 && 16 * kLdS * 4 % 32 == 0 && kStep * 4 % 32 == 0,
                "every WMMA tile in shared memory starts 32-byte aligned");
  static_assert(kPadRows % kRows == 0 && kPadRows % kStep == 0, "padded heads hold whole tiles");
  static_assert(kDims * 16 == HD, "tensor-core head dims are multiples of 16");
};

/** Slack a tensor-core launch adds to its shared bytes, so the tiles can start on a 128-byte boundary. */
constexpr size_t kSharedSlack = 128;
static_assert(Tc<128>::kForward + kSharedSlack <= 48 * 1024 && Tc<64>::kForward + kSharedSlack <= 48 * 1024 &&
                  Tc<128>::kKeys + kSharedSlack <= 48 * 1024 && Tc<64>::kKeys + kSharedSlack <= 48 * 1024 &&
                  Tc<128>::kQueries + kSharedSlack <= 48 * 1024 && Tc<64>::kQueries + kSharedSlack <= 48 * 1024,
              "the tensor-core kernels stay within the 48 KiB of shared memory a block gets without opting in");

/** What the tensor-core kernels share: the 16-bit heads (heads.S: rows padded to kPadRows, zero past S), the
 *  sequence length, the row stride of context and dctx, the score scale, the mask. Their softmax runs in base 2
 *  (exp2f is one instruction on a GPU): scores times scaleLog2 = log2(e)/√hd, and the logsumexp they leave
 *  for the backward is base 2 too. */
struct FlashTc {
  Heads16 heads;
  int64_t S;
  int64_t d;
  float scale;
  float scaleLog2;
  bool causal;
};

#if FSM_WMMA16
template <typename E>
using FragA = fsmwmma::fragment<fsmwmma::matrix_a, 16, 16, 16, E, fsmwmma::row_major>;
template <typename E>
using FragB = fsmwmma::fragment<fsmwmma::matrix_b, 16, 16, 16, E, fsmwmma::row_major>;
/** A row-major [n, k] tile read as the k × n right operand: the transposed product a·bᵀ. */
template <typename E>
using FragBt = fsmwmma::fragment<fsmwmma::matrix_b, 16, 16, 16, E, fsmwmma::col_major>;
using FragC = fsmwmma::fragment<fsmwmma::accumulator, 16, 16, 16, float>;

template <typename E>
__device__ __forceinline__ const E* elements(const uint16_t* p) {
  return reinterpret_cast<const E*>(p);
}

/** The block's dynamic shared memory from a 128-byte boundary (WMMA tiles must be 32-byte aligned; the
 *  launch adds kSharedSlack bytes). */
__device__ __forceinline__ unsigned char* tcShared() {
  FSM_DYNAMIC_SHARED(unsigned char, raw);
  return raw + (128 - reinterpret_cast<uintptr_t>(raw) % 128) % 128;
}

/** 16 bytes from one aligned place to another (one vector load and store on a GPU). */
__device__ __forceinline__ void copy16(void* to, const void* from) {
#ifdef FSM_SIMT
  std::memcpy(to, from, 16);
#else
  *static_cast<uint4*>(to) = *static_cast<const uint4*>(from);
#endif
}

/** `rows` rows of a padded 16-bit head (hd elements a row) into a shared tile LD elements a row, by the block. */
template <int LD>
__device__ __forceinline__ void stageRows(uint16_t* tile, const uint16_t* src, int rows, int64_t hd) {
  const int chunks = static_cast<int>(hd / 8);
  for (int t = threadIdx.x; t < rows * chunks; t += blockDim.x) {
    const int r = t / chunks, c = t % chunks * 8;
    copy16(tile + r * LD + c, src + r * hd + c);
  }
}

/** A warp's two 16×16 products with chunk n of two staged tiles: s = xa·(chunk of xs)ᵀ and dp = ya·(chunk of
 *  ys)ᵀ over the head's nd 16-wide slices (the backward's scores and dP), stored to the warp's shared sc and
 *  dpc (f32, row-major) for the per-element work that follows. */
template <class C, typename E>
__device__ __forceinline__ void scoresAndDp(const FragA<E>* xa, const uint16_t* xs, const FragA<E>* ya, const uint16_t* ys, int n, int64_t nd,
                                            float* sc, float* dpc) {
  namespace wm = fsmwmma;
  FragC s, dp;
  wm::fill_fragment(s, 0.0f);
  wm::fill_fragment(dp, 0.0f);
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) {
      FragBt<E> xb, yb;
      wm::load_matrix_sync(xb, elements<E>(xs + n * 16 * C::kLd + t * 16), C::kLd);
      wm::mma_sync(s, xa[t], xb, s);
      wm::load_matrix_sync(yb, elements<E>(ys + n * 16 * C::kLd + t * 16), C::kLd);
      wm::mma_sync(dp, ya[t], yb, dp);
    }
  }
  __syncwarp();  // the last chunk's readers are done with sc, dpc
  wm::store_matrix_sync(sc, s, C::kLdC, wm::mem_row_major);
  wm::store_matrix_sync(dpc, dp, C::kLdC, wm::mem_row_major);
  __syncwarp();
}
#endif

// Forward on tensor cores, one block per (query tile, batch · head), 16 query rows a warp: per key step the
// warp's scores S = q·kᵀ (16 keys at a time) go to its shared scores, the online softmax runs there in f32 —
// lane pair (2r, 2r + 1) on row r — and leaves p 16-bit for p·v, and each row's correction as a tile that
// rescales the context accumulators elementwise. With `delta`: each row's logsumexp, D = rowsum(dctx∘context)
// and dctx 16-bit and head-major (`dout`, zero rows past S) for the backward.
template <int HD, typename E>
__global__ void __launch_bounds__(kTileThreads) flashForwardTc(FlashTc f, FloatsOut context, float* lse, const float* dctx, float* delta, uint16_t* dout) {
#if FSM_WMMA16
  namespace wm = fsmwmma;
  using C = Tc<HD>;
  unsigned char* shared = tcShared();
  uint16_t* ks = reinterpret_cast<uint16_t*>(shared);
  uint16_t* vs = ks + C::kStep * C::kLd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  float* scores = reinterpret_cast<float*>(shared + 2 * C::kTile + warp * C::kForwardWarp);
  uint16_t* ps = reinterpret_cast<uint16_t*>(scores + 16 * C::kLdS);
  float* row = scores + r * C::kLdS;
  const Heads16& hs = f.heads;
  const int64_t S = f.S, Sp = hs.S, hd = hs.hd, nd = hd / 16;
  const int64_t bh = blockIdx.x, b = bh / hs.H, h = bh % hs.H, g = h / (hs.H / hs.K);
  // Causal rows see more keys the later they are: the longest tiles go first.
  const int64_t i0 = static_cast<int64_t>(f.causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y) * C::kRows;
  const int64_t r0 = i0 + 16 * warp, i = r0 + r;
  const uint16_t* kh = hs.k + (b * hs.K + g) * Sp * hd;
  const uint16_t* vh = hs.v + (b * hs.K + g) * Sp * hd;

  FragA<E> qa[C::kDims];
  FragC o[C::kDims];
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) wm::load_matrix_sync(qa[t], elements<E>(hs.q + (bh * Sp + r0) * hd + t * 16), static_cast<unsigned>(hd));
    wm::fill_fragment(o[t], 0.0f);
  }
  float m = -INFINITY, l = 0.0f;  // row r's running max and sum (the same in both lanes of the row)
  const int64_t end = f.causal ? std::min<int64_t>(i0 + C::kRows, S) : S;
  for (int64_t j0 = 0; j0 < end; j0 += C::kStep) {
    __syncthreads();  // the last step's readers are done with ks, vs
    stageRows<C::kLd>(ks, kh + j0 * hd, C::kStep, hd);
    stageRows<C::kLd>(vs, vh + j0 * hd, C::kStep, hd);
    __syncthreads();
    FSM_UNROLL
    for (int n = 0; n < C::kStep / 16; n++) {
      FragC s;
      wm::fill_fragment(s, 0.0f);
      FSM_UNROLL
      for (int t = 0; t < C::kDims; t++) {
        if (t < nd) {
          FragBt<E> kb;
          wm::load_matrix_sync(kb, elements<E>(ks + n * 16 * C::kLd + t * 16), C::kLd);
          wm::mma_sync(s, qa[t], kb, s);
        }
      }
      wm::store_matrix_sync(scores + n * 16, s, C::kLdS, wm::mem_row_major);
    }
    __syncwarp();
    float v[C::kStep / 2], tileMax = -INFINITY;  // this lane's scores: columns half + 2u
    FSM_UNROLL
    for (int u = 0; u < C::kStep / 2; u++) {
      const int64_t key = j0 + half + 2 * u;
      v[u] = key < S && (!f.causal || key <= i) ? row[half + 2 * u] * f.scaleLog2 : -INFINITY;
      tileMax = fmaxf(tileMax, v[u]);
    }
    const float mNew = fmaxf(m, fmaxf(tileMax, __shfl_xor_sync(kFullMask, tileMax, 1)));
    const float base = mNew == -INFINITY ? 0.0f : mNew;  // a row that has seen no key yet keeps zeros
    const float correction = exp2f(m - base);
    float sum = 0.0f;
    FSM_UNROLL
    for (int u = 0; u < C::kStep / 2; u++) {
      const float p = exp2f(v[u] - base);
      ps[r * C::kLdP + half + 2 * u] = Bits16<E>::of(p);
      sum += p;
    }
    l = l * correction + (sum + __shfl_xor_sync(kFullMask, sum, 1));
    m = mNew;
    __syncwarp();  // every lane has read its scores: their first 16 columns take each row's correction
    for (int c = 8 * half; c < 8 * half + 8; c++) row[c] = correction;
    __syncwarp();
    FragC rescale;
    wm::load_matrix_sync(rescale, scores, C::kLdS, wm::mem_row_major);
    FragA<E> pa[C::kStep / 16];
    FSM_UNROLL
    for (int kk = 0; kk < C::kStep / 16; kk++) wm::load_matrix_sync(pa[kk], elements<E>(ps + kk * 16), C::kLdP);
    FSM_UNROLL
    for (int t = 0; t < C::kDims; t++) {
      if (t < nd) {
        // Both fragments are accumulators: element e is the same (row, column) of each, wherever that is.
        for (int e = 0; e < o[t].num_elements; e++) o[t].x[e] *= rescale.x[e];
        FSM_UNROLL
        for (int kk = 0; kk < C::kStep / 16; kk++) {
          FragB<E> vb;
          wm::load_matrix_sync(vb, elements<E>(vs + kk * 16 * C::kLd + t * 16), C::kLd);
          wm::mma_sync(o[t], pa[kk], vb, o[t]);
        }
      }
    }
  }

  // context = o / l, 16 dims at a time through the warp's scores.
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // l > 0 on every row: key 0 is always seen
  const int64_t at = (b * S + i) * f.d + h * hd;
  float dot = 0.0f;
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) {
      __syncwarp();  // the scores' last readers are done
      wm::store_matrix_sync(scores, o[t], C::kLdS, wm::mem_row_major);
      __syncwarp();
      for (int c = 8 * half; c < 8 * half + 8; c++) {
        const int64_t e = t * 16 + c;
        if (i < S) {
          const float v = row[c] * inv;
          context.set(at + e, v);
          if (delta) {
            // D from the 16-bit dctx the backward's dp = dctx·vᵀ reads, so that Σ_j p·dp = D holds as closely
            // as the rounded values allow (ds = p∘(dp − D) cancels).
            const uint16_t bits = Bits16<E>::of(dctx[at + e]);
            dout[(bh * Sp + i) * hd + e] = bits;
            dot += v * Bits16<E>::value(bits);
          }
        } else if (delta) {
          dout[(bh * Sp + i) * hd + e] = 0;
        }
      }
    }
  }
  dot += __shfl_xor_sync(kFullMask, dot, 1);
  if (i < S && half == 0) {
    if (lse) lse[bh * S + i] = m + log2f(l);  // base 2
    if (delta) delta[bh * S + i] = dot;
  }
#else
  __trap();  // never launched: the host takes the f32 path where the loaded kernels lack 16-bit WMMA (wmma16Loaded)
#endif
}

// Backward for keys on tensor cores, one block per (key tile, batch · kv head), 16 keys a warp holding their k
// and v rows as fragments: over the query steps of every query head reading this kv head, in a fixed order,
// 16 queries at a time, sᵀ = k·qᵀ and dpᵀ = v·dctxᵀ go to the warp's shared chunks, pᵀ and dsᵀ = pᵀ∘(dpᵀ − D)/√hd
// are formed there in f32 and taken back 16-bit for dv += pᵀ·dctx and dk += dsᵀ·q.
template <int HD, typename E>
__global__ void __launch_bounds__(kTileThreads) flashBackwardKVTc(FlashTc f, const uint16_t* dout, const float* lse, const float* delta, Heads grads) {
#if FSM_WMMA16
  namespace wm = fsmwmma;
  using C = Tc<HD>;
  unsigned char* shared = tcShared();
  uint16_t* qs = reinterpret_cast<uint16_t*>(shared);
  uint16_t* dos = qs + C::kStep * C::kLd;
  float* lseS = reinterpret_cast<float*>(shared + 2 * C::kTile);
  float* deltaS = lseS + C::kStep;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  unsigned char* mine = shared + 2 * C::kTile + 2 * C::kStep * 4 + warp * C::kKeysWarp;
  float* sc = reinterpret_cast<float*>(mine);
  float* dpc = reinterpret_cast<float*>(mine + C::kChunk);
  uint16_t* pc = reinterpret_cast<uint16_t*>(mine + 2 * C::kChunk);
  uint16_t* dsc = reinterpret_cast<uint16_t*>(mine + 2 * C::kChunk + C::kChunk16);
  const Heads16& hs = f.heads;
  const int64_t S = f.S, Sp = hs.S, hd = hs.hd, nd = hd / 16;
  const int64_t bg = blockIdx.x, b = bg / hs.K, g = bg % hs.K, rep = hs.H / hs.K;
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * C::kRows, k0 = j0 + 16 * warp;
  const int64_t key = k0 + r;  // this lane's key in the chunks

  FragA<E> ka[C::kDims], va[C::kDims];
  FragC dk[C::kDims], dv[C::kDims];
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) {
      wm::load_matrix_sync(ka[t], elements<E>(hs.k + (bg * Sp + k0) * hd + t * 16), static_cast<unsigned>(hd));
      wm::load_matrix_sync(va[t], elements<E>(hs.v + (bg * Sp + k0) * hd + t * 16), static_cast<unsigned>(hd));
    }
    wm::fill_fragment(dk[t], 0.0f);
    wm::fill_fragment(dv[t], 0.0f);
  }
  for (int64_t h = g * rep; h < (g + 1) * rep; h++) {
    const int64_t bh = b * hs.H + h;
    // Causal: the query steps before this key tile see none of its keys (both start at multiples of kStep).
    for (int64_t i0 = f.causal ? j0 : 0; i0 < S; i0 += C::kStep) {
      __syncthreads();  // the last step's readers are done with qs, dos, lseS, deltaS
      stageRows<C::kLd>(qs, hs.q + (bh * Sp + i0) * hd, C::kStep, hd);
      stageRows<C::kLd>(dos, dout + (bh * Sp + i0) * hd, C::kStep, hd);
      for (int t = threadIdx.x; t < C::kStep; t += blockDim.x) {
        lseS[t] = i0 + t < S ? lse[bh * S + i0 + t] : 0.0f;
        deltaS[t] = i0 + t < S ? delta[bh * S + i0 + t] : 0.0f;
      }
      __syncthreads();
      FSM_UNROLL
      for (int n = 0; n < C::kStep / 16; n++) {
        if (f.causal && i0 + 16 * n + 15 < k0) continue;  // every query of the chunk is before every key of the warp
        scoresAndDp<C, E>(ka, qs, va, dos, n, nd, sc, dpc);  // sᵀ and dpᵀ: keys by rows
        for (int c = 8 * half; c < 8 * half + 8; c++) {
          const int q = n * 16 + c;
          const int64_t i = i0 + q;
          const float p = i < S && key < S && (!f.causal || key <= i) ? exp2f(sc[r * C::kLdC + c] * f.scaleLog2 - lseS[q]) : 0.0f;
          pc[r * C::kLdH + c] = Bits16<E>::of(p);
          dsc[r * C::kLdH + c] = Bits16<E>::of(p * (dpc[r * C::kLdC + c] - deltaS[q]) * f.scale);
        }
        __syncwarp();
        FragA<E> pa, dsa;
        wm::load_matrix_sync(pa, elements<E>(pc), C::kLdH);
        wm::load_matrix_sync(dsa, elements<E>(dsc), C::kLdH);
        FSM_UNROLL
        for (int t = 0; t < C::kDims; t++) {
          if (t < nd) {
            FragB<E> ob, qb;
            wm::load_matrix_sync(ob, elements<E>(dos + n * 16 * C::kLd + t * 16), C::kLd);
            wm::mma_sync(dv[t], pa, ob, dv[t]);
            wm::load_matrix_sync(qb, elements<E>(qs + n * 16 * C::kLd + t * 16), C::kLd);
            wm::mma_sync(dk[t], dsa, qb, dk[t]);
          }
        }
      }
    }
  }
  // dk and dv out, 16 dims at a time through the warp's chunk (keys past S are not stored).
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) {
      FSM_UNROLL
      for (int which = 0; which < 2; which++) {
        __syncwarp();
        wm::store_matrix_sync(sc, which == 0 ? dk[t] : dv[t], C::kLdC, wm::mem_row_major);
        __syncwarp();
        if (key < S) {
          float* to = (which == 0 ? grads.k : grads.v) + (bg * S + key) * hd + t * 16;
          for (int c = 8 * half; c < 8 * half + 8; c++) to[c] = sc[r * C::kLdC + c];
        }
      }
    }
  }
#else
  __trap();  // never launched (wmma16Loaded)
#endif
}

// Backward for queries on tensor cores, one block per (query tile, batch · head), 16 queries a warp holding
// their q and dctx rows as fragments: per key step, 16 keys at a time, s = q·kᵀ and dp = dctx·vᵀ go to the
// warp's shared chunks, ds = p∘(dp − D)/√hd is formed there and taken back 16-bit for dq += ds·k.
template <int HD, typename E>
__global__ void __launch_bounds__(kTileThreads) flashBackwardQTc(FlashTc f, const uint16_t* dout, const float* lse, const float* delta, Heads grads) {
#if FSM_WMMA16
  namespace wm = fsmwmma;
  using C = Tc<HD>;
  unsigned char* shared = tcShared();
  uint16_t* ks = reinterpret_cast<uint16_t*>(shared);
  uint16_t* vs = ks + C::kStep * C::kLd;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
  unsigned char* mine = shared + 2 * C::kTile + warp * C::kQueriesWarp;
  float* sc = reinterpret_cast<float*>(mine);
  float* dpc = reinterpret_cast<float*>(mine + C::kChunk);
  uint16_t* dsc = reinterpret_cast<uint16_t*>(mine + 2 * C::kChunk);
  const Heads16& hs = f.heads;
  const int64_t S = f.S, Sp = hs.S, hd = hs.hd, nd = hd / 16;
  const int64_t bh = blockIdx.x, b = bh / hs.H, h = bh % hs.H, g = h / (hs.H / hs.K);
  const int64_t i0 = static_cast<int64_t>(f.causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y) * C::kRows;
  const int64_t r0 = i0 + 16 * warp, i = r0 + r;
  const uint16_t* kh = hs.k + (b * hs.K + g) * Sp * hd;
  const uint16_t* vh = hs.v + (b * hs.K + g) * Sp * hd;
  const float rowLse = i < S ? lse[bh * S + i] : 0.0f, rowDelta = i < S ? delta[bh * S + i] : 0.0f;

  FragA<E> qa[C::kDims], oa[C::kDims];
  FragC dq[C::kDims];
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) {
      wm::load_matrix_sync(qa[t], elements<E>(hs.q + (bh * Sp + r0) * hd + t * 16), static_cast<unsigned>(hd));
      wm::load_matrix_sync(oa[t], elements<E>(dout + (bh * Sp + r0) * hd + t * 16), static_cast<unsigned>(hd));
    }
    wm::fill_fragment(dq[t], 0.0f);
  }
  const int64_t end = f.causal ? std::min<int64_t>(i0 + C::kRows, S) : S;
  for (int64_t j0 = 0; j0 < end; j0 += C::kStep) {
    __syncthreads();  // the last step's readers are done with ks, vs
    stageRows<C::kLd>(ks, kh + j0 * hd, C::kStep, hd);
    stageRows<C::kLd>(vs, vh + j0 * hd, C::kStep, hd);
    __syncthreads();
    FSM_UNROLL
    for (int n = 0; n < C::kStep / 16; n++) {
      if (f.causal && j0 + 16 * n > r0 + 15) continue;  // every key of the chunk is after every query of the warp
      scoresAndDp<C, E>(qa, ks, oa, vs, n, nd, sc, dpc);
      for (int c = 8 * half; c < 8 * half + 8; c++) {
        const int64_t key = j0 + n * 16 + c;
        const float p = i < S && key < S && (!f.causal || key <= i) ? exp2f(sc[r * C::kLdC + c] * f.scaleLog2 - rowLse) : 0.0f;
        dsc[r * C::kLdH + c] = Bits16<E>::of(p * (dpc[r * C::kLdC + c] - rowDelta) * f.scale);
      }
      __syncwarp();
      FragA<E> dsa;
      wm::load_matrix_sync(dsa, elements<E>(dsc), C::kLdH);
      FSM_UNROLL
      for (int t = 0; t < C::kDims; t++) {
        if (t < nd) {
          FragB<E> kb;
          wm::load_matrix_sync(kb, elements<E>(ks + n * 16 * C::kLd + t * 16), C::kLd);
          wm::mma_sync(dq[t], dsa, kb, dq[t]);
        }
      }
    }
  }
  FSM_UNROLL
  for (int t = 0; t < C::kDims; t++) {
    if (t < nd) {
      __syncwarp();
      wm::store_matrix_sync(sc, dq[t], C::kLdC, wm::mem_row_major);
      __syncwarp();
      if (i < S)
        for (int c = 8 * half; c < 8 * half + 8; c++) grads.q[(bh * S + i) * hd + t * 16 + c] = sc[r * C::kLdC + c];
    }
  }
#else
  __trap();  // never launched (wmma16Loaded)
#endif
}

/** Calls fn(std::integral_constant<int, HD>) with the smallest tile head dim that holds hd. */
template <typename Fn>
void withHeadDim(int64_t hd, Fn fn) {
  if (hd <= 16) fn(std::integral_constant<int, 16>{});
  else if (hd <= 32) fn(std::integral_constant<int, 32>{});
  else if (hd <= 64) fn(std::integral_constant<int, 64>{});
  else fn(std::integral_constant<int, 128>{});
}

/** The tiled kernels' grid: x over batch · heads, y over tiles of the sequence. */
dim3 tileGrid(int64_t heads, int64_t S, int T) {
  return dim3(gridDimension(heads, "attention batch · heads", INT_MAX), gridDimension((S + T - 1) / T, "attention sequence tiles"));
}

// --- launchers ------------------------------------------------------------------------------------------

/** Calls fn(TypeTag<E>{}) with the WMMA element type of a 16-bit float type. */
template <typename E>
struct TypeTag {
  using type = E;
};
template <typename Fn>
void withElement(int type, Fn fn) {
  if (type == kBF16) fn(TypeTag<__nv_bfloat16>{});
  else fn(TypeTag<__half>{});
}

/** Whether the device runs the tensor-core kernels (wmma16Loaded: they were built for it). */
bool tensorCores() { return wmma16Loaded(flashForwardTc<64, __nv_bfloat16>); }

/** The split heads of x·W_qkvᵀ + b_qkv (queries and keys rotated), and the rotary tables when rope: f32 heads,
 *  or 16-bit ones padded to kPadRows rows when `tc` (the tensor-core path's type) is not kF32. */
struct Prepared {
  Layout L;
  int tc = kF32;
  Heads heads{};
  Heads16 heads16{};
  const double* cosT = nullptr;
  const double* sinT = nullptr;
};

Prepared prepare(const KernelContext& ctx, const Dims& D, bool backward, const Tensor& x, const Tensor& wqkv, const Tensor* bqkv) {
  Prepared P;
  const int tc = tensorCoreType(D, x, wqkv);
  P.tc = tc != kF32 && tensorCores() ? tc : static_cast<int>(kF32);
  P.L = layoutOf(D, backward, P.tc != kF32);
  if (ctx.workspaceBytes < P.L.bytes) throw std::logic_error("internal: attention's workspace is smaller than its WorkspaceFn's");
  const int64_t rows = D.B * D.S;
  float* qkv = at<float>(ctx, P.L.qkv);
  ctx.blas->gemm(false, true, rows, D.W, D.d, 1.0f, Matrix{x.data, floatTypeOf(x, "attention input"), D.d, 0},
                 Matrix{wqkv.data, floatTypeOf(wqkv, "W_qkv"), D.d, 0}, 0.0f, qkv, kF32, D.W, 0, 1);
  if (D.rope && D.hd >= 2) {
    double* cosT = at<double>(ctx, P.L.cos);
    double* sinT = at<double>(ctx, P.L.sin);
    const int64_t half = D.hd / 2;
    launch(ctx, ropeTables, dim3(blocksFor(ctx, D.S * half, kThreads)), dim3(kThreads), 0, cosT, sinT, D.S, half, D.hd);
    P.cosT = cosT;
    P.sinT = sinT;
  }
  const Floats bias = bqkv ? floatsIn(*bqkv, "b_qkv") : Floats{nullptr, kF32};
  if (P.tc == kF32) {
    P.heads = Heads{at<float>(ctx, P.L.q), at<float>(ctx, P.L.k), at<float>(ctx, P.L.v), D.S, D.H, D.K, D.hd};
    launch(ctx, splitHeads<float>, dim3(blocksFor(ctx, rows * D.W, kThreads)), dim3(kThreads), 0, static_cast<const float*>(qkv), bias,
           bqkv != nullptr, P.cosT, P.sinT, P.cosT != nullptr, P.heads, D.B, D.S);
  } else {
    const int64_t Sp = paddedRows(D.S);
    P.heads16 = Heads16{at<uint16_t>(ctx, P.L.q), at<uint16_t>(ctx, P.L.k), at<uint16_t>(ctx, P.L.v), Sp, D.H, D.K, D.hd};
    withElement(P.tc, [&](auto tag) {
      using E = typename decltype(tag)::type;
      launch(ctx, splitHeads<E>, dim3(blocksFor(ctx, D.B * Sp * D.W, kThreads)), dim3(kThreads), 0, static_cast<const float*>(qkv), bias,
             bqkv != nullptr, P.cosT, P.sinT, P.cosT != nullptr, P.heads16, D.B, D.S);
    });
  }
  return P;
}

float scaleOf(const Dims& D) { return static_cast<float>(1 / std::sqrt(static_cast<double>(D.hd))); }

Flash flashOf(const Dims& D, const Heads& heads) { return Flash{heads, D.C, scaleOf(D), D.causal}; }
FlashTc flashTcOf(const Dims& D, const Heads16& heads) {
  const double scale = 1 / std::sqrt(static_cast<double>(D.hd));
  return FlashTc{heads, D.S, D.C, static_cast<float>(scale), static_cast<float>(scale / std::log(2.0)), D.causal};
}

/** The context (and, with lse, the backward's per-row statistics and, on tensor cores, dctx 16-bit as `dout`)
 *  by the tiled forward of the prepared path. */
void runForward(const KernelContext& ctx, const Dims& D, const Prepared& P, FloatsOut context, float* lse, const float* dctx, float* delta,
                uint16_t* dout) {
  withHeadDim(D.hd, [&](auto hdTag) {
    constexpr int HD = decltype(hdTag)::value;
    if (P.tc == kF32) {
      using Tl = Tile<HD>;
      launch(ctx, flashForward<HD>, tileGrid(D.B * D.H, D.S, Tl::T), dim3(kTileThreads), (3 * Tl::kMatrix + Tl::kScores) * sizeof(float),
             flashOf(D, P.heads), context, lse, dctx, delta);
      return;
    }
    withElement(P.tc, [&](auto tag) {
      using E = typename decltype(tag)::type;
      launch(ctx, flashForwardTc<HD, E>, tileGrid(D.B * D.H, P.heads16.S, Tc<HD>::kRows), dim3(kTileThreads), Tc<HD>::kForward + kSharedSlack,
             flashTcOf(D, P.heads16), context, lse, dctx, delta, dout);
    });
  });
}

size_t attentionWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  if (in.size() != forwardOperands(attrs)) return 0;  // the launch refuses it
  const Dims D = dimsOf(in[0], in[1], in[bias ? 3 : 2], attrs);
  return workspaceOf(D, false, tensorCoreType(D, in[0], in[1]));
}

// Operands x, W_qkv, [b_qkv], W_proj, [b_proj] (biases when the `bias` attribute is set; b_proj not for split
// heads): the context lands where qkv was, in W_proj's float type (cuBLAS takes operands of one type), then
// y = context·W_projᵀ + b_proj.
void attention(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  expectOperands(in, forwardOperands(attrs), "attention");
  const Tensor& wproj = in[bias ? 3 : 2];
  const Dims D = dimsOf(in[0], in[1], wproj, attrs);
  const int64_t rows = D.B * D.S;
  if (rows == 0 || D.d == 0) return;
  const Prepared P = prepare(ctx, D, false, in[0], in[1], bias ? &in[2] : nullptr);
  const int projType = floatTypeOf(wproj, "W_proj");
  void* context = at<void>(ctx, P.L.qkv);
  runForward(ctx, D, P, FloatsOut{context, projType}, nullptr, nullptr, nullptr, nullptr);
  const FloatsOut y = floatsOut(out[0], "attention output");
  if (D.projBias) launch(ctx, broadcastRows, dim3(blocksFor(ctx, rows * D.d, kThreads)), dim3(kThreads), 0, floatsIn(in[4], "b_proj"), y, rows, D.d);
  ctx.blas->gemm(false, true, rows, D.d, D.C, 1.0f, Matrix{context, projType, D.C, 0}, Matrix{wproj.data, projType, D.C, 0}, D.projBias ? 1.0f : 0.0f,
                 y.data, y.type, D.d, 0, 1);
}

size_t attentionGradWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  if (in.size() != (bias ? 5u : 4u)) return 0;
  const Dims D = dimsOf(in[1], in[2], in[bias ? 4 : 3], attrs);
  return workspaceOf(D, true, tensorCoreType(D, in[1], in[2]));
}

// Operands dy, x, W_qkv, [b_qkv], W_proj (the output bias affects no gradient here); outputs dx, dqkv [B,S,W]
// (for the QKV weight and bias gradients) and the recomputed context (for the output projection's).
void attentionGradInput(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  expectOperands(in, bias ? 5 : 4, "attention_grad_input");
  const Tensor& wqkv = in[2];
  const Tensor& wproj = in[bias ? 4 : 3];
  const Dims D = dimsOf(in[1], wqkv, wproj, attrs);
  const int64_t rows = D.B * D.S;
  if (rows == 0 || D.d == 0) return;
  const Prepared P = prepare(ctx, D, true, in[1], wqkv, bias ? &in[3] : nullptr);
  float* dctx = at<float>(ctx, P.L.dctx);
  float* lse = at<float>(ctx, P.L.lse);
  float* delta = at<float>(ctx, P.L.delta);
  uint16_t* dout = P.tc == kF32 ? nullptr : at<uint16_t>(ctx, P.L.dout);
  ctx.blas->gemm(false, false, rows, D.C, D.d, 1.0f, Matrix{in[0].data, floatTypeOf(in[0], "attention gradient"), D.d, 0},
                 Matrix{wproj.data, floatTypeOf(wproj, "W_proj"), D.C, 0}, 0.0f, dctx, kF32, D.C, 0, 1);
  runForward(ctx, D, P, floatsOut(out[2], "attention context"), lse, dctx, delta, dout);

  // dq | dk | dv, f32 and unpadded on both paths, where qkv was (the split has read it).
  float* dq = at<float>(ctx, P.L.qkv);
  float* dk = dq + D.B * D.H * D.S * D.hd;
  const Heads grads{dq, dk, dk + D.B * D.K * D.S * D.hd, D.S, D.H, D.K, D.hd};
  const float* lseIn = lse;
  const float* deltaIn = delta;
  withHeadDim(D.hd, [&](auto hdTag) {
    constexpr int HD = decltype(hdTag)::value;
    if (P.tc == kF32) {
      using Tl = Tile<HD>;
      const Flash f = flashOf(D, P.heads);
      const float* dctxIn = dctx;
      launch(ctx, flashBackwardKV<HD>, tileGrid(D.B * D.K, D.S, Tl::T), dim3(kTileThreads),
             (4 * Tl::kMatrix + 2 * Tl::kScores + 2 * Tl::T) * sizeof(float), f, dctxIn, lseIn, deltaIn, grads);
      launch(ctx, flashBackwardQ<HD>, tileGrid(D.B * D.H, D.S, Tl::T), dim3(kTileThreads), (4 * Tl::kMatrix + Tl::kScores) * sizeof(float), f, dctxIn,
             lseIn, deltaIn, grads);
      return;
    }
    withElement(P.tc, [&](auto tag) {
      using E = typename decltype(tag)::type;
      using C = Tc<HD>;
      const FlashTc f = flashTcOf(D, P.heads16);
      const uint16_t* doutIn = dout;
      launch(ctx, flashBackwardKVTc<HD, E>, tileGrid(D.B * D.K, f.heads.S, C::kRows), dim3(kTileThreads), C::kKeys + kSharedSlack, f, doutIn, lseIn,
             deltaIn, grads);
      launch(ctx, flashBackwardQTc<HD, E>, tileGrid(D.B * D.H, f.heads.S, C::kRows), dim3(kTileThreads), C::kQueries + kSharedSlack, f, doutIn, lseIn,
             deltaIn, grads);
    });
  });
  const FloatsOut dqkv = floatsOut(out[1], "attention dqkv");
  launch(ctx, packHeads, dim3(blocksFor(ctx, rows * D.W, kThreads)), dim3(kThreads), 0, grads, P.cosT, P.sinT, P.cosT != nullptr, dqkv, D.B);
  // dx = dqkv·W_qkv from the dqkv just written, as the CPU computes it from its f32 output.
  ctx.blas->gemm(false, false, rows, D.d, D.W, 1.0f, Matrix{dqkv.data, dqkv.type, D.W, 0}, Matrix{wqkv.data, floatTypeOf(wqkv, "W_qkv"), D.d, 0}, 0.0f,
                 out[0].data, floatTypeOf(out[0], "attention dx"), D.d, 0, 1);
}

// --- the tile product, as an op for tests -----------------------------------------------------------------

// d = (a·b + c)·scale on one warp's 16x16x16 WMMA tile product, the operation the tensor-core path is built
// from: a and b 16-bit [16, ld] read as row-major (or, with a_col / b_col, column-major) tiles ld elements
// apart, c and d f32 [16, ld] loaded and stored row- or column-major (c_col, d_col); `lanes` below 32 has
// the other lanes of the warp skip the tile product (the emulator reports the divergent call).
template <typename E, typename LayoutA, typename LayoutB>
__global__ void wmmaTile(const uint16_t* a, unsigned lda, const uint16_t* b, unsigned ldb, const float* c, unsigned ldc, bool cCol, float scale,
                         float* d, unsigned ldd, bool dCol, unsigned lanes) {
#if FSM_WMMA16
  namespace wm = fsmwmma;
  if (threadIdx.x >= lanes) return;
  wm::fragment<wm::matrix_a, 16, 16, 16, E, LayoutA> fa;
  wm::fragment<wm::matrix_b, 16, 16, 16, E, LayoutB> fb;
  wm::fragment<wm::accumulator, 16, 16, 16, float> fc;
  wm::load_matrix_sync(fa, elements<E>(a), lda);
  wm::load_matrix_sync(fb, elements<E>(b), ldb);
  wm::load_matrix_sync(fc, c, ldc, cCol ? wm::mem_col_major : wm::mem_row_major);
  wm::mma_sync(fc, fa, fb, fc);
  for (int i = 0; i < fc.num_elements; i++) fc.x[i] *= scale;
  wm::store_matrix_sync(d, fc, ldd, dCol ? wm::mem_col_major : wm::mem_row_major);
#else
  __trap();  // never launched (wmma16Loaded)
#endif
}

bool flag(const Attrs& attrs, const char* name) { return attrs.has(name) && attrs.boolean(name); }

/** A tile operand's row stride: shape [16, ld], ld ≥ 16 and 16 bytes' worth of elements (WMMA's rules). */
unsigned tileStride(const Tensor& t, size_t elementBytes, const char* what) {
  if (t.rank() != 2 || t.shape[0] != 16 || t.shape[1] < 16 || t.shape[1] * elementBytes % 16 != 0) {
    throw std::invalid_argument(std::string("fsm_wmma_tile: ") + what + " must be [16, ld] with ld ≥ 16 a multiple of " +
                                std::to_string(16 / elementBytes));
  }
  return static_cast<unsigned>(t.shape[1]);
}

void wmmaTileOp(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  expectOperands(in, 3, "fsm_wmma_tile");
  const int type = floatTypeOf(in[0], "a");
  if (type == kF32 || floatTypeOf(in[1], "b") != type) throw std::invalid_argument("fsm_wmma_tile: a and b must both be bf16 or both f16");
  if (floatTypeOf(in[2], "c") != kF32 || floatTypeOf(out[0], "d") != kF32) throw std::invalid_argument("fsm_wmma_tile: c and d must be f32");
  const unsigned lda = tileStride(in[0], 2, "a"), ldb = tileStride(in[1], 2, "b"), ldc = tileStride(in[2], 4, "c"), ldd = tileStride(out[0], 4, "d");
  const unsigned lanes = attrs.has("lanes") ? static_cast<unsigned>(attrs.number("lanes")) : 32u;
#ifndef FSM_SIMT
  if (lanes != 32) throw std::invalid_argument("fsm_wmma_tile: lanes other than 32 only on the emulator (a GPU would hang)");
#endif
  if (!tensorCores()) throw std::invalid_argument("not implemented: fsm_wmma_tile needs 16-bit WMMA (kernels built for sm_80 or later)");
  const float scale = attrs.has("scale") ? static_cast<float>(attrs.number("scale")) : 1.0f;
  const bool aCol = flag(attrs, "a_col"), bCol = flag(attrs, "b_col");
  withElement(type, [&](auto tag) {
    using E = typename decltype(tag)::type;
    namespace wm = fsmwmma;
    auto go = [&](auto kernel) {
      launch(ctx, kernel, dim3(1), dim3(32), 0, static_cast<const uint16_t*>(in[0].data), lda, static_cast<const uint16_t*>(in[1].data), ldb,
             static_cast<const float*>(in[2].data), ldc, flag(attrs, "c_col"), scale, static_cast<float*>(out[0].data), ldd, flag(attrs, "d_col"), lanes);
    };
    if (aCol && bCol) go(wmmaTile<E, wm::col_major, wm::col_major>);
    else if (aCol) go(wmmaTile<E, wm::col_major, wm::row_major>);
    else if (bCol) go(wmmaTile<E, wm::row_major, wm::col_major>);
    else go(wmmaTile<E, wm::row_major, wm::row_major>);
  });
}

}  // namespace

REGISTER_CUDA_KERNEL("attention", attention, attentionWorkspace, UsesBlas::Yes, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("attention_grad_input", attentionGradInput, attentionGradWorkspace, UsesBlas::Yes, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("fsm_wmma_tile", wmmaTileOp);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
