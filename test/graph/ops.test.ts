// Shape rules of every op in the registry: the happy path and each error code it can report.
import { describe, expect, it } from "vitest";
import { dim, dimMul, numel } from "../../src/graph/dim.js";
import { isOpCheckError, type OpCheckError } from "../../src/graph/op-def.js";
import { allOps, getOp, opNames } from "../../src/graph/registry.js";
import type { Attrs, ParamRef, TensorType } from "../../src/graph/types.js";
import { typeToString } from "../../src/graph/types-format.js";
import { B, S, ty } from "./helpers.js";

/** validate, then infer; returns the output type text or the error. */
function run(op: string, inputs: TensorType[], attrs: Attrs = {}): string | OpCheckError {
  const def = getOp(op)!;
  const bad = def.validate?.(attrs);
  if (bad) return bad;
  const out = def.infer(inputs, attrs);
  return isOpCheckError(out) ? out : typeToString(out);
}

function code(r: string | OpCheckError): string {
  return typeof r === "string" ? `ok ${r}` : r.code;
}

function params(op: string, attrs: Attrs): string[] {
  return getOp(op)!.params!(attrs).map((p) => `${p.name} [${p.shape.map((d) => d.coef).join(", ")}] ${p.init}`);
}

const x768 = ty("f32", B, S, 768);

describe("registry", () => {
  it("lists every op once, sorted, each with a summary and documented attributes", () => {
    const names = opNames();
    expect(names).toEqual([...names].sort());
    expect(names).toEqual([
      "add", "attention", "cross_entropy", "div", "embedding", "gelu", "layer_norm", "linear", "matmul", "mse_loss",
      "mul", "positions", "relu", "reshape", "rms_norm", "scale", "silu", "softmax", "sub", "transpose",
    ]);
    for (const d of allOps()) {
      expect(getOp(d.name)).toBe(d);
      expect(d.summary.length).toBeGreaterThan(10);
      for (const a of d.attrs) expect(a.doc.length, `${d.name}.${a.name}`).toBeGreaterThan(5);
      expect(d.kind === "module").toBe(d.params !== undefined);
    }
    expect(getOp("conv2d")).toBeUndefined();
  });

  it("rejects the wrong number of tensor operands", () => {
    expect(code(run("gelu", [x768, x768]))).toBe("FSM401");
    expect(code(run("add", [x768]))).toBe("FSM401");
  });
});

describe("linear", () => {
  it("maps the last dimension and declares weight [out, in] and bias [out]", () => {
    expect(run("linear", [x768], { in: 768, out: 3072 })).toBe("f32[B, S, 3072]");
    expect(run("linear", [ty("bf16", 4, 768)], { in: 768, out: 10, bias: false })).toBe("bf16[4, 10]");
    expect(params("linear", { in: 768, out: 3072 })).toEqual(["weight [3072, 768] uniform_fan_in", "bias [3072] zeros"]);
    expect(params("linear", { in: 768, out: 3072, bias: false })).toEqual(["weight [3072, 768] uniform_fan_in"]);
    expect(getOp("linear")!.tieParam).toBe("weight");
  });
  it("reports a wrong last dimension with both shapes (FSM402)", () => {
    const r = run("linear", [ty("f32", B, S, 512)], { in: 768, out: 3072 });
    expect(r).toEqual({ code: "FSM402", message: "linear expects last dimension 768, got input f32[B, S, 512]" });
  });
  it("rejects integer inputs (FSM403), scalars (FSM404) and non-positive sizes (FSM409)", () => {
    expect(code(run("linear", [ty("i32", B, 768)], { in: 768, out: 2 }))).toBe("FSM403");
    expect(code(run("linear", [ty("f32")], { in: 768, out: 2 }))).toBe("FSM404");
    expect(code(run("linear", [x768], { in: 768, out: 0 }))).toBe("FSM409");
  });
  // The tied weight's shape is checked by the checker for any op with a tieParam
  // (test/fixtures/errors/tie-shape-mismatch.fsm); the op checks its input as usual.
  it("still checks x when the weight is tied", () => {
    const wte: ParamRef = { kind: "ParamRef", name: "wte.weight", type: ty("f32", 50257, 768) };
    expect(run("linear", [x768], { in: 768, out: 50257, bias: false, tie: wte })).toBe("f32[B, S, 50257]");
    expect(code(run("linear", [ty("f32", B, S, 512)], { in: 768, out: 50257, tie: wte }))).toBe("FSM402");
  });
});

