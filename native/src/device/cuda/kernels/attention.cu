// Fused self-attention and its input gradient on the CUDA device, as device/cpu/kernels/attention.cc (the
// conventions are src/interp/kernels/attention.ts's: packed QKV [query heads | key heads | value heads],
// grouped-query attention by ⌊h / (heads / kv_heads)⌋, HF Llama rotate_half rotary embeddings, scores/√hd,
// causal mask j > i). The projections run on cuBLAS into the launch's workspace; a split kernel adds the bias,
// rotates and lays q, k, v out head-major; FlashAttention-style tiled kernels never materialise the S×S
// probabilities: the forward keeps an online softmax over key tiles (and leaves each row's logsumexp for the
// backward), the backward (FlashAttention-2) recomputes them tile by tile — dk and dv with a block per key tile
// and kv head, dq with a block per query tile and head — so every sum has one owner (no atomics) and a fixed
// order. The tile products are f32 FMAs on shared-memory tiles (dotRows, accumulate: what a tensor-core MMA
// would replace). Rotations run in double, as on the CPU.
#include <climits>
#include <cmath>
#include <type_traits>

#include "device/cuda/blas.h"
#include "device/cuda/device_code.h"

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

struct Dims {
  int64_t B, S, d, H, K, hd;
  int64_t W;  // width of the packed projection, (H + 2K)·hd
  bool causal, rope, bias;
};

/** The dims of an attention over x [B, S, d] with these weights; throws for shapes the op cannot have. */
Dims dimsOf(const Tensor& x, const Tensor& wqkv, const Tensor& wproj, const Attrs& attrs) {
  if (x.rank() != 3) throw std::invalid_argument("attention input must be [B, S, d]");
  Dims D;
  D.B = x.shape[0];
  D.S = x.shape[1];
  D.d = x.shape[2];
  D.H = static_cast<int64_t>(attrs.number("heads"));
  D.K = attrs.has("kv_heads") ? static_cast<int64_t>(attrs.number("kv_heads")) : D.H;
  if (D.H < 1 || D.K < 1 || D.d % D.H != 0 || D.H % D.K != 0) {
    throw std::invalid_argument("attention needs heads dividing d and kv_heads dividing heads, got d " + std::to_string(D.d) + ", heads " +
                                std::to_string(D.H) + ", kv_heads " + std::to_string(D.K));
  }
  D.hd = D.d / D.H;
  D.W = (D.H + 2 * D.K) * D.hd;
  D.causal = attrs.boolean("causal");
  D.rope = attrs.boolean("rope");
  D.bias = attrs.boolean("bias");
  if (D.hd > kMaxHeadDim) {
    throw std::invalid_argument("not implemented: attention with head dim " + std::to_string(D.hd) + " on the CUDA device (at most " +
                                std::to_string(kMaxHeadDim) + ")");
  }
  if (wqkv.shape != std::vector<int64_t>{D.W, D.d} || wproj.shape != std::vector<int64_t>{D.d, D.d}) {
    throw std::invalid_argument("attention weights must be W_qkv [" + std::to_string(D.W) + ", " + std::to_string(D.d) + "] and W_proj [" +
                                std::to_string(D.d) + ", " + std::to_string(D.d) + "]");
  }
  return D;
}

void expectOperands(const std::vector<Tensor>& in, size_t count, const char* op) {
  if (in.size() != count) {
    throw std::invalid_argument(std::string(op) + " takes " + std::to_string(count) + " operands with this bias attribute, got " + std::to_string(in.size()));
  }
}

// --- workspace ------------------------------------------------------------------------------------------

/** Byte offsets of the launch's scratch regions (each 256-byte aligned) and their total. */
struct Layout {
  size_t qkv = 0;              // f32 [B·S, W]; once split into heads: the forward's context, or the backward's dq | dk | dv
  size_t cos = 0, sin = 0;     // f64 [S, hd/2] rotary tables (rope only)
  size_t q = 0, k = 0, v = 0;  // f32 head-major: q [B,H,S,hd], k and v [B,K,S,hd], rotated
  size_t dctx = 0;             // backward: f32 [B·S, d] = dy·W_proj
  size_t lse = 0, delta = 0;   // backward: f32 [B,H,S], each row's logsumexp and D = rowsum(dctx∘ctx)
  size_t bytes = 0;
};

size_t region(size_t& at, size_t bytes) {
  const size_t here = at;
  at += (bytes + 255) / 256 * 256;
  return here;
}

