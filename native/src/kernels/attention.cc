// Fused self-attention and its input gradient, as src/interp/kernels/attention.ts (see its header for the
// conventions: packed QKV [query heads, key heads, value heads], GQA by ⌊h / (heads / kv_heads)⌋, HF Llama
// rotate_half rotary embeddings, scores/√hd, causal mask j > i). The projections run on sgemm in f32; the
// per-head scores, softmax and context run in double, as the interpreter's do. Unlike the interpreter, the S×S probabilities are
// never stored: each row is recomputed where it is needed (forward context, backward), FlashAttention-style,
// so memory stays O(B·S·d).
#include <cmath>
#include <limits>
#include <vector>

#include "../gemm.h"
#include "kernel.h"

namespace fsm {
namespace {

/** Base of the rotary frequencies (Llama's rope_theta; ROPE_BASE in attention.ts). */
constexpr double kRopeBase = 10000;

struct Dims {
  int64_t B, S, d, H, K, hd;
  int64_t W;  // width of the packed projection, (H + 2K)·hd
  bool causal, rope;
};

Dims dimsOf(const Tensor& x, const Attrs& attrs) {
  Dims D;
  D.B = x.shape[0];
  D.S = x.shape[1];
  D.d = x.shape[2];
  D.H = static_cast<int64_t>(attrs.number("heads"));
  D.K = attrs.has("kv_heads") ? static_cast<int64_t>(attrs.number("kv_heads")) : D.H;
  D.hd = D.d / D.H;
  D.W = (D.H + 2 * D.K) * D.hd;
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

std::vector<double> project(const double* a, const float* w, int64_t rows, int64_t inner, int64_t cols, bool transposed) {
  const std::vector<float> narrow(a, a + rows * inner);
  return project(narrow.data(), w, rows, inner, cols, transposed);
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

/** The recomputable forward state: rotated q [B,H,S,hd], rotated k and v [B,K,S,hd], context [B,S,d]. */
struct Forward {
  std::vector<double> q, k, v, ctx;
};

/** Row i of head h's probabilities into p[0..last] (softmax of the masked, scaled scores); returns last. */
int64_t probRow(const Forward& f, const Dims& D, int64_t b, int64_t h, int64_t i, double* p) {
  const int64_t g = h / (D.H / D.K);
  const double scale = 1 / std::sqrt(static_cast<double>(D.hd));
  const int64_t last = D.causal ? i : D.S - 1;
  const double* qi = f.q.data() + ((b * D.H + h) * D.S + i) * D.hd;
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= last; j++) {
    const double* kj = f.k.data() + ((b * D.K + g) * D.S + j) * D.hd;
    double s = 0;
    for (int64_t e = 0; e < D.hd; e++) s += qi[e] * kj[e];
    p[j] = s * scale;
    max = std::fmax(max, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j <= last; j++) sum += (p[j] = std::exp(p[j] - max));
  for (int64_t j = 0; j <= last; j++) p[j] /= sum;
  return last;
}

/** qkv = x·W_qkvᵀ + b_qkv split into heads (and rotated), then the context p·v per head. */
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
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t s = 0; s < D.S; s++) {
      const double* row = qkv.data() + (b * D.S + s) * D.W;
      for (int64_t h = 0; h < D.H; h++) {
        double* q = f.q.data() + ((b * D.H + h) * D.S + s) * D.hd;
        for (int64_t e = 0; e < D.hd; e++) q[e] = row[h * D.hd + e];
        if (D.rope) rotate(q, s, tables, 1);
      }
      for (int64_t g = 0; g < D.K; g++) {
        double* k = f.k.data() + ((b * D.K + g) * D.S + s) * D.hd;
        double* v = f.v.data() + ((b * D.K + g) * D.S + s) * D.hd;
        for (int64_t e = 0; e < D.hd; e++) {
          k[e] = row[(D.H + g) * D.hd + e];
          v[e] = row[(D.H + D.K + g) * D.hd + e];
        }
        if (D.rope) rotate(k, s, tables, 1);
      }
    }
  }
  f.ctx.assign(static_cast<size_t>(rows * D.d), 0.0);
  std::vector<double> p(static_cast<size_t>(D.S));
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t h = 0; h < D.H; h++) {
      const int64_t g = h / (D.H / D.K);
      for (int64_t i = 0; i < D.S; i++) {
        const int64_t last = probRow(f, D, b, h, i, p.data());
        double* c = f.ctx.data() + (b * D.S + i) * D.d + h * D.hd;
        for (int64_t j = 0; j <= last; j++) {
          const double* vj = f.v.data() + ((b * D.K + g) * D.S + j) * D.hd;
          for (int64_t e = 0; e < D.hd; e++) c[e] += p[j] * vj[e];
        }
      }
    }
  }
  return f;
}