describe("embedding", () => {
  it("looks up i32 ids into f32 rows", () => {
    expect(run("embedding", [ty("i32", B, S)], { num: 50257, dim: 768 })).toBe("f32[B, S, 768]");
    expect(run("embedding", [ty("i32", S)], { num: 1024, dim: 768 })).toBe("f32[S, 768]");
    expect(params("embedding", { num: 50257, dim: 768 })).toEqual(["weight [50257, 768] normal"]);
  });
  it("requires i32 ids (FSM403) and positive sizes (FSM409)", () => {
    expect(run("embedding", [ty("f32", B, S)], { num: 10, dim: 4 })).toEqual({
      code: "FSM403",
      message: "embedding expects indices of dtype i32, got f32[B, S]",
    });
    expect(code(run("embedding", [ty("i32", B)], { num: -1, dim: 4 }))).toBe("FSM409");
  });
});

describe("norms", () => {
  it("layer_norm keeps the type and owns weight (ones) and bias (zeros)", () => {
    expect(run("layer_norm", [x768], { d: 768 })).toBe("f32[B, S, 768]");
    expect(params("layer_norm", { d: 768 })).toEqual(["weight [768] ones", "bias [768] zeros"]);
    expect(params("layer_norm", { d: 768, bias: false })).toEqual(["weight [768] ones"]);
    expect(code(run("layer_norm", [ty("f32", B, 512)], { d: 768 }))).toBe("FSM402");
    expect(code(run("layer_norm", [ty("i32", B, 768)], { d: 768 }))).toBe("FSM403");
    expect(code(run("layer_norm", [x768], { d: 768, eps: 0 }))).toBe("FSM409");
  });
  it("rms_norm has only a scale", () => {
    expect(run("rms_norm", [ty("bf16", B, S, 4096)], { d: 4096, eps: 1e-5 })).toBe("bf16[B, S, 4096]");
    expect(params("rms_norm", { d: 4096 })).toEqual(["weight [4096] ones"]);
    expect(code(run("rms_norm", [x768], { d: 4096 }))).toBe("FSM402");
    expect(code(run("rms_norm", [ty("i32", 768)], { d: 768 }))).toBe("FSM403");
    expect(code(run("rms_norm", [x768], { d: 0 }))).toBe("FSM409");
  });
});