// The forward's context ([B·S, d], at most 4 bytes an element) and the gradients dq | dk | dv ([B·S·W] f32 in
// all) fit where qkv was, which nothing reads after the split.
Layout layoutOf(const Dims& D, bool backward) {
  Layout L;
  size_t at = 0;
  const size_t f = sizeof(float), rows = static_cast<size_t>(D.B * D.S);
  L.qkv = region(at, rows * D.W * f);
  if (D.rope) {
    L.cos = region(at, static_cast<size_t>(D.S * (D.hd / 2)) * sizeof(double));
    L.sin = region(at, static_cast<size_t>(D.S * (D.hd / 2)) * sizeof(double));
  }
  L.q = region(at, rows * D.H * D.hd * f);
  L.k = region(at, rows * D.K * D.hd * f);
  L.v = region(at, rows * D.K * D.hd * f);
  if (backward) {
    L.dctx = region(at, rows * D.d * f);
    L.lse = region(at, rows * D.H * f);
    L.delta = region(at, rows * D.H * f);
  }
  L.bytes = at;
  return L;
}

template <typename T>
T* at(const KernelContext& ctx, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(ctx.workspace) + offset);
}

// --- layout kernels -------------------------------------------------------------------------------------

/** Per-head f32 tensors: q [B,H,S,hd], k and v [B,K,S,hd] (or their gradients). */
struct Heads {
  float* q;
  float* k;
  float* v;
  int64_t S, H, K, hd;

