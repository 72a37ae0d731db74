// Fused self-attention and its input gradient, as src/interp/kernels/attention.ts (see its header for the
// conventions: packed QKV [query heads, key heads, value heads], GQA by ⌊h / (heads / kv_heads)⌋, HF Llama
// rotate_half rotary embeddings, scores/√hd, causal mask j > i). Every matrix product runs on sgemm in f32
// (OpenBLAS when built with it): the projections, and per head the scores q·kᵀ, the context p·v and the five
// products of the backward; each softmax row and its backward reduction run in double. Unlike the
// interpreter, the S×S probabilities are never stored: they are recomputed in blocks of query rows where
// needed (forward context, backward), FlashAttention-style, so memory stays O(B·S·d + block·S).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "device/cpu/gemm.h"
#include "device/cpu/registry.h"

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

/** a [rows, inner] · op(w) → [rows, cols] in double, where op(w) = wᵀ (w is [cols, inner]) when `transposed`,
 *  else w ([inner, cols]). The four projections are the attention's matrix products worth a BLAS call: sgemm
 *  in f32 (OpenBLAS when built with it), then widened for the double-precision middle of the kernel. */
std::vector<double> project(const float* a, const float* w, int64_t rows, int64_t inner, int64_t cols, bool transposed) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  sgemm(false, transposed, static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(inner), 1.0f, a, static_cast<int>(inner), w,
        static_cast<int>(transposed ? inner : cols), 0.0f, out.data(), static_cast<int>(cols));
  return std::vector<double>(out.begin(), out.end());
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

/** The recomputable forward state, f32 and head-major so each head is a contiguous [S, hd] matrix for sgemm:
 *  rotated q [B,H,S,hd], rotated k and v [B,K,S,hd], and the context [B,S,d]. */
struct Forward {
  std::vector<float> q, k, v, ctx;
};

float* head(std::vector<float>& t, int64_t index, const Dims& D) { return t.data() + index * D.S * D.hd; }
const float* head(const std::vector<float>& t, int64_t index, const Dims& D) { return t.data() + index * D.S * D.hd; }

/** Calls fn(b, h, g, q, k, v) for every batch row b and query head h: its [S, hd] query head and the key and
 *  value heads g it reads (grouped-query attention shares one among H / K query heads). */
template <typename Fn>
void forEachHead(const Forward& f, const Dims& D, Fn fn) {
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t h = 0; h < D.H; h++) {
      const int64_t g = h / (D.H / D.K);
      fn(b, h, g, head(f.q, b * D.H + h, D), head(f.k, b * D.K + g, D), head(f.v, b * D.K + g, D));
    }
  }
}

/** Rows [i0, i0 + R) of one head's probabilities, [R, C] with C = the keys any of them sees: scores
 *  q·kᵀ/√hd on sgemm, then each row's masked softmax in double (masked entries 0). */
int64_t probBlock(const float* q, const float* k, const Dims& D, int64_t i0, int64_t R, std::vector<float>& p) {
  const int64_t C = D.causal ? i0 + R : D.S;
  const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(D.hd)));
  sgemm(false, true, static_cast<int>(R), static_cast<int>(C), static_cast<int>(D.hd), scale, q + i0 * D.hd, static_cast<int>(D.hd), k,
        static_cast<int>(D.hd), 0.0f, p.data(), static_cast<int>(C));
  for (int64_t r = 0; r < R; r++) {
    float* row = p.data() + r * C;
    const int64_t last = D.causal ? i0 + r : D.S - 1;
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j <= last; j++) max = std::fmax(max, static_cast<double>(row[j]));
    double sum = 0;
    for (int64_t j = 0; j <= last; j++) {
      const double e = std::exp(static_cast<double>(row[j]) - max);
      sum += e;
      row[j] = static_cast<float>(e);
    }
    const double inv = 1 / sum;
    for (int64_t j = 0; j <= last; j++) row[j] = static_cast<float>(row[j] * inv);
    for (int64_t j = last + 1; j < C; j++) row[j] = 0.0f;
  }
  return C;
}