describe("attention", () => {
  it("maps [B, S, d] to itself", () => {
    expect(run("attention", [x768], { d: 768, heads: 12 })).toBe("f32[B, S, 768]");
  });
  it("packs Q, K and V into one projection (GPT-2: 2,362,368 parameters)", () => {
    const ps = getOp("attention")!.params!({ d: 768, heads: 12 });
    expect(params("attention", { d: 768, heads: 12 })).toEqual([
      "qkv.weight [2304, 768] normal", "qkv.bias [2304] zeros", "proj.weight [768, 768] normal", "proj.bias [768] zeros",
    ]);
    expect(ps.reduce((n, p) => n + numel(p.shape), 0)).toBe(2_362_368);
  });
  it("shrinks K and V for grouped-query attention", () => {
    // Llama-2 70B style: d 8192, 64 query heads, 8 KV heads, head_dim 128 → (64 + 16) · 128 = 10240 rows.
    expect(params("attention", { d: 8192, heads: 64, kv_heads: 8, bias: false })).toEqual([
      "qkv.weight [10240, 8192] normal", "proj.weight [8192, 8192] normal",
    ]);
    expect(params("attention", { d: 32, heads: 4, kv_heads: 1 })).toEqual([
      "qkv.weight [48, 32] normal", "qkv.bias [48] zeros", "proj.weight [32, 32] normal", "proj.bias [32] zeros",
    ]);
    // kv_heads absent = kv_heads equal to heads.
    expect(params("attention", { d: 32, heads: 4 })).toEqual(params("attention", { d: 32, heads: 4, kv_heads: 4 }));
  });
  it("validates head counts (FSM409) naming the problem", () => {
    expect(run("attention", [x768], { d: 768, heads: 10 })).toEqual({ code: "FSM409", message: "attention: heads (10) must divide d (768)" });
    expect(run("attention", [x768], { d: 768, heads: 12, kv_heads: 5 })).toEqual({
      code: "FSM409",
      message: "attention: kv_heads (5) must divide heads (12)",
    });
    expect(code(run("attention", [x768], { d: 768, heads: 0 }))).toBe("FSM409");
    expect(code(run("attention", [x768], { d: 768, heads: 12, kv_heads: 0 }))).toBe("FSM409");
    expect(code(run("attention", [ty("f32", B, S, 12)], { d: 12, heads: 4, rope: true }))).toBe("FSM409");
  });
  it("requires rank 3 (FSM404), the right width (FSM402) and a float input (FSM403)", () => {
    expect(code(run("attention", [ty("f32", dimMul(B, S), 768)], { d: 768, heads: 12 }))).toBe("FSM404");
    expect(code(run("attention", [ty("f32", B, S, 512)], { d: 768, heads: 12 }))).toBe("FSM402");
    expect(code(run("attention", [ty("i32", B, S, 768)], { d: 768, heads: 12 }))).toBe("FSM403");
  });
});

describe("elementwise", () => {
  it("activations keep the type and reject integers", () => {
    for (const op of ["gelu", "relu", "silu"]) {
      expect(run(op, [x768])).toBe("f32[B, S, 768]");
      expect(code(run(op, [ty("i32", B)]))).toBe("FSM403");
    }
  });
  it("binary ops broadcast and require the same dtype", () => {
    for (const op of ["add", "sub", "mul", "div"]) {
      expect(run(op, [x768, ty("f32", S, 768)])).toBe("f32[B, S, 768]");
      expect(run(op, [x768, ty("f32", S, 512)])).toEqual({ code: "FSM402", message: "cannot broadcast f32[B, S, 768] with f32[S, 512]" });
      expect(code(run(op, [x768, ty("bf16", B, S, 768)]))).toBe("FSM403");
    }
  });
  it("scale multiplies a float tensor by a finite number", () => {
    expect(run("scale", [x768], { factor: 0.5 })).toBe("f32[B, S, 768]");
    expect(code(run("scale", [ty("i32", B)], { factor: 2 }))).toBe("FSM403");
    expect(code(run("scale", [x768], { factor: Infinity }))).toBe("FSM409");
  });
  it("softmax checks its dim", () => {
    expect(run("softmax", [x768])).toBe("f32[B, S, 768]");
    expect(run("softmax", [x768], { dim: 1 })).toBe("f32[B, S, 768]");
    expect(run("softmax", [x768], { dim: -3 })).toBe("f32[B, S, 768]");
    expect(run("softmax", [x768], { dim: 3 })).toEqual({
      code: "FSM404",
      message: "softmax: dim 3 is out of range for f32[B, S, 768] (valid: [-3, 2])",
    });
    expect(code(run("softmax", [x768], { dim: -4 }))).toBe("FSM404");
    expect(code(run("softmax", [ty("f32")]))).toBe("FSM404");
    expect(code(run("softmax", [ty("i32", 3)]))).toBe("FSM403");
  });
});