  /** Row s of packed head j (j < H: query head j; then the K key heads; then the K value heads) of batch b. */
  FSM_HD float* row(int64_t b, int64_t s, int64_t j) const {
    if (j < H) return q + ((b * H + j) * S + s) * hd;
    if (j < H + K) return k + ((b * K + j - H) * S + s) * hd;
    return v + ((b * K + j - H - K) * S + s) * hd;
  }
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

// qkv [B·S, W] (+ bias) → head-major q, k, v, queries and keys rotated: a thread per element of qkv.
__global__ void splitHeads(const float* qkv, Floats bias, bool hasBias, const double* cosT, const double* sinT, bool rope, Heads heads,
                           int64_t B) {
  const int64_t S = heads.S, hd = heads.hd, half = hd / 2, W = (heads.H + 2 * heads.K) * hd;
  const int64_t n = B * S * W;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n; t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / W, c = t % W, j = c / hd, e = c % hd, s = r % S;
    double a = qkv[t] + (hasBias ? static_cast<double>(bias[c]) : 0.0);
    if (rope && j < heads.H + heads.K && e < 2 * half) {
      const int64_t pc = e < half ? c + half : c - half;
      const double partner = qkv[r * W + pc] + (hasBias ? static_cast<double>(bias[pc]) : 0.0);
      const int64_t te = s * half + e % half;
      a = rotated(a, partner, e, half, cosT[te], sinT[te], 1);
    }
    heads.row(r / S, s, j)[e] = static_cast<float>(a);
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
  int64_t d;    // the row stride of context and dctx ([B·S, d], head h at columns h·hd)
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

/** The split heads of x·W_qkvᵀ + b_qkv (queries and keys rotated), and the rotary tables when rope. */
struct Prepared {
  Layout L;
  Heads heads;
  const double* cosT = nullptr;
  const double* sinT = nullptr;
};

Prepared prepare(const KernelContext& ctx, const Dims& D, bool backward, const Tensor& x, const Tensor& wqkv, const Tensor* bqkv) {
  Prepared P;
  P.L = layoutOf(D, backward);
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
  P.heads = Heads{at<float>(ctx, P.L.q), at<float>(ctx, P.L.k), at<float>(ctx, P.L.v), D.S, D.H, D.K, D.hd};
  const Floats bias = bqkv ? floatsIn(*bqkv, "b_qkv") : Floats{nullptr, kF32};
  launch(ctx, splitHeads, dim3(blocksFor(ctx, rows * D.W, kThreads)), dim3(kThreads), 0, static_cast<const float*>(qkv), bias, bqkv != nullptr,
         P.cosT, P.sinT, P.cosT != nullptr, P.heads, D.B);
  return P;
}

Flash flashOf(const Dims& D, const Heads& heads) {
  return Flash{heads, D.d, static_cast<float>(1 / std::sqrt(static_cast<double>(D.hd))), D.causal};
}

/** The context (and, with lse, the backward's per-row statistics) by the tiled forward. */
void runForward(const KernelContext& ctx, const Dims& D, const Flash& f, FloatsOut context, float* lse, const float* dctx, float* delta) {
  withHeadDim(D.hd, [&](auto hdTag) {
    constexpr int HD = decltype(hdTag)::value;
    using Tl = Tile<HD>;
    launch(ctx, flashForward<HD>, tileGrid(D.B * D.H, D.S, Tl::T), dim3(kTileThreads), (3 * Tl::kMatrix + Tl::kScores) * sizeof(float), f, context, lse,
           dctx, delta);
  });
}

size_t attentionWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  if (in.size() != (bias ? 5u : 3u)) return 0;  // the launch refuses it
  return layoutOf(dimsOf(in[0], in[1], in[bias ? 3 : 2], attrs), false).bytes;
}

// Operands x, W_qkv, [b_qkv], W_proj, [b_proj] (biases when the `bias` attribute is set): the context lands where
// qkv was, in W_proj's float type (cuBLAS takes operands of one type), then y = context·W_projᵀ + b_proj.
void attention(const KernelContext& ctx, const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  expectOperands(in, bias ? 5 : 3, "attention");
  const Tensor& wproj = in[bias ? 3 : 2];
  const Dims D = dimsOf(in[0], in[1], wproj, attrs);
  const int64_t rows = D.B * D.S;
  if (rows == 0 || D.d == 0) return;
  const Prepared P = prepare(ctx, D, false, in[0], in[1], bias ? &in[2] : nullptr);
  const int projType = floatTypeOf(wproj, "W_proj");
  void* context = at<void>(ctx, P.L.qkv);
  runForward(ctx, D, flashOf(D, P.heads), FloatsOut{context, projType}, nullptr, nullptr, nullptr);
  const FloatsOut y = floatsOut(out[0], "attention output");
  if (bias) launch(ctx, broadcastRows, dim3(blocksFor(ctx, rows * D.d, kThreads)), dim3(kThreads), 0, floatsIn(in[4], "b_proj"), y, rows, D.d);
  ctx.blas->gemm(false, true, rows, D.d, D.d, 1.0f, Matrix{context, projType, D.d, 0}, Matrix{wproj.data, projType, D.d, 0}, bias ? 1.0f : 0.0f, y.data,
                 y.type, D.d, 0, 1);
}

size_t attentionGradWorkspace(const std::vector<Tensor>& in, const std::vector<Tensor>&, const Attrs& attrs) {
  const bool bias = attrs.boolean("bias");
  if (in.size() != (bias ? 5u : 4u)) return 0;
  return layoutOf(dimsOf(in[1], in[2], in[bias ? 4 : 3], attrs), true).bytes;
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
  ctx.blas->gemm(false, false, rows, D.d, D.d, 1.0f, Matrix{in[0].data, floatTypeOf(in[0], "attention gradient"), D.d, 0},
                 Matrix{wproj.data, floatTypeOf(wproj, "W_proj"), D.d, 0}, 0.0f, dctx, kF32, D.d, 0, 1);
  const Flash f = flashOf(D, P.heads);
  runForward(ctx, D, f, floatsOut(out[2], "attention context"), lse, dctx, delta);

  // dq | dk | dv where qkv was (the split has read it).
  float* dq = at<float>(ctx, P.L.qkv);
  float* dk = dq + D.B * D.H * D.S * D.hd;
  const Heads grads{dq, dk, dk + D.B * D.K * D.S * D.hd, D.S, D.H, D.K, D.hd};
  withHeadDim(D.hd, [&](auto hdTag) {
    constexpr int HD = decltype(hdTag)::value;
    using Tl = Tile<HD>;
    launch(ctx, flashBackwardKV<HD>, tileGrid(D.B * D.K, D.S, Tl::T), dim3(kTileThreads),
           (4 * Tl::kMatrix + 2 * Tl::kScores + 2 * Tl::T) * sizeof(float), f, static_cast<const float*>(dctx), static_cast<const float*>(lse),
           static_cast<const float*>(delta), grads);
    launch(ctx, flashBackwardQ<HD>, tileGrid(D.B * D.H, D.S, Tl::T), dim3(kTileThreads), (4 * Tl::kMatrix + Tl::kScores) * sizeof(float), f,
           static_cast<const float*>(dctx), static_cast<const float*>(lse), static_cast<const float*>(delta), grads);
  });
  const FloatsOut dqkv = floatsOut(out[1], "attention dqkv");
  launch(ctx, packHeads, dim3(blocksFor(ctx, rows * D.W, kThreads)), dim3(kThreads), 0, grads, P.cosT, P.sinT, P.cosT != nullptr, dqkv, D.B);
  // dx = dqkv·W_qkv from the dqkv just written, as the CPU computes it from its f32 output.
  ctx.blas->gemm(false, false, rows, D.d, D.W, 1.0f, Matrix{dqkv.data, dqkv.type, D.W, 0}, Matrix{wqkv.data, floatTypeOf(wqkv, "W_qkv"), D.d, 0}, 0.0f,
                 out[0].data, floatTypeOf(out[0], "attention dx"), D.d, 0, 1);
}

}  // namespace

REGISTER_CUDA_KERNEL("attention", attention, attentionWorkspace, UsesBlas::Yes, FillsOutputs::Yes);
REGISTER_CUDA_KERNEL("attention_grad_input", attentionGradInput, attentionGradWorkspace, UsesBlas::Yes, FillsOutputs::Yes);

}  // namespace FSM_CUDA_NS
}  // namespace fsm
