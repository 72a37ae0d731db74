// Fused self-attention and its input gradient, as src/interp/kernels/attention.ts (see its header for the
// conventions: packed QKV [query heads, key heads, value heads], GQA by ⌊h / (heads / kv_heads)⌋, HF Llama
// rotate_half rotary embeddings, scores/√hd, causal mask j > i). Every matrix product runs on sgemm in f32
// (OpenBLAS when built with it): the projections, and per head the scores q·kᵀ, the context p·v and the five
// products of the backward; each softmax row runs in f32 (vectorized exponentials, sums in double), the
// rotary embeddings in double. Unlike the interpreter, the S×S probabilities are never stored: they are
// recomputed in blocks of query rows where needed (forward context, backward), FlashAttention-style, so
// memory stays O(B·S·d + block·S). Heads are independent tasks for the device's kernel threads (parallel.h)
// when they are small; the backward's task is a key/value head with its query heads, so each gradient sums
// in one order whatever the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

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

/** Heads run as tasks over the device's kernel threads when each head's products are small enough that
 *  OpenBLAS runs them on one thread (S·S·hd ≤ 2¹⁸ multiply-adds); longer sequences leave the threads to
 *  OpenBLAS, head after head. */
bool headsAsTasks(const Dims& D) { return D.S * D.S * D.hd <= (int64_t{1} << 18); }

template <typename Fn>
void forTasks(int64_t n, bool tasks, Fn&& fn) {
  if (tasks) parallelTasks(n, fn);
  else
    for (int64_t i = 0; i < n; i++) fn(i);
}

/** The recomputable forward state, f32 and head-major so each head is a contiguous [S, hd] matrix for sgemm:
 *  rotated q [B,H,S,hd], rotated k and v [B,K,S,hd], in the kernel's scratch (scratch.h). */
struct Forward {
  float* q;
  float* k;
  float* v;
};

// Scratch slots (scratch.h): the launch's (kQkv..kGrads) and each head task's (kProbs, kProbGrads).
constexpr int kQkv = 0, kHeads = 1, kContext = 2, kGrads = 3, kProbs = 4, kProbGrads = 5;

float* head(float* t, int64_t index, const Dims& D) { return t + index * D.S * D.hd; }

// The softmax's backward on one row: ds = p·(dp − Σ dp·p)·scale, in place of dp.
FSM_CPU_CLONES void softmaxBackRow(const float* p, float* dp, int64_t n, float dot, float scale) {
  for (int64_t j = 0; j < n; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
}

/** Rows [i0, i0 + R) of one head's probabilities, [R, C] with C = the keys any of them sees: scores
 *  q·kᵀ/√hd on sgemm, then each row's masked softmax (masked entries 0). The max ignores NaN scores as fmax
 *  does; a NaN score still makes its row NaN through its exponential. */
int64_t probBlock(const float* q, const float* k, const Dims& D, int64_t i0, int64_t R, float* p) {
  const int64_t C = D.causal ? i0 + R : D.S;
  const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(D.hd)));
  sgemm(false, true, static_cast<int>(R), static_cast<int>(C), static_cast<int>(D.hd), scale, q + i0 * D.hd, static_cast<int>(D.hd), k,
        static_cast<int>(D.hd), 0.0f, p, static_cast<int>(C));
  for (int64_t r = 0; r < R; r++) {
    float* row = p + r * C;
    const int64_t seen = D.causal ? i0 + r + 1 : D.S;
    expShifted(row, row, seen, rowMax(row, seen));
    scaleRow(row, seen, static_cast<float>(1 / sumOf(row, seen)));
    std::fill(row + seen, row + C, 0.0f);
  }
  return C;
}

/** qkv = x·W_qkvᵀ + b_qkv split into heads (and rotated), then the context p·v per head, block by block, into
 *  `ctx` [B,S,C]. */
