// Fused self-attention and its input gradient, as src/interp/kernels/attention.ts (see its header for the
// conventions: packed QKV [query heads, key heads, value heads], GQA by ⌊h / (heads / kv_heads)⌋, HF Llama
// rotate_half rotary embeddings, scores/√hd, causal mask j > i). Every matrix product runs in f32: the
// projections on sgemm (OpenBLAS when built with it), each head's products — the scores q·kᵀ, the context p·v
// and the five of the backward — on direct products (direct_product.h), which skip the causal mask's upper triangle;
// each softmax row runs in f32 (vectorized exponentials, sums in double), the rotary embeddings in double.
// Unlike the interpreter, the S×S probabilities are never stored: they are computed in blocks of query rows,
// FlashAttention-style, once per block (the backward takes the context from the same probabilities as the
// gradients), so memory stays O(B·S·d + block·S). Heads (and the forward's blocks) are independent tasks for
// the device's kernel threads (parallel.h); the backward's task is a key/value head with its query heads, so
// each gradient sums in one order whatever the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "device/cpu/direct_product.h"
#include "device/cpu/gemm.h"
#include "device/cpu/parallel.h"
#include "device/cpu/registry.h"
#include "device/cpu/rows.h"
#include "device/cpu/scratch.h"
#include "device/cpu/vectorize.h"