// Operands x, W_qkv, [b_qkv], W_proj, [b_proj] (biases when the `bias` attribute is set).
void attention(const std::vector<Tensor>& in, std::vector<Tensor>& out, const Attrs& attrs) {
  const Dims D = dimsOf(in[0], attrs);
  const bool bias = attrs.boolean("bias");
  const float* bproj = bias ? in[4].f32() : nullptr;
  const Forward f = forward(in[0].f32(), in[1].f32(), bias ? in[2].f32() : nullptr, D);
  const int64_t rows = D.B * D.S;
  const std::vector<double> y = project(f.ctx.data(), in[bias ? 3 : 2].f32(), rows, D.d, D.d, true);
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
  const std::vector<double> dctx = project(in[0].f32(), in[bias ? 4 : 3].f32(), rows, D.d, D.d, false);

  std::vector<double> dq(f.q.size(), 0.0), dk(f.k.size(), 0.0), dv(f.v.size(), 0.0);
  const double scale = 1 / std::sqrt(static_cast<double>(D.hd));
  std::vector<double> p(static_cast<size_t>(D.S)), dp(static_cast<size_t>(D.S));
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t h = 0; h < D.H; h++) {
      const int64_t g = h / (D.H / D.K);
      for (int64_t i = 0; i < D.S; i++) {
        const int64_t last = probRow(f, D, b, h, i, p.data());
        const double* dc = dctx.data() + (b * D.S + i) * D.d + h * D.hd;
        // dp = dctx·vᵀ, dv += pᵀ·dctx; then the softmax backward ds = p·(dp − Σ dp·p), scaled like the scores.
        double dot = 0;
        for (int64_t j = 0; j <= last; j++) {
          const double* vj = f.v.data() + ((b * D.K + g) * D.S + j) * D.hd;
          double* dvj = dv.data() + ((b * D.K + g) * D.S + j) * D.hd;
          double s = 0;
          for (int64_t e = 0; e < D.hd; e++) {
            s += dc[e] * vj[e];
            dvj[e] += p[j] * dc[e];
          }
          dp[j] = s;
          dot += s * p[j];
        }
        const double* qi = f.q.data() + ((b * D.H + h) * D.S + i) * D.hd;
        double* dqi = dq.data() + ((b * D.H + h) * D.S + i) * D.hd;
        for (int64_t j = 0; j <= last; j++) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          const double* kj = f.k.data() + ((b * D.K + g) * D.S + j) * D.hd;
          double* dkj = dk.data() + ((b * D.K + g) * D.S + j) * D.hd;
          for (int64_t e = 0; e < D.hd; e++) {
            dqi[e] += ds * kj[e];
            dkj[e] += ds * qi[e];
          }
        }
      }
    }
  }

  // Un-rotate (the rotation is orthogonal: its gradient is the inverse rotation) and pack like qkv.
  const Rope tables = D.rope ? ropeTables(D.S, D.hd) : Rope{};
  float* dqkv = out[1].f32();
  for (int64_t b = 0; b < D.B; b++) {
    for (int64_t s = 0; s < D.S; s++) {
      float* row = dqkv + (b * D.S + s) * D.W;
      for (int64_t h = 0; h < D.H; h++) {
        double* a = dq.data() + ((b * D.H + h) * D.S + s) * D.hd;
        if (D.rope) rotate(a, s, tables, -1);
        for (int64_t e = 0; e < D.hd; e++) row[h * D.hd + e] = static_cast<float>(a[e]);
      }
      for (int64_t g = 0; g < D.K; g++) {
        double* a = dk.data() + ((b * D.K + g) * D.S + s) * D.hd;
        const double* c = dv.data() + ((b * D.K + g) * D.S + s) * D.hd;
        if (D.rope) rotate(a, s, tables, -1);
        for (int64_t e = 0; e < D.hd; e++) {
          row[(D.H + g) * D.hd + e] = static_cast<float>(a[e]);
          row[(D.H + D.K + g) * D.hd + e] = static_cast<float>(c[e]);
        }
      }
    }
  }
  // dx = dqkv·W_qkv from the f32 dqkv just written, as the interpreter computes it from its f32 output.
  const std::vector<double> dx = project(dqkv, wqkv, rows, D.W, D.d, false);
  float* dxo = out[0].f32();
  float* ctx = out[2].f32();
  for (int64_t k = 0; k < rows * D.d; k++) {
    dxo[k] = static_cast<float>(dx[k]);
    ctx[k] = static_cast<float>(f.ctx[k]);
  }
}

}  // namespace

REGISTER_KERNEL("attention", attention);
REGISTER_KERNEL("attention_grad_input", attentionGradInput);

}  // namespace fsm
