// Fused self-attention and its input gradient. Conventions, which the PyTorch parity script mirrors:
// - qkv = x·W_qkvᵀ + b_qkv packs, along its last dim, the query heads (heads × hd), then the key heads
//   (kv_heads × hd), then the value heads (kv_heads × hd), hd = d / heads;
// - grouped-query attention: query head h reads key/value head ⌊h / (heads / kv_heads)⌋ (HF `repeat_kv`);
// - rotary embeddings (rope) follow HF Llama's `rotate_half`: per head, channel e < hd/2 pairs with e + hd/2,
//   angle(s, e) = s · 10000^(−2e / hd) at sequence position s; q' = q·cos + rotate_half(q)·sin with
//   rotate_half(q) = [−q[hd/2:], q[:hd/2]]; applied to queries and keys after the projection;
// - scores = q'·k'ᵀ / √hd, causal mask j > i, softmax over j, context = p·v, output = context·W_projᵀ + b_proj.
import type { Attrs } from "../../graph/types.js";
import { floats, type FloatArray, type Tensor } from "../tensor.js";
import { gemm } from "./matmul.js";
import { alloc, attrBool, type Kernel } from "./kernel.js";
import { attentionWidths } from "../../graph/ops/attention.js";

/** Base of the rotary frequencies (Llama's rope_theta). */
export const ROPE_BASE = 10000;

interface Dims {
  readonly B: number;
  readonly S: number;
  readonly d: number;
  readonly H: number;
  readonly K: number;
  readonly hd: number;
  /** Width of the packed projection, (H + 2K)·hd. */
  readonly W: number;
  /** Width of the context, H·hd: d, or d / parts on one rank of a tensor-parallel group. */
  readonly C: number;
  readonly causal: boolean;
  readonly rope: boolean;
}

function dimsOf(x: Tensor, attrs: Attrs): Dims {
  const [B, S, d] = x.shape as [number, number, number];
  // This rank's heads: all of them, or heads/parts of a tensor-parallel split (attentionWidths).
  const w = attentionWidths(attrs);
  return { B, S, d, H: w.heads, K: w.kvHeads, hd: w.headDim, W: w.qkv, C: w.context, causal: attrBool(attrs, "causal"), rope: attrBool(attrs, "rope") };
}

/** The recomputable forward: rotated q [B,H,S,hd], rotated k and v [B,K,S,hd], probabilities [B,H,S,S], context [B,S,d]. */
interface Forward {
  readonly q: Float64Array;
  readonly k: Float64Array;
  readonly v: Float64Array;
  readonly p: Float64Array;
  readonly ctx: Float64Array;
}