namespace fsm {
namespace {

/** Base of the rotary frequencies (Llama's rope_theta; ROPE_BASE in attention.ts). */
constexpr double kRopeBase = 10000;

struct Dims {
  int64_t B, S, d, H, K, hd;
  int64_t W;  // width of the packed projection, (H + 2K)·hd
  int64_t C;  // width of the context, H·hd: d, or d / parts on a device of a tensor-parallel group
  bool projBias;  // the output projection's bias is an operand (a tensor-parallel device adds it after the all-reduce)
  bool causal, rope;
};

Dims dimsOf(const Tensor& x, const Attrs& attrs) {
  Dims D;
  D.B = x.shape[0];
  D.S = x.shape[1];
  D.d = x.shape[2];
  // A tensor-parallel device (the pass's `parts`) computes heads / parts query and kv_heads / parts key/value
  // heads of the whole model's head width (src/graph/ops/attention.ts attentionWidths).
  const int64_t parts = attrs.has("parts") ? static_cast<int64_t>(attrs.number("parts")) : 1;
  const int64_t heads = static_cast<int64_t>(attrs.number("heads"));
  const int64_t kv = attrs.has("kv_heads") ? static_cast<int64_t>(attrs.number("kv_heads")) : heads;
  D.hd = D.d / heads;
  D.H = heads / parts;
  D.K = kv / parts;
  D.W = (D.H + 2 * D.K) * D.hd;
  D.C = D.H * D.hd;
  D.projBias = attrs.boolean("bias") && parts == 1;
  D.causal = attrs.boolean("causal");
  D.rope = attrs.boolean("rope");
  return D;
}

/** Rows of the packed projection a chunk of a row loop takes: about 16k elements, a few microseconds of work,
 *  so that a small model's few rows stay on one thread (see kThreadedTaskFlops). */
int64_t rowGrain(int64_t width) { return std::max<int64_t>(16, 16384 / std::max<int64_t>(width, 1)); }

/** out [rows, cols] = a [rows, inner] · op(w), op(w) = wᵀ (w is [cols, inner]) when `transposed`, else w
 *  ([inner, cols]): the four projections, on sgemm in f32 (OpenBLAS when built with it). */
void project(const float* a, const float* w, int64_t rows, int64_t inner, int64_t cols, bool transposed, float* out) {
  sgemm(false, transposed, static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(inner), 1.0f, a, static_cast<int>(inner), w,
        static_cast<int>(transposed ? inner : cols), 0.0f, out, static_cast<int>(cols));
}

/** cos/sin of the rotary angles s·base^(−2e/hd), [S, hd/2]. */
struct Rope {
  int64_t half = 0;
  std::vector<double> cos, sin;
};

Rope ropeTables(int64_t S, int64_t hd) {
  Rope t;
  t.half = hd / 2;
  t.cos.resize(static_cast<size_t>(S * t.half));
  t.sin.resize(static_cast<size_t>(S * t.half));
  for (int64_t s = 0; s < S; s++) {
    for (int64_t e = 0; e < t.half; e++) {
      const double angle = static_cast<double>(s) * std::pow(kRopeBase, -static_cast<double>(2 * e) / static_cast<double>(hd));
      t.cos[s * t.half + e] = std::cos(angle);
      t.sin[s * t.half + e] = std::sin(angle);
    }
  }
  return t;
}

/** Rotates one head vector in place at position s: forward (sign +1) or its transpose, the inverse (−1). */
void rotate(double* a, int64_t s, const Rope& t, double sign) {
  for (int64_t e = 0; e < t.half; e++) {
    const double c = t.cos[s * t.half + e];
    const double sn = sign * t.sin[s * t.half + e];
    const double lo = a[e], hi = a[e + t.half];
    a[e] = lo * c - hi * sn;
    a[e + t.half] = hi * c + lo * sn;
  }
}

/** Query rows per block: a block's scores are [kBlock, S] floats (1 MiB at S = 1024), so memory stays
 *  O(B·S·d + kBlock·S) however long the sequence — the S×S probabilities are never stored whole. */
constexpr int64_t kBlock = 256;

static_assert(kBlock % kProductRows == 0, "blocks start on a group boundary (see Trim::InnerFrom)");

// ---- One head, block by block ---------------------------------------------------------------------------------
// Heads stay where the projection puts them: head h of batch b is the [S, hd] matrix at column h·hd of
// qkv [B,S,W] (queries, then keys, then values), rows W apart, and its gradient the same place in dqkv.

// Scratch slots (scratch.h): the launch's (kQkv, kContext) and each head task's (kProbs..kTransposed).
constexpr int kQkv = 0, kContext = 1, kProbs = 2, kProbGrads = 3, kTransposed = 4;

enum class Part { Query, Key, Value };

/** Batch b's query, key or value head h in a [B,S,W] buffer, rows W apart. */
template <typename T>
T* head(T* packed, const Dims& D, int64_t b, Part part, int64_t h) {
  const int64_t column = part == Part::Query ? h : part == Part::Key ? D.H + h : D.H + D.K + h;
  return packed + b * D.S * D.W + column * D.hd;
}

/** One key/value head as a task reads it: k and v [S, hd] (rows W apart), and kᵀ and vᵀ [hd, S] (rows ldt
 *  apart) for the products whose B is a transposed head (the scores, dp). */
struct KeyValues {
  const float* k;
  const float* v;
  const float* kt;
  const float* vt;
  int64_t ldt;
};

/** Batch b's key/value head g, with kᵀ (and vᵀ when `values`) in the task's scratch. */
KeyValues keyValues(const float* qkv, const Dims& D, int64_t b, int64_t g, bool values) {
  // The transposes' rows are a cache line more than a multiple of 16 floats apart: a tile reads row after
  // row, and rows a multiple of 1 KiB apart (S = 256, 512, 1024) would share a few L1 sets.
  const int64_t ldt = (D.S + 15) / 16 * 16 + 16;
  float* t = scratch<float>(kTransposed, static_cast<size_t>(2 * D.hd * ldt));
  const KeyValues kv{head(qkv, D, b, Part::Key, g), head(qkv, D, b, Part::Value, g), t, t + D.hd * ldt, ldt};
  for (int64_t s = 0; s < D.S; s++) {
    for (int64_t e = 0; e < D.hd; e++) t[e * ldt + s] = kv.k[s * D.W + e];
    if (values)
      for (int64_t e = 0; e < D.hd; e++) t[(D.hd + e) * ldt + s] = kv.v[s * D.W + e];
  }
  return kv;
}

// The softmax's backward on one row: ds = p·(dp − dot)·scale, in place of dp.
FSM_CPU_CLONES void softmaxBackRow(const float* p, float* dp, int64_t n, float dot, float scale) {
  for (int64_t j = 0; j < n; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
}

/** Query rows [i0, i0 + R) of one head and the keys [0, C) any of them sees. Its probabilities and their
 *  gradients are [R, C], rows C apart; with the causal mask a row holds only its group's columns (width).
 *  Heads and their gradients are [S, hd] with rows W apart (the packed layout). */
struct Block {
  const Dims& D;
  int64_t i0, R, C;
  Trim columns, inner, innerFrom;  // the causal trims, or None
  float scale;

  Block(const Dims& dims, int64_t first)
      : D(dims),
        i0(first),
        R(std::min(kBlock, dims.S - first)),
        C(dims.causal ? first + R : dims.S),
        columns(dims.causal ? Trim::Columns : Trim::None),
        inner(dims.causal ? Trim::Inner : Trim::None),
        innerFrom(dims.causal ? Trim::InnerFrom : Trim::None),
        scale(static_cast<float>(1 / std::sqrt(static_cast<double>(dims.hd)))) {}

  /** The keys row r sees. */
  int64_t seen(int64_t r) const { return D.causal ? i0 + r + 1 : C; }
  /** The columns row r holds (those past `seen` are zeros). */
  int64_t width(int64_t r) const { return D.causal ? groupKeys(i0 + r - r % kProductRows, C) : C; }

  /** p = q·kᵀ/√hd for the block's rows, then each row's masked softmax. The max ignores NaN scores as fmax
   *  does; a NaN score still makes its row NaN through its exponential. */
  void probabilities(const float* q, const KeyValues& kv, float* p) const {
    multiply({R, C, D.hd, q + i0 * D.W, D.W, 1, kv.kt, kv.ldt, p, C, scale, false, columns, i0});
    for (int64_t r = 0; r < R; r++) {
      float* row = p + r * C;
      const int64_t n = seen(r);
      expShifted(row, row, n, rowMax(row, n));
      scaleRow(row, n, static_cast<float>(1 / sumOf(row, n)));
      std::fill(row + n, row + width(r), 0.0f);
    }
  }

  /** out [R, hd] (rows `ld` apart) = p·v. */
  void context(const float* p, const KeyValues& kv, float* out, int64_t ld) const {
    multiply({R, D.hd, C, p, C, 1, kv.v, D.W, out, ld, 1.0f, false, inner, i0});
  }

  /** dp = dctx·vᵀ, dctx the block's context gradient [R, hd] (rows `ld` apart). */
  void probGrads(const float* dctx, int64_t ld, const KeyValues& kv, float* dp) const {
    multiply({R, C, D.hd, dctx, ld, 1, kv.vt, kv.ldt, dp, C, 1.0f, false, columns, i0});
  }

  /** dv [C, hd] += pᵀ·dctx. */
  void valueGrads(const float* p, const float* dctx, int64_t ld, float* dv) const {
    multiply({C, D.hd, R, p, 1, C, dctx, ld, dv, D.W, 1.0f, true, innerFrom, i0});
  }

  /** ds = p·(dp − Σ dp·p)/√hd in place of dp, row by row. */
  void scoreGrads(const float* p, float* dp) const {
    for (int64_t r = 0; r < R; r++) {
      const int64_t n = width(r);
      softmaxBackRow(p + r * C, dp + r * C, n, static_cast<float>(dotOf(dp + r * C, p + r * C, n)), scale);
    }
  }

  /** The block's rows of dq = ds·k. */
  void queryGrads(const float* ds, const KeyValues& kv, float* dq) const {
    multiply({R, D.hd, C, ds, C, 1, kv.k, D.W, dq + i0 * D.W, D.W, 1.0f, false, inner, i0});
  }

  /** dk [C, hd] += dsᵀ·q. */
  void keyGrads(const float* ds, const float* q, float* dk) const {
    multiply({C, D.hd, R, ds, 1, C, q + i0 * D.W, D.W, dk, D.W, 1.0f, true, innerFrom, i0});
  }
};

/** Rotates (sign +1) or un-rotates (−1) every query and key head vector of a [B,S,W] buffer in place, in
 *  double from its f32 values plus `bias` (the query and key part of b_qkv, or null). */
void rotateHeads(float* packed, const float* bias, const Dims& D, double sign) {
  const Rope tables = ropeTables(D.S, D.hd);
  parallelFor(D.B * D.S, rowGrain(D.W), [&](int64_t r0, int64_t r1) {
    std::vector<double> a(static_cast<size_t>(D.hd));
    for (int64_t r = r0; r < r1; r++) {
      const int64_t s = r % D.S;
      for (int64_t c = 0; c < D.H + D.K; c++) {
        float* x = packed + r * D.W + c * D.hd;
        const float* bc = bias ? bias + c * D.hd : nullptr;
        if (bc)
          for (int64_t e = 0; e < D.hd; e++) a[e] = static_cast<double>(x[e]) + bc[e];
        else
          std::copy(x, x + D.hd, a.begin());
        rotate(a.data(), s, tables, sign);
        for (int64_t e = 0; e < D.hd; e++) x[e] = static_cast<float>(a[e]);
      }
    }
  });
}

/** qkv [B,S,W] = x·W_qkvᵀ + b_qkv with its query and key heads rotated, in the launch's scratch. A rotated head
 *  adds its bias in double and rounds once after the rotation (the interpreter's sum, unrounded); the others
 *  add it in f32 (the double sum rounded once is the same bits). */
float* projectQkv(const float* x, const float* wqkv, const float* bqkv, const Dims& D) {
  const int64_t rows = D.B * D.S;
  float* qkv = scratch<float>(kQkv, static_cast<size_t>(rows * D.W));
  project(x, wqkv, rows, D.d, D.W, true, qkv);
  const int64_t rotated = D.rope ? (D.H + D.K) * D.hd : 0;  // the leading columns rotateHeads takes
  if (bqkv)
    parallelFor(rows, rowGrain(D.W), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = rotated; c < D.W; c++) qkv[r * D.W + c] += bqkv[c];
    });
  if (D.rope) rotateHeads(qkv, bqkv, D, 1);
  return qkv;
}

// Operands x, W_qkv, [b_qkv], W_proj, [b_proj] (biases when the `bias` attribute is set).
void attention(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Dims D = dimsOf(in[0], attrs);
  const bool bias = attrs.boolean("bias");
  const float* bproj = D.projBias ? in[4].f32() : nullptr;
  const int64_t rows = D.B * D.S;
  const float* qkv = projectQkv(in[0].f32(), in[1].f32(), bias ? in[2].f32() : nullptr, D);
  // The context p·v into ctx [B,S,C]: a task per head and block of query rows (each writes its own rows).
  float* ctx = scratch<float>(kContext, static_cast<size_t>(rows * D.C));
  const int64_t blocks = (D.S + kBlock - 1) / kBlock;
  // Scores and context: 4·S·S·hd a head (half of it under a causal mask, counted whole: a bound is enough).
  const double flops = 4.0 * static_cast<double>(D.B * D.H * D.S * D.S * D.hd);
  parallelTasks(D.B * D.H * blocks, flops, [&](int64_t t) {
    const int64_t i = t / blocks, i0 = t % blocks * kBlock;
    const int64_t b = i / D.H, h = i % D.H;
    const KeyValues kv = keyValues(qkv, D, b, h / (D.H / D.K), false);
    const Block blk(D, i0);
    float* p = scratch<float>(kProbs, static_cast<size_t>(blk.R * blk.C));
    blk.probabilities(head(qkv, D, b, Part::Query, h), kv, p);
    blk.context(p, kv, ctx + (b * D.S + i0) * D.C + h * D.hd, D.C);
  });
  float* o = out[0].f32();
  project(ctx, in[bias ? 3 : 2].f32(), rows, D.C, D.d, true, o);
  if (bproj)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < D.d; c++) o[r * D.d + c] += bproj[c];
}