/** qkv = x·W_qkvᵀ + b_qkv split into heads (and rotated), then the context p·v per head, block by block. */
Forward forward(const float* x, const float* wqkv, const float* bqkv, const Dims& D) {
  const int64_t rows = D.B * D.S;
  std::vector<double> qkv = project(x, wqkv, rows, D.d, D.W, true);
  if (bqkv)
    for (int64_t r = 0; r < rows; r++)
      for (int64_t c = 0; c < D.W; c++) qkv[r * D.W + c] += bqkv[c];
  Forward f;
  f.q.resize(static_cast<size_t>(D.B * D.H * D.S * D.hd));
  f.k.resize(static_cast<size_t>(D.B * D.K * D.S * D.hd));
  f.v.resize(static_cast<size_t>(D.B * D.K * D.S * D.hd));
  const Rope tables = D.rope ? ropeTables(D.S, D.hd) : Rope{};
  std::vector<double> a(static_cast<size_t>(D.hd));
  // One head vector: copied out of the packed row, rotated in double, stored f32.
  auto store = [&](const double* from, float* to, int64_t s, bool rotated) {
    std::copy(from, from + D.hd, a.begin());
    if (rotated && D.rope) rotate(a.data(), s, tables, 1);
    for (int64_t e = 0; e < D.hd; e++) to[e] = static_cast<float>(a[e]);
  };
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t s = 0; s < D.S; s++) {
      const double* row = qkv.data() + (b * D.S + s) * D.W;
      for (int64_t h = 0; h < D.H; h++) store(row + h * D.hd, head(f.q, b * D.H + h, D) + s * D.hd, s, true);
      for (int64_t g = 0; g < D.K; g++) {
        store(row + (D.H + g) * D.hd, head(f.k, b * D.K + g, D) + s * D.hd, s, true);
        store(row + (D.H + D.K + g) * D.hd, head(f.v, b * D.K + g, D) + s * D.hd, s, false);
      }
    }
  }
  f.ctx.assign(static_cast<size_t>(rows * D.C), 0.0f);
  std::vector<float> p(static_cast<size_t>(std::min(kBlock, D.S) * D.S));
  std::vector<float> c(static_cast<size_t>(std::min(kBlock, D.S) * D.hd));
  forEachHead(f, D, [&](int64_t b, int64_t h, int64_t, const float* q, const float* k, const float* v) {
    for (int64_t i0 = 0; i0 < D.S; i0 += kBlock) {
      const int64_t R = std::min(kBlock, D.S - i0);
      const int64_t C = probBlock(q, k, D, i0, R, p);
      sgemm(false, false, static_cast<int>(R), static_cast<int>(D.hd), static_cast<int>(C), 1.0f, p.data(), static_cast<int>(C), v,
            static_cast<int>(D.hd), 0.0f, c.data(), static_cast<int>(D.hd));
      for (int64_t r = 0; r < R; r++) std::copy(c.data() + r * D.hd, c.data() + (r + 1) * D.hd, f.ctx.data() + (b * D.S + i0 + r) * D.C + h * D.hd);
    }
  });
  return f;
}

// Operands x, W_qkv, [b_qkv], W_proj, [b_proj] (biases when the `bias` attribute is set).
void attention(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Dims D = dimsOf(in[0], attrs);
  const bool bias = attrs.boolean("bias");
  const float* bproj = D.projBias ? in[4].f32() : nullptr;
  const Forward f = forward(in[0].f32(), in[1].f32(), bias ? in[2].f32() : nullptr, D);
  const int64_t rows = D.B * D.S;
  const std::vector<double> y = project(f.ctx.data(), in[bias ? 3 : 2].f32(), rows, D.C, D.d, true);
  float* o = out[0].f32();
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < D.d; c++) o[r * D.d + c] = static_cast<float>(y[r * D.d + c] + (bproj ? bproj[c] : 0.0));
}

