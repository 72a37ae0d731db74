// The registry's per-op cost rules by hand: matmul conventions, attention's Megatron count, lookups, views,
// elementwise constants; and every forward op has a rule.
import { describe, expect, it } from "vitest";
import { dim, symDim } from "../../src/graph/dim.js";
import type { DimBindings } from "../../src/graph/op-cost.js";
import { ELEMENTWISE_FLOPS } from "../../src/graph/ops/cost-rules.js";
import { allOps, getOp, withDefaults } from "../../src/graph/registry.js";
import type { Attrs, DType, TensorType } from "../../src/graph/types.js";

const B = symDim("B");
const S = symDim("S");
const ty = (dtype: DType, ...dims: (number | typeof B)[]): TensorType => ({
  dtype,
  shape: dims.map((d) => (typeof d === "number" ? dim(d) : d)),
});

function cost(op: string, inputs: TensorType[], attrs: Attrs, b: DimBindings) {
  const def = getOp(op)!;
  return def.cost!(inputs, withDefaults(def.attrs, attrs), b);
}

describe("cost rules", () => {
  it("every forward op has one", () => {
    for (const def of allOps()) if (def.kind !== "internal") expect(def.cost, def.name).toBeDefined();
  });

  it("linear: 2·m·n·k forward; backward 1× for the input and 1× (+ bias) for the weight", () => {
    const c = cost("linear", [ty("bf16", B, S, 768), ty("bf16", 3072, 768), ty("bf16", 3072)], { in: 768, out: 3072 }, { B: 4, S: 128 });
    const m = 4 * 128;
    const mm = 2 * m * 768 * 3072;
    expect(c.forwardFlops).toBe(mm + m * 3072);
    expect(c.backwardFlops).toEqual({ input: mm, weight: mm + m * 3072 });
    expect(c.bytesRead).toBe((m * 768 + 3072 * 768 + 3072) * 2);
    expect(c.bytesWritten).toBe(m * 3072 * 2);
    expect(c.unit).toBe("matrix");
  });

  it("matmul: both operands are activations, so all 2× of the backward is input gradient", () => {
    const c = cost("matmul", [ty("f32", B, 8, 16), ty("f32", 16, 32)], {}, { B: 3 });
    const f = 3 * 2 * 8 * 16 * 32;
    expect(c.forwardFlops).toBe(f);
    expect(c.backwardFlops).toEqual({ input: 2 * f, weight: 0 });
    expect(c.bytesWritten).toBe(3 * 8 * 32 * 4);
  });

  it("attention: projections + 2·B·S²·d (QKᵀ) + 2·B·S²·d (AV), full S², plus scaling and softmax", () => {
    const [b, s, d, h] = [2, 64, 128, 4];
    const x = ty("f32", B, S, d);
    const params = [ty("f32", 3 * d, d), ty("f32", 3 * d), ty("f32", d, d), ty("f32", d)];
    const c = cost("attention", [x, ...params], { d, heads: h, causal: true }, { B: b, S: s });
    const t = b * s;
    const proj = 2 * t * d * 3 * d + 2 * t * d * d;
    const bias = t * (3 * d + d);
    const core = 4 * b * s * s * d;
    const scores = b * h * s * s;
    expect(c.forwardFlops).toBe(proj + bias + core + scores * (1 + ELEMENTWISE_FLOPS.softmax.forward));
    expect(c.backwardFlops.weight).toBe(proj + bias);
    expect(c.backwardFlops.input).toBe(proj + 2 * core + scores * (1 + ELEMENTWISE_FLOPS.softmax.backward));
  });

  it("grouped-query attention narrows the QKV projection only", () => {
    const [b, s, d, h, kv] = [1, 16, 64, 8, 2];
    const hd = d / h;
    const x = ty("bf16", B, S, d);
    const c = cost("attention", [x, ty("bf16", (h + 2 * kv) * hd, d), ty("bf16", d, d)], { d, heads: h, kv_heads: kv, bias: false, rope: true }, { B: b, S: s });
    const t = b * s;
    const proj = 2 * t * d * (h + 2 * kv) * hd + 2 * t * d * d;
    const rope = t * (h + kv) * hd * ELEMENTWISE_FLOPS.rope.forward;
    expect(c.forwardFlops).toBe(proj + 4 * b * s * s * d + b * h * s * s * (1 + ELEMENTWISE_FLOPS.softmax.forward) + rope);
  });

  it("embedding: a lookup has no matmul FLOPs; its backward scatter-adds into the table", () => {
    const c = cost("embedding", [ty("i32", B, S), ty("f32", 1000, 64)], { num: 1000, dim: 64 }, { B: 2, S: 10 });
    expect(c.forwardFlops).toBe(0);
    expect(c.backwardFlops).toEqual({ input: 0, weight: 2 * 10 * 64 });
    expect(c.bytesRead).toBe(2 * 10 * 4 + 2 * 10 * 64 * 4);
  });

  it("reshape is a free view; transpose is one copy", () => {
    const x = ty("f32", B, S, 64);
    expect(cost("reshape", [x], { shape: [dim(8 * 16), dim(64)] }, { B: 8, S: 16 })).toMatchObject({ forwardFlops: 0, bytesRead: 0, bytesWritten: 0 });
    expect(cost("transpose", [x], { dim0: 0, dim1: 1 }, { B: 8, S: 16 })).toMatchObject({ forwardFlops: 0, bytesRead: 8 * 16 * 64 * 4, bytesWritten: 8 * 16 * 64 * 4 });
  });

  it("elementwise ops count their documented FLOPs per (broadcast) output element", () => {
    const a = ty("f32", B, 32);
    const bias = ty("f32", 32);
    expect(cost("add", [a, bias], {}, { B: 4 }).forwardFlops).toBe(4 * 32);
    expect(cost("gelu", [a], {}, { B: 4 })).toMatchObject({ forwardFlops: 4 * 32 * 8, backwardFlops: { input: 4 * 32 * 16, weight: 0 } });
    expect(cost("div", [a, a], {}, { B: 4 }).backwardFlops.input).toBe(4 * 32 * 4);
    expect(cost("layer_norm", [a, bias, bias], { d: 32 }, { B: 4 }).backwardFlops.weight).toBe(4 * 32 * 3);
    expect(cost("layer_norm", [a, bias], { d: 32, bias: false }, { B: 4 }).backwardFlops.weight).toBe(4 * 32 * 2);
  });
});