/** cos/sin tables [S, hd/2] of the rotary angles. */
function ropeTables(S: number, hd: number): { cos: Float64Array; sin: Float64Array } {
  const half = hd / 2;
  const cos = new Float64Array(S * half);
  const sin = new Float64Array(S * half);
  for (let s = 0; s < S; s++) {
    for (let e = 0; e < half; e++) {
      const angle = s * ROPE_BASE ** (-(2 * e) / hd);
      cos[s * half + e] = Math.cos(angle);
      sin[s * half + e] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** Rotates one head vector at `off` in place: forward (sign +1) or its transpose, the inverse (sign −1). */
function rotate(a: Float64Array, off: number, s: number, hd: number, t: { cos: Float64Array; sin: Float64Array }, sign: 1 | -1): void {
  const half = hd / 2;
  for (let e = 0; e < half; e++) {
    const c = t.cos[s * half + e]!;
    const sn = sign * t.sin[s * half + e]!;
    const [lo, hi] = [a[off + e]!, a[off + e + half]!];
    a[off + e] = lo * c - hi * sn;
    a[off + e + half] = hi * c + lo * sn;
  }
}

function forward(x: FloatArray, wqkv: FloatArray, bqkv: FloatArray | undefined, D: Dims): Forward {
  const { B, S, d, H, K, hd, W, C } = D;
  const qkv = new Float64Array(B * S * W);
  gemm(qkv, 0, x, 0, wqkv, 0, B * S, d, W, true);
  if (bqkv) for (let r = 0; r < B * S; r++) for (let c = 0; c < W; c++) qkv[r * W + c] += bqkv[c]!;
  const q = new Float64Array(B * H * S * hd);
  const k = new Float64Array(B * K * S * hd);
  const v = new Float64Array(B * K * S * hd);
  const tables = D.rope ? ropeTables(S, hd) : undefined;
  for (let b = 0; b < B; b++) {
    for (let s = 0; s < S; s++) {
      const row = (b * S + s) * W;
      for (let h = 0; h < H; h++) {
        const off = ((b * H + h) * S + s) * hd;
        for (let e = 0; e < hd; e++) q[off + e] = qkv[row + h * hd + e]!;
        if (tables) rotate(q, off, s, hd, tables, 1);
      }
      for (let g = 0; g < K; g++) {
        const off = ((b * K + g) * S + s) * hd;
        for (let e = 0; e < hd; e++) {
          k[off + e] = qkv[row + (H + g) * hd + e]!;
          v[off + e] = qkv[row + (H + K + g) * hd + e]!;
        }
        if (tables) rotate(k, off, s, hd, tables, 1);
      }
    }
  }
  const p = new Float64Array(B * H * S * S);
  const ctx = new Float64Array(B * S * C);
  const scale = 1 / Math.sqrt(hd);
  const rep = H / K;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      const g = Math.floor(h / rep);
      for (let i = 0; i < S; i++) {
        const prow = ((b * H + h) * S + i) * S;
        const last = D.causal ? i : S - 1;
        let max = -Infinity;
        for (let j = 0; j <= last; j++) {
          let s = 0;
          for (let e = 0; e < hd; e++) s += q[((b * H + h) * S + i) * hd + e]! * k[((b * K + g) * S + j) * hd + e]!;
          p[prow + j] = s * scale;
          max = Math.max(max, s * scale);
        }
        let sum = 0;
        for (let j = 0; j <= last; j++) sum += (p[prow + j] = Math.exp(p[prow + j]! - max));
        for (let j = 0; j <= last; j++) p[prow + j]! /= sum;
        for (let e = 0; e < hd; e++) {
          let c = 0;
          for (let j = 0; j <= last; j++) c += p[prow + j]! * v[((b * K + g) * S + j) * hd + e]!;
          ctx[(b * S + i) * C + h * hd + e] = c;
        }
      }
    }
  }
  return { q, k, v, p, ctx };
}

/** Splits the operands (x, W_qkv, [b_qkv], W_proj, [b_proj]) by the `bias` attribute (a tensor-parallel
 *  rank's op has no output bias: the pass adds it after the all-reduce). */
function params(ws: readonly Tensor[], attrs: Attrs): { wqkv: FloatArray; bqkv?: FloatArray; wproj: FloatArray; bproj?: FloatArray } {
  if (!attrBool(attrs, "bias")) return { wqkv: floats(ws[0]!), wproj: floats(ws[1]!) };
  return { wqkv: floats(ws[0]!), bqkv: floats(ws[1]!), wproj: floats(ws[2]!), ...(attentionWidths(attrs).projBias && { bproj: floats(ws[3]!) }) };
}

export const attentionKernels: Record<string, Kernel> = {
  attention: ([x, ...ws], attrs, ctx) => {
    const D = dimsOf(x!, attrs);
    const w = params(ws, attrs);
    const f = forward(floats(x!), w.wqkv, w.bqkv, D);
    const out = alloc(ctx, x!.shape);
    gemm(out.data, 0, f.ctx, 0, w.wproj, 0, D.B * D.S, D.C, D.d, true);
    if (w.bproj) for (let r = 0; r < D.B * D.S; r++) for (let c = 0; c < D.d; c++) out.data[r * D.d + c] += w.bproj[c]!;
    return [out];
  },

  // Operands: dy, x, W_qkv, [b_qkv], W_proj (the output bias does not affect any gradient here).
  attention_grad_input: ([dy, x, ...ws], attrs, ctx) => {
    const D = dimsOf(x!, attrs);
    const { B, S, d, H, K, hd, W, C } = D;
    const bias = attrBool(attrs, "bias");
    const [wqkv, bqkv, wproj] = bias ? [floats(ws[0]!), floats(ws[1]!), floats(ws[2]!)] : [floats(ws[0]!), undefined, floats(ws[1]!)];
    const f = forward(floats(x!), wqkv, bqkv, D);
    const dctx = new Float64Array(B * S * C);
    gemm(dctx, 0, floats(dy!), 0, wproj, 0, B * S, d, C);

    const dq = new Float64Array(f.q.length);
    const dk = new Float64Array(f.k.length);
    const dv = new Float64Array(f.v.length);
    const scale = 1 / Math.sqrt(hd);
    const rep = H / K;
    const dp = new Float64Array(S);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < H; h++) {
        const g = Math.floor(h / rep);
        for (let i = 0; i < S; i++) {
          const prow = ((b * H + h) * S + i) * S;
          const last = D.causal ? i : S - 1;
          const dc = (b * S + i) * C + h * hd;
          let dot = 0;
          for (let j = 0; j <= last; j++) {
            let s = 0;
            for (let e = 0; e < hd; e++) {
              s += dctx[dc + e]! * f.v[((b * K + g) * S + j) * hd + e]!;
              dv[((b * K + g) * S + j) * hd + e] += f.p[prow + j]! * dctx[dc + e]!;
            }
            dp[j] = s;
            dot += s * f.p[prow + j]!;
          }
          for (let j = 0; j <= last; j++) {
            const ds = f.p[prow + j]! * (dp[j]! - dot) * scale;
            for (let e = 0; e < hd; e++) {
              dq[((b * H + h) * S + i) * hd + e] += ds * f.k[((b * K + g) * S + j) * hd + e]!;
              dk[((b * K + g) * S + j) * hd + e] += ds * f.q[((b * H + h) * S + i) * hd + e]!;
            }
          }
        }
      }
    }

    // Un-rotate (the rotation is orthogonal: its gradient is the inverse rotation) and pack like qkv.
    const tables = D.rope ? ropeTables(S, hd) : undefined;
    const dqkv = alloc(ctx, [B, S, W]);
    for (let b = 0; b < B; b++) {
      for (let s = 0; s < S; s++) {
        const row = (b * S + s) * W;
        for (let h = 0; h < H; h++) {
          const off = ((b * H + h) * S + s) * hd;
          if (tables) rotate(dq, off, s, hd, tables, -1);
          for (let e = 0; e < hd; e++) dqkv.data[row + h * hd + e] = dq[off + e]!;
        }
        for (let g = 0; g < K; g++) {
          const off = ((b * K + g) * S + s) * hd;
          if (tables) rotate(dk, off, s, hd, tables, -1);
          for (let e = 0; e < hd; e++) {
            dqkv.data[row + (H + g) * hd + e] = dk[off + e]!;
            dqkv.data[row + (H + K + g) * hd + e] = dv[off + e]!;
          }
        }
      }
    }
    const dx = alloc(ctx, x!.shape);
    gemm(dx.data, 0, dqkv.data, 0, wqkv, 0, B * S, W, d);
    const context = alloc(ctx, [B, S, C]);
    context.data.set(f.ctx);
    return [dx, dqkv, context];
  },
};