// Operands dy, x, W_qkv, [b_qkv], W_proj (the output bias affects no gradient here); outputs dx, dqkv
// [B,S,W] (for the QKV weight and bias gradients) and the recomputed context (for the output projection's).
void attentionGradInput(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Dims D = dimsOf(in[1], attrs);
  const bool bias = attrs.boolean("bias");
  const float* wqkv = in[2].f32();
  const Forward f = forward(in[1].f32(), wqkv, bias ? in[3].f32() : nullptr, D);
  const int64_t rows = D.B * D.S;
  const std::vector<double> dctx = project(in[0].f32(), in[bias ? 4 : 3].f32(), rows, D.d, D.C, false);

  // Per head, block by block: dp = dctx·vᵀ, dv += pᵀ·dctx, ds = p·(dp − Σ dp·p)/√hd, dq = ds·k, dk += dsᵀ·q.
  std::vector<float> dq(f.q.size(), 0.0f), dk(f.k.size(), 0.0f), dv(f.v.size(), 0.0f);
  const double scale = 1 / std::sqrt(static_cast<double>(D.hd));
  const int64_t block = std::min(kBlock, D.S);
  std::vector<float> p(static_cast<size_t>(block * D.S)), dp(static_cast<size_t>(block * D.S));
  std::vector<float> dc(static_cast<size_t>(D.S * D.hd));
  forEachHead(f, D, [&](int64_t b, int64_t h, int64_t g, const float* q, const float* k, const float* v) {
    float* dqh = head(dq, b * D.H + h, D);
    float* dkg = head(dk, b * D.K + g, D);
    float* dvg = head(dv, b * D.K + g, D);
    for (int64_t s = 0; s < D.S; s++)
      for (int64_t e = 0; e < D.hd; e++) dc[s * D.hd + e] = static_cast<float>(dctx[(b * D.S + s) * D.C + h * D.hd + e]);
    for (int64_t i0 = 0; i0 < D.S; i0 += kBlock) {
      const int64_t R = std::min(kBlock, D.S - i0);
      const int64_t C = probBlock(q, k, D, i0, R, p);
      const int iR = static_cast<int>(R), iC = static_cast<int>(C), ihd = static_cast<int>(D.hd);
      const float* dcb = dc.data() + i0 * D.hd;
      sgemm(false, true, iR, iC, ihd, 1.0f, dcb, ihd, v, ihd, 0.0f, dp.data(), iC);
      sgemm(true, false, iC, ihd, iR, 1.0f, p.data(), iC, dcb, ihd, 1.0f, dvg, ihd);
      for (int64_t r = 0; r < R; r++) {
        const float* pr = p.data() + r * C;
        float* dr = dp.data() + r * C;
        double dot = 0;
        for (int64_t j = 0; j < C; j++) dot += static_cast<double>(dr[j]) * pr[j];
        for (int64_t j = 0; j < C; j++) dr[j] = static_cast<float>(pr[j] * (dr[j] - dot) * scale);
      }
      sgemm(false, false, iR, ihd, iC, 1.0f, dp.data(), iC, k, ihd, 0.0f, dqh + i0 * D.hd, ihd);
      sgemm(true, false, iC, ihd, iR, 1.0f, dp.data(), iC, q + i0 * D.hd, ihd, 1.0f, dkg, ihd);
    }
  });

  // Un-rotate (the rotation is orthogonal: its gradient is the inverse rotation) and pack like qkv.
  const Rope tables = D.rope ? ropeTables(D.S, D.hd) : Rope{};
  float* dqkv = out[1].f32();
  std::vector<double> a(static_cast<size_t>(D.hd));
  auto put = [&](const float* from, float* to, int64_t s, bool rotated) {
    std::copy(from, from + D.hd, a.begin());
    if (rotated && D.rope) rotate(a.data(), s, tables, -1);
    for (int64_t e = 0; e < D.hd; e++) to[e] = static_cast<float>(a[e]);
  };
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t s = 0; s < D.S; s++) {
      float* row = dqkv + (b * D.S + s) * D.W;
      for (int64_t h = 0; h < D.H; h++) put(head(dq, b * D.H + h, D) + s * D.hd, row + h * D.hd, s, true);
      for (int64_t g = 0; g < D.K; g++) {
        put(head(dk, b * D.K + g, D) + s * D.hd, row + (D.H + g) * D.hd, s, true);
        put(head(dv, b * D.K + g, D) + s * D.hd, row + (D.H + D.K + g) * D.hd, s, false);
      }
    }
  }
  // dx = dqkv·W_qkv from the f32 dqkv just written, as the interpreter computes it from its f32 output.
  const std::vector<double> dx = project(dqkv, wqkv, rows, D.W, D.d, false);
  float* dxo = out[0].f32();
  for (int64_t k = 0; k < rows * D.d; k++) dxo[k] = static_cast<float>(dx[k]);
  std::copy(f.ctx.begin(), f.ctx.end(), out[2].f32());
}

}  // namespace

REGISTER_KERNEL("attention", attention);
REGISTER_KERNEL("attention_grad_input", attentionGradInput);

}  // namespace fsm