Forward forward(const float* x, const float* wqkv, const float* bqkv, const Dims& D, float* ctx) {
  const int64_t rows = D.B * D.S;
  float* qkv = scratch<float>(kQkv, static_cast<size_t>(rows * D.W));
  project(x, wqkv, rows, D.d, D.W, true, qkv);
  const int64_t qn = D.B * D.H * D.S * D.hd, kn = D.B * D.K * D.S * D.hd;
  float* heads = scratch<float>(kHeads, static_cast<size_t>(qn + 2 * kn));
  const Forward f{heads, heads + qn, heads + qn + kn};
  const Rope tables = D.rope ? ropeTables(D.S, D.hd) : Rope{};
  parallelFor(rows, 64, [&](int64_t r0, int64_t r1) {
    std::vector<double> a(static_cast<size_t>(D.hd));
    // One head vector of the packed row plus its bias: rotated in double (the sum unrounded, as the
    // interpreter's), else the f32 sum (the double sum rounded once is the same bits).
    auto store = [&](const float* from, const float* bias, float* to, int64_t s, bool rotated) {
      if (rotated && D.rope) {
        for (int64_t e = 0; e < D.hd; e++) a[e] = static_cast<double>(from[e]) + (bias ? bias[e] : 0.0);
        rotate(a.data(), s, tables, 1);
        for (int64_t e = 0; e < D.hd; e++) to[e] = static_cast<float>(a[e]);
      } else if (bias) {
        for (int64_t e = 0; e < D.hd; e++) to[e] = from[e] + bias[e];
      } else {
        std::copy(from, from + D.hd, to);
      }
    };
    for (int64_t r = r0; r < r1; r++) {
      const int64_t b = r / D.S, s = r % D.S;
      const float* row = qkv + r * D.W;
      auto bias = [&](int64_t c) { return bqkv ? bqkv + c : nullptr; };
      for (int64_t h = 0; h < D.H; h++) store(row + h * D.hd, bias(h * D.hd), head(f.q, b * D.H + h, D) + s * D.hd, s, true);
      for (int64_t g = 0; g < D.K; g++) {
        store(row + (D.H + g) * D.hd, bias((D.H + g) * D.hd), head(f.k, b * D.K + g, D) + s * D.hd, s, true);
        store(row + (D.H + D.K + g) * D.hd, bias((D.H + D.K + g) * D.hd), head(f.v, b * D.K + g, D) + s * D.hd, s, false);
      }
    }
  });
  forTasks(D.B * D.H, headsAsTasks(D), [&](int64_t i) {
    const int64_t b = i / D.H, h = i % D.H, g = h / (D.H / D.K);
    const float* q = head(f.q, b * D.H + h, D);
    const float* k = head(f.k, b * D.K + g, D);
    const float* v = head(f.v, b * D.K + g, D);
    float* p = scratch<float>(kProbs, static_cast<size_t>(std::min(kBlock, D.S) * D.S));
    for (int64_t i0 = 0; i0 < D.S; i0 += kBlock) {
      const int64_t R = std::min(kBlock, D.S - i0);
      const int64_t C = probBlock(q, k, D, i0, R, p);
      sgemm(false, false, static_cast<int>(R), static_cast<int>(D.hd), static_cast<int>(C), 1.0f, p, static_cast<int>(C), v,
            static_cast<int>(D.hd), 0.0f, ctx + (b * D.S + i0) * D.C + h * D.hd, static_cast<int>(D.C));
    }
  });
  return f;
}