describe("matmul", () => {
  it("multiplies over the last two dims with broadcast batch dims", () => {
    expect(run("matmul", [ty("f32", B, 12, S, 64), ty("f32", B, 12, 64, S)])).toBe("f32[B, 12, S, S]");
    expect(run("matmul", [ty("f32", B, S, 768), ty("f32", 768, 10)])).toBe("f32[B, S, 10]");
    expect(run("matmul", [ty("f32", 1, 4, 5), ty("f32", 7, 5, 2)])).toBe("f32[7, 4, 2]");
  });
  it("reports inner-dimension and batch mismatches (FSM402), rank (FSM404) and dtypes (FSM403)", () => {
    expect(run("matmul", [ty("f32", B, S, 768), ty("f32", 512, 10)])).toEqual({
      code: "FSM402",
      message: "matmul inner dimensions differ: f32[B, S, 768] × f32[512, 10]",
    });
    expect(code(run("matmul", [ty("f32", 3, 4, 5), ty("f32", 2, 5, 6)]))).toBe("FSM402");
    expect(code(run("matmul", [ty("f32", 5), ty("f32", 5, 6)]))).toBe("FSM404");
    expect(code(run("matmul", [ty("f32", 4, 5), ty("bf16", 5, 6)]))).toBe("FSM403");
    expect(code(run("matmul", [ty("i32", 4, 5), ty("i32", 5, 6)]))).toBe("FSM403");
  });
});

describe("reshape and transpose", () => {
  it("reshape compares symbolic element counts", () => {
    expect(run("reshape", [x768], { shape: [dimMul(B, S), dim(768)] })).toBe("f32[B*S, 768]");
    expect(run("reshape", [x768], { shape: [B, S, dim(12), dim(64)] })).toBe("f32[B, S, 12, 64]");
    expect(run("reshape", [x768], { shape: [B, S, dim(512)] })).toEqual({
      code: "FSM402",
      message: "reshape cannot turn f32[B, S, 768] (768*B*S elements) into [B, S, 512] (512*B*S elements)",
    });
    expect(code(run("reshape", [x768], { shape: [B, dim(0)] }))).toBe("FSM409");
  });
  it("transpose swaps two dims, negative from the end", () => {
    expect(run("transpose", [ty("f32", B, 12, S, 64)], { dim0: -2, dim1: -1 })).toBe("f32[B, 12, 64, S]");
    expect(run("transpose", [x768], { dim0: 0, dim1: 2 })).toBe("f32[768, S, B]");
    expect(code(run("transpose", [x768], { dim0: 0, dim1: 3 }))).toBe("FSM404");
    expect(code(run("transpose", [x768], { dim0: -4, dim1: 0 }))).toBe("FSM404");
  });
});

describe("positions", () => {
  it("makes an i32 index vector of a symbolic or concrete length", () => {
    expect(run("positions", [], { n: S })).toBe("i32[S]");
    expect(run("positions", [], { n: 16 })).toBe("i32[16]");
    expect(code(run("positions", [], { n: 0 }))).toBe("FSM409");
  });
});

describe("losses", () => {
  it("cross_entropy: logits [..., V] and i32 targets [...] give an f32 scalar", () => {
    expect(run("cross_entropy", [ty("f32", B, S, 50257), ty("i32", B, S)])).toBe("f32[]");
    expect(run("cross_entropy", [ty("bf16", B, 10), ty("i32", B)])).toBe("f32[]");
    expect(run("cross_entropy", [ty("f32", B, S, 10), ty("i32", B)])).toEqual({
      code: "FSM402",
      message: "cross_entropy expects targets of shape [B, S] for logits f32[B, S, 10], got i32[B]",
    });
    expect(code(run("cross_entropy", [ty("f32", B, S, 10), ty("f32", B, S)]))).toBe("FSM403");
    expect(code(run("cross_entropy", [ty("i32", B, S, 10), ty("i32", B, S)]))).toBe("FSM403");
    expect(code(run("cross_entropy", [ty("f32"), ty("i32")]))).toBe("FSM404");
  });
  it("mse_loss: same shapes, float", () => {
    expect(run("mse_loss", [ty("f32", B, 8), ty("f32", B, 8)])).toBe("f32[]");
    expect(code(run("mse_loss", [ty("f32", B, 8), ty("f32", B, 4)]))).toBe("FSM402");
    expect(code(run("mse_loss", [ty("i32", B, 8), ty("i32", B, 8)]))).toBe("FSM403");
    expect(code(run("mse_loss", [ty("f32", B, 8), ty("bf16", B, 8)]))).toBe("FSM403");
  });
});
