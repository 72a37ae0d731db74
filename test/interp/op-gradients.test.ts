// Every op's backward rule (input and weight gradients) against central finite differences in float64, on
// small random inputs: broadcasting, grouped-query and rotary attention, tied weights, a tensor used twice.
import { describe, expect, it } from "vitest";
import { getOp, languageOps } from "../../src/graph/registry.js";
import { CaseBuilder, checkGradients } from "./helpers.js";

const B = 2;
const S = 3;

/** Builds a case, checks all its gradients, and asserts something was compared. */
function check(build: (c: CaseBuilder) => number, options: Parameters<typeof checkGradients>[3] = {}): void {
  const c = new CaseBuilder();
  const g = c.finish(build(c));
  expect(checkGradients(g, c.batch, c.params(), options)).toBeGreaterThan(0);
}

const positive = (r: { uniform(): number }) => 0.5 + 1.5 * r.uniform();

describe("elementwise ops with broadcasting", () => {
  it("add: same shape, a trailing vector, and both sides broadcast", () => {
    check((c) => c.fn("add", [c.param([B, S, 4]), c.param([S, 4])]));
    check((c) => c.fn("add", [c.param([4]), c.param([B, S, 4])]));
    check((c) => c.fn("add", [c.param([B, 1, 4]), c.param([S, 1])]));
  });
  it("sub", () => {
    check((c) => c.fn("sub", [c.param([B, S, 4]), c.param([1, 4])]));
    check((c) => c.fn("sub", [c.param([S, 1]), c.param([B, S, 4])]));
  });
  it("mul", () => {
    check((c) => c.fn("mul", [c.param([B, S, 4]), c.param([S, 1])]));
    check((c) => c.fn("mul", [c.param([B, S, 4]), c.param([B, S, 4])]));
  });
  it("div (divisor kept away from zero)", () => {
    check((c) => c.fn("div", [c.param([B, S, 4]), c.param([4], positive)]));
    check((c) => c.fn("div", [c.param([S, 1]), c.param([B, S, 4], positive)]));
  });
  it("scale", () => {
    check((c) => c.fn("scale", [c.param([B, S, 4])], { factor: -0.7 }));
  });
  for (const op of ["gelu", "relu", "silu"]) {
    it(op, () => check((c) => c.fn(op, [c.param([B, S, 5])])));
  }
});

describe("layout and matrix ops", () => {
  it("matmul, plain and with broadcast batch dims", () => {
    check((c) => c.fn("matmul", [c.param([B, S, 4]), c.param([4, 5])]));
    check((c) => c.fn("matmul", [c.param([B, 1, S, 4]), c.param([5, 4, 2])]));
    check((c) => c.fn("matmul", [c.param([S, 4]), c.param([B, 4, 2])]));
  });
  it("reshape and transpose", () => {
    check((c) => c.fn("reshape", [c.param([B, S, 4])], { shape: [6, 4].map((n) => ({ coef: n, syms: {} })) }));
    check((c) => c.fn("transpose", [c.param([B, S, 4])], { dim0: 0, dim1: -1 }));
  });
  it("softmax along the last and the first dimension", () => {
    check((c) => c.fn("softmax", [c.param([B, S, 5])], { dim: -1 }));
    check((c) => c.fn("softmax", [c.param([B, S, 5])], { dim: 0 }));
  });
});

describe("module ops: input and weight gradients", () => {
  it("linear with and without bias", () => {
    check((c) => c.module("linear", [c.param([B, S, 4])], { in: 4, out: 5 }, "fc"));
    check((c) => c.module("linear", [c.param([B, 4])], { in: 4, out: 3, bias: false }, "fc"));
  });
  it("layer_norm with and without bias, rms_norm", () => {
    check((c) => c.module("layer_norm", [c.param([B, S, 6])], { d: 6, eps: 1e-5, bias: true }, "ln"));
    check((c) => c.module("layer_norm", [c.param([B, S, 6])], { d: 6, eps: 1e-5, bias: false }, "ln"));
    check((c) => c.module("rms_norm", [c.param([B, S, 6])], { d: 6, eps: 1e-6 }, "norm"));
  });
  it("embedding (ids repeat, so rows accumulate) with positions", () => {
    check((c) => c.module("embedding", [c.ints("ids", [B, S], [1, 4, 1, 0, 4, 4])], { num: 5, dim: 3 }, "emb"));
    check((c) => c.fn("add", [c.param([B, S, 3]), c.module("embedding", [c.fn("positions", [], { n: { coef: S, syms: {} } })], { num: 4, dim: 3 }, "wpe")]));
  });
  it("attention: causal multi-head with biases", () => {
    check((c) => c.module("attention", [c.param([B, S, 8])], { d: 8, heads: 2, causal: true, bias: true, rope: false }, "attn"));
  });
  it("attention: not causal", () => {
    check((c) => c.module("attention", [c.param([B, S, 8])], { d: 8, heads: 2, causal: false, bias: true, rope: false }, "attn"));
  });
  it("attention: grouped-query (kv_heads < heads) with rotary embeddings, no biases", () => {
    check((c) => c.module("attention", [c.param([B, 4, 16])], { d: 16, heads: 4, kv_heads: 2, causal: true, bias: false, rope: true }, "attn"));
    check((c) => c.module("attention", [c.param([B, S, 12])], { d: 12, heads: 3, kv_heads: 1, causal: true, bias: true, rope: true }, "attn"));
  });
});

describe("losses", () => {
  it("cross_entropy (mean over positions)", () => {
    check((c) => c.fn("cross_entropy", [c.param([B, S, 5]), c.ints("targets", [B, S], [0, 4, 2, 2, 1, 3])]));
  });
  it("mse_loss, both operands", () => {
    check((c) => c.fn("mse_loss", [c.param([B, 4]), c.param([B, 4])]));
  });
});

describe("gradient accumulation", () => {
  it("a weight tied between an embedding and an output projection gets both gradients", () => {
    check((c) => {
      const h = c.module("embedding", [c.ints("tokens", [B, S], [0, 3, 5, 5, 1, 2])], { num: 6, dim: 4 }, "wte");
      const w = c.g.param("wte.weight")!;
      const logits = c.module("linear", [c.fn("gelu", [h])], { in: 4, out: 6, bias: false, tie: { kind: "ParamRef", name: w.name, type: w.type } }, "lm_head");
      return c.fn("cross_entropy", [logits, c.ints("targets", [B, S], [1, 2, 3, 4, 5, 0])]);
    });
  });
  it("a residual used twice (h feeds a branch and the sum), and x·x", () => {
    check((c) => {
      const h = c.fn("gelu", [c.param([B, S, 4])]);
      return c.fn("add", [h, c.module("linear", [h], { in: 4, out: 4 }, "fc")]);
    });
    check((c) => {
      const x = c.param([B, 4]);
      return c.fn("mul", [x, x]);
    });
  });
});

it("covers every language op with a float gradient", () => {
  // positions has an i32 output, so nothing to differentiate.
  const without = languageOps().filter((d) => !d.backward).map((d) => d.name);
  expect(without).toEqual(["positions"]);
  expect(getOp("fill")!.backward).toBeUndefined();
});