// Operands x, W_qkv, [b_qkv], W_proj, [b_proj] (biases when the `bias` attribute is set).
void attention(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Dims D = dimsOf(in[0], attrs);
  const bool bias = attrs.boolean("bias");
  const float* bproj = D.projBias ? in[4].f32() : nullptr;
  const int64_t rows = D.B * D.S;
  float* ctx = scratch<float>(kContext, static_cast<size_t>(rows * D.C));
  forward(in[0].f32(), in[1].f32(), bias ? in[2].f32() : nullptr, D, ctx);
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
  const Forward f = forward(in[1].f32(), wqkv, bias ? in[3].f32() : nullptr, D, out[2].f32());
  const int64_t rows = D.B * D.S;
  float* dctx = scratch<float>(kContext, static_cast<size_t>(rows * D.C));
  project(in[0].f32(), in[bias ? 4 : 3].f32(), rows, D.d, D.C, false, dctx);

  // Per head, block by block: dp = dctx·vᵀ, dv += pᵀ·dctx, ds = p·(dp − Σ dp·p)/√hd, dq = ds·k, dk += dsᵀ·q.
  // A task is a key/value head with the query heads that read it, in order, so dk and dv add up in the
  // same order however the tasks are spread over threads.
  // dq is written block by block; dk and dv add up over blocks and query heads, from zero.
  const int64_t qn = D.B * D.H * D.S * D.hd, kn = D.B * D.K * D.S * D.hd;
  float* dq = scratch<float>(kGrads, static_cast<size_t>(qn + 2 * kn));
  float* dk = dq + qn;
  float* dv = dk + kn;
  std::fill(dk, dk + 2 * kn, 0.0f);
  const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(D.hd)));
  const int64_t group = D.H / D.K;
  forTasks(D.B * D.K, headsAsTasks(D), [&](int64_t t) {
    const int64_t b = t / D.K, g = t % D.K;
    const int64_t block = std::min(kBlock, D.S);
    float* p = scratch<float>(kProbs, static_cast<size_t>(block * D.S));
    float* dp = scratch<float>(kProbGrads, static_cast<size_t>(block * D.S));
    const float* k = head(f.k, b * D.K + g, D);
    const float* v = head(f.v, b * D.K + g, D);
    float* dkg = head(dk, b * D.K + g, D);
    float* dvg = head(dv, b * D.K + g, D);
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
      const float* q = head(f.q, b * D.H + h, D);
      float* dqh = head(dq, b * D.H + h, D);
      for (int64_t i0 = 0; i0 < D.S; i0 += kBlock) {
        const int64_t R = std::min(kBlock, D.S - i0);
        const int64_t C = probBlock(q, k, D, i0, R, p);
        const int iR = static_cast<int>(R), iC = static_cast<int>(C), ihd = static_cast<int>(D.hd), ldc = static_cast<int>(D.C);
        const float* dcb = dctx + (b * D.S + i0) * D.C + h * D.hd;  // this head's context gradient, rows C apart
        sgemm(false, true, iR, iC, ihd, 1.0f, dcb, ldc, v, ihd, 0.0f, dp, iC);
        sgemm(true, false, iC, ihd, iR, 1.0f, p, iC, dcb, ldc, 1.0f, dvg, ihd);
        for (int64_t r = 0; r < R; r++) {
          const float* pr = p + r * C;
          float* dr = dp + r * C;
          softmaxBackRow(pr, dr, C, static_cast<float>(dotOf(dr, pr, C)), scale);
        }
        sgemm(false, false, iR, ihd, iC, 1.0f, dp, iC, k, ihd, 0.0f, dqh + i0 * D.hd, ihd);
        sgemm(true, false, iC, ihd, iR, 1.0f, dp, iC, q + i0 * D.hd, ihd, 1.0f, dkg, ihd);
      }
    }
  });

  // Un-rotate (the rotation is orthogonal: its gradient is the inverse rotation) and pack like qkv.
  const Rope tables = D.rope ? ropeTables(D.S, D.hd) : Rope{};
  float* dqkv = out[1].f32();
  parallelFor(rows, 64, [&](int64_t r0, int64_t r1) {
    std::vector<double> a(static_cast<size_t>(D.hd));
    auto put = [&](const float* from, float* to, int64_t s, bool rotated) {
      if (rotated && D.rope) {
        std::copy(from, from + D.hd, a.begin());
        rotate(a.data(), s, tables, -1);
        for (int64_t e = 0; e < D.hd; e++) to[e] = static_cast<float>(a[e]);
      } else {
        std::copy(from, from + D.hd, to);
      }
    };
    for (int64_t r = r0; r < r1; r++) {
      const int64_t b = r / D.S, s = r % D.S;
      float* row = dqkv + r * D.W;
      for (int64_t h = 0; h < D.H; h++) put(head(dq, b * D.H + h, D) + s * D.hd, row + h * D.hd, s, true);
      for (int64_t g = 0; g < D.K; g++) {
        put(head(dk, b * D.K + g, D) + s * D.hd, row + (D.H + g) * D.hd, s, true);
        put(head(dv, b * D.K + g, D) + s * D.hd, row + (D.H + D.K + g) * D.hd, s, false);
      }
    }
  });
  // dx = dqkv·W_qkv from the f32 dqkv just written, as the interpreter computes it from its f32 output.
  project(dqkv, wqkv, rows, D.W, D.d, false, out[0].f32());
}

}  // namespace

REGISTER_KERNEL("attention", attention, FillsOutputs::Yes);
REGISTER_KERNEL("attention_grad_input", attentionGradInput, FillsOutputs::Yes);

}  // namespace fsm