// Operands dy, x, W_qkv, [b_qkv], W_proj (the output bias affects no gradient here); outputs dx, dqkv
// [B,S,W] (for the QKV weight and bias gradients) and the recomputed context (for the output projection's).
void attentionGradInput(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Dims D = dimsOf(in[1], attrs);
  const bool bias = attrs.boolean("bias");
  const float* wqkv = in[2].f32();
  const float* qkv = projectQkv(in[1].f32(), wqkv, bias ? in[3].f32() : nullptr, D);
  const int64_t rows = D.B * D.S;
  float* dctx = scratch<float>(kContext, static_cast<size_t>(rows * D.C));
  project(in[0].f32(), in[bias ? 4 : 3].f32(), rows, D.d, D.C, false, dctx);
  float* ctx = out[2].f32();
  float* dqkv = out[1].f32();

  // Per head, block by block, the probabilities once: the context p·v (the third output), dp = dctx·vᵀ,
  // dv += pᵀ·dctx, ds = p·(dp − Σ dp·p)/√hd, dq = ds·k, dk += dsᵀ·q, straight into dqkv.
  // A task is a key/value head with the query heads that read it, in order, so dk and dv add up in the
  // same order however the tasks are spread over threads.
  // dq is written block by block; dk and dv add up over blocks and query heads, from zero.
  const int64_t group = D.H / D.K;
  // The probabilities again, the context, and four products of the gradients: 12·S·S·hd a query head.
  const double flops = 12.0 * static_cast<double>(D.B * D.H * D.S * D.S * D.hd);
  parallelTasks(D.B * D.K, flops, [&](int64_t t) {
    const int64_t b = t / D.K, g = t % D.K;
    const int64_t block = std::min(kBlock, D.S);
    float* p = scratch<float>(kProbs, static_cast<size_t>(block * D.S));
    float* dp = scratch<float>(kProbGrads, static_cast<size_t>(block * D.S));
    const KeyValues kv = keyValues(qkv, D, b, g, true);
    float* dk = head(dqkv, D, b, Part::Key, g);
    float* dv = head(dqkv, D, b, Part::Value, g);
    for (int64_t s = 0; s < D.S; s++) {
      std::fill(dk + s * D.W, dk + s * D.W + D.hd, 0.0f);
      std::fill(dv + s * D.W, dv + s * D.W + D.hd, 0.0f);
    }
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
      const float* q = head(qkv, D, b, Part::Query, h);
      float* dq = head(dqkv, D, b, Part::Query, h);
      for (int64_t i0 = 0; i0 < D.S; i0 += kBlock) {
        const Block blk(D, i0);
        const int64_t at = (b * D.S + i0) * D.C + h * D.hd;  // this head's block in ctx and dctx, rows C apart
        blk.probabilities(q, kv, p);
        blk.context(p, kv, ctx + at, D.C);
        blk.probGrads(dctx + at, D.C, kv, dp);
        blk.valueGrads(p, dctx + at, D.C, dv);
        blk.scoreGrads(p, dp);
        blk.queryGrads(dp, kv, dq);
        blk.keyGrads(dp, q, dk);
      }
    }
  });

  // Un-rotate the query and key gradients: the rotation is orthogonal, its gradient the inverse rotation.
  if (D.rope) rotateHeads(dqkv, nullptr, D, -1);
  // dx = dqkv·W_qkv from the f32 dqkv just written, as the interpreter computes it from its f32 output.
  project(dqkv, wqkv, rows, D.W, D.d, false, out[0].f32());
}

}  // namespace

REGISTER_KERNEL("attention", attention, FillsOutputs::Yes);
REGISTER_KERNEL("attention_grad_input", attentionGradInput, FillsOutputs::Yes);

}  // namespace fsm
