// Language semantics beyond the samples: names, repeat indices, defaults, stacks, imports, annotations,
// symbolic dims, settings and overrides.
import { describe, expect, it } from "vitest";
import { dimToString } from "../../src/graph/dim.js";
import { checkSources, codes, model } from "./helpers.js";

const SCALED = `block Scaled(d: int, k: float = 1.0) {
  fc = linear(d, d)
  forward(x) { return fc(x) * k }
}
`;

describe("elaboration", () => {
  it("gives repeat elements hierarchical names and the index inside", () => {
    const r = checkSources({
      "m.fsm": SCALED + model("  layers = repeat(3) as i Scaled(4, k: i + 1)", "    return mse_loss(layers(x), y)"),
    });
    expect(codes(r)).toEqual([]);
    const g = r.model!.graph;
    expect(g.params().map((p) => p.name)).toEqual(["layers.0.fc.weight", "layers.0.fc.bias", "layers.1.fc.weight", "layers.1.fc.bias", "layers.2.fc.weight", "layers.2.fc.bias"]);
    expect(g.ops().filter((o) => o.op === "scale").map((o) => o.attrs["factor"])).toEqual([1, 2, 3]);
    expect(g.layers().map((l) => l.name)).toEqual(["layers.0", "layers.1", "layers.2"]);
  });

  it("for-loops, direct stack calls and indexing build the same graph", () => {
    const members = "  layers = repeat(2) Scaled(4)";
    const viaFor = checkSources({ "m.fsm": SCALED + model(members, "    h = x\n    for l in layers { h = l(h) }\n    return mse_loss(h, y)") });
    const viaCall = checkSources({ "m.fsm": SCALED + model(members, "    return mse_loss(layers(x), y)") });
    const viaIndex = checkSources({ "m.fsm": SCALED + model(members, "    return mse_loss(layers[1](layers[0](x)), y)") });
    const shape = (r: typeof viaFor) => r.model!.graph.ops().map((o) => `${o.op}@${o.layer}:${o.scope}`);
    expect(shape(viaFor)).toEqual(shape(viaCall));
    expect(shape(viaIndex)).toEqual(shape(viaCall));
  });

  it("defaults may use earlier parameters and file constants from imports", () => {
    const r = checkSources({
      "lib.fsm": "const WIDTH = 4\nblock Wide(d: int, hidden: int = 2 * d) {\n  a = linear(d, hidden)\n  b = linear(hidden, d)\n  forward(x) { return b(a(x)) }\n}\n",
      "m.fsm": 'import "lib.fsm"\n' + model("  w = Wide(WIDTH)", "    return mse_loss(w(x), y)"),
    }, "m.fsm");
    expect(codes(r)).toEqual([]);
    expect(r.model!.graph.param("w.a.weight")!.type.shape.map(dimToString)).toEqual(["8", "4"]);
  });

  it("file constants may refer to later ones; diamond imports load once", () => {
    const r = checkSources({
      "m.fsm": 'import "b.fsm"\nimport "c.fsm"\nconst D = HALF * 2\nconst HALF = 2\n' + model("  fc = Lin(D)", "    return mse_loss(fc(x), y)"),
      "b.fsm": 'import "d.fsm"\n',
      "c.fsm": 'import "d.fsm"\n',
      "d.fsm": "block Lin(d: int) {\n  fc = linear(d, d)\n  forward(x) { return fc(x) }\n}\n",
    }, "m.fsm");
    expect(codes(r)).toEqual([]);
    expect(r.files.filter((f) => f.endsWith("d.fsm")).length).toBe(1);
  });

  it("symbolic dims flow through reshape and transpose", () => {
    const r = checkSources({
      "m.fsm": model("  fc = linear(4, 4)", "    h = reshape(fc(x), [B * S, 4])\n    return mse_loss(transpose(h, 0, 1), transpose(reshape(y, [B * S, 4]), 0, 1))", "x: f32[B, S, 4], y: f32[B, S, 4]"),
    });
    expect(codes(r)).toEqual([]);
    const t = r.model!.graph.ops().find((o) => o.op === "transpose")!;
    expect(r.model!.graph.tensor(t.outputs[0]!).type.shape.map(dimToString)).toEqual(["4", "B*S"]);
  });

  it("annotations on a block apply to every instance; member annotations add to them", () => {
    const r = checkSources({
      "m.fsm": "@checkpoint\n" + SCALED + model("  a = Scaled(4)\n  @fsdp_unit @stage(1)\n  b = Scaled(4)", "    return mse_loss(b(a(x)), y)"),
    });
    expect(codes(r)).toEqual([]);
    expect(r.model!.graph.layers().map((l) => l.annotations)).toEqual([{ checkpoint: true }, { checkpoint: true, fsdpUnit: true, stage: 1 }]);
  });

  it("warns about members forward never calls, and still succeeds", () => {
    const r = checkSources({ "m.fsm": model("  fc = linear(4, 4)\n  spare = linear(4, 4)", "    return mse_loss(fc(x), y)") });
    expect(codes(r)).toEqual(["FSM390 3:11"]);
    expect(r.model!.graph.parameterCount()).toBe(20);
  });

  it("a library file without a model checks cleanly", () => {
    const r = checkSources({ "lib.fsm": SCALED });
    expect(r.diagnostics).toEqual([]);
    expect(r.model).toBeUndefined();
  });

  it("reports several independent semantic errors in one run", () => {
    const r = checkSources({
      "m.fsm": model("  fc = linaer(4, 4)\n  g = linear(4, 4, bais: true)", "    return mse_loss(fc(x), y)"),
    });
    expect(codes(r)).toEqual(expect.arrayContaining(["FSM302 2:8", "FSM303 3:20"]));
  });

  it("a tied weight used before its owner is created once, in the first layer that needs it", () => {
    const r = checkSources({
      "m.fsm": model("  emb = embedding(10, 4)\n  head = linear(4, 10, bias: false, tie: emb.weight)", "    return cross_entropy(head(x), t)", "x: f32[B, 4], t: i32[B]"),
    });
    expect(r.diagnostics.map((d) => d.code)).toEqual(["FSM390"]);
    const g = r.model!.graph;
    expect(g.params().map((p) => p.name)).toEqual(["emb.weight"]);
    expect(g.param("head.weight")!.name).toBe("emb.weight");
    expect(g.parameterCount()).toBe(40);
  });
});

describe("settings", () => {
  const TRAIN = "train {\n  batch = 32, seq = 8\n  optimizer = adamw(lr: 3e-4, betas: (0.9, 0.95))\n  precision = fp16, loss_scale = 1024\n  data = tokens(\"t.bin\", dtype: u32)\n}\n";
  const body = model("  fc = linear(4, 4)", "    return mse_loss(fc(x), y)", "x: f32[B, S, 4], y: f32[B, S, 4]");

  it("reads train settings with defaults", () => {
    const r = checkSources({ "m.fsm": body + TRAIN });
    expect(codes(r)).toEqual([]);
    expect(r.model!.train).toEqual({
      batch: 32,
      seq: 8,
      steps: 10,
      seed: 0,
      optimizer: { kind: "adamw", lr: 3e-4, betas: [0.9, 0.95], eps: 1e-8, weightDecay: 0.01 },
      precision: "fp16",
      reduceDtype: "fp32",
      lossScale: 1024,
      data: { kind: "tokens", path: "t.bin", dtype: "u32" },
    });
  });

  it("requires seq when the model uses S", () => {
    const r = checkSources({ "m.fsm": body + "train {\n  batch = 8\n  optimizer = sgd(lr: 0.1)\n}\n" });
    expect(r.diagnostics.map((d) => d.message)).toContain("train needs 'seq' (the model's inputs use the sequence dimension S)");
  });

  it("reads parallel settings, auto by default, and applies --set overrides", () => {
    const r = checkSources({ "m.fsm": body + TRAIN + "parallel {\n  stages = 1, chunks = 4, schedule = 1f1b, shard = fsdp\n}\n" }, "m.fsm", {
      overrides: ["parallel.shard=oss", "parallel.bucket_mb=50", "train.batch=64"],
    });
    expect(codes(r)).toEqual([]);
    expect(r.model!.parallel).toMatchObject({ stages: 1, chunks: 4, schedule: "1f1b", shard: "oss", bucketMB: 50, devices: "auto", dataParallel: "auto", checkpoint: "auto" });
    expect(r.model!.train!.batch).toBe(64);
  });

  it("rejects stage pins that go backwards", () => {
    const r = checkSources({ "m.fsm": SCALED + model("  @stage(1)\n  a = Scaled(4)\n  @stage(0)\n  b = Scaled(4)", "    return mse_loss(b(a(x)), y)") });
    expect(r.diagnostics.map((d) => `${d.code} ${d.span.line}:${d.span.column}`)).toEqual(["FSM505 8:3"]);
  });

  it("reads reduce_dtype: fp32 or the compute precision, anything else an error at the setting", () => {
    const train = (p: string, r: string) => `train {\n  batch = 8, seq = 4, optimizer = sgd(lr: 0.1)\n  precision = ${p}, reduce_dtype = ${r}\n}\n`;
    expect(checkSources({ "m.fsm": body + train("bf16", "bf16") }).model!.train!.reduceDtype).toBe("bf16");
    expect(checkSources({ "m.fsm": body + train("bf16", "fp32") }).model!.train!.reduceDtype).toBe("fp32");
    const bad = checkSources({ "m.fsm": body + train("fp32", "bf16") });
    expect(bad.diagnostics.map((d) => `${d.severity} ${d.code} ${d.span.line}:${d.span.column}`)).toEqual([`error FSM503 ${body.split("\n").length + 2}:21`]);
    expect(bad.diagnostics[0]!.message).toBe("reduce_dtype = bf16 needs precision = bf16 (precision is fp32): gradients are reduced in fp32 or in the compute precision");
    expect(codes(checkSources({ "m.fsm": body + train("bf16", "fp8") }))[0]).toMatch(/^FSM/);
  });

  it("rejects loss_scale without fp16; warns that reshard_after_forward is ignored without fsdp", () => {
    const r = checkSources({
      "m.fsm": body + "train {\n  batch = 8, seq = 4, optimizer = sgd(lr: 0.1), loss_scale = dynamic\n}\nparallel {\n  shard = oss, reshard_after_forward = false\n}\n",
    });
    expect(r.diagnostics.map((d) => `${d.severity} ${d.code}`).sort()).toEqual(["error FSM503", "warning FSM503"]);
  });

  it("warns that shard_group and no_sync are ignored without fsdp; refuses a shard group of one", () => {
    const ignored = checkSources({ "m.fsm": body + "train {\n  batch = 8, seq = 4, optimizer = sgd(lr: 0.1)\n}\nparallel {\n  shard = sddp, shard_group = 2, no_sync = true\n}\n" });
    expect(ignored.diagnostics.map((d) => `${d.severity} ${d.code} ${d.message}`).sort()).toEqual([
      "warning FSM503 no_sync only applies to shard = fsdp (shard is sddp); it is ignored",
      "warning FSM503 shard_group only applies to shard = fsdp (shard is sddp); it is ignored",
    ]);
    const one = checkSources({ "m.fsm": body + "train {\n  batch = 8, seq = 4, optimizer = sgd(lr: 0.1)\n}\nparallel {\n  data_parallel = 2, shard = fsdp, shard_group = 1\n}\n" });
    expect(one.diagnostics.map((d) => `${d.severity} ${d.code}`)).toEqual(["error FSM503"]);
    expect(one.diagnostics[0]!.message).toMatch(/shard_group = 1 shards nothing/);
  });
});

describe("annotations inside layers", () => {
  it("are rejected with a clear message rather than ignored", () => {
    const r = checkSources({
      "m.fsm": `block Outer(d: int) {\n  @checkpoint\n  inner = linear(d, d)\n  forward(x) { return inner(x) }\n}\n` + model("  o = Outer(4)", "    return mse_loss(o(x), y)"),
    });
    expect(codes(r)).toEqual(["FSM313 3:11"]);
    expect(r.diagnostics[0]!.message).toContain("'o.inner' is inside a layer");
  });
});

describe("internal ops", () => {
  it("gradient and optimizer ops cannot be named from .fsm source", () => {
    const inline = checkSources({ "m.fsm": model("  fc = linear(4, 4)", "    return mse_loss(relu_grad(fc(x), x), y)") });
    expect(inline.diagnostics.map((d) => `${d.code} ${d.message}`)).toEqual(["FSM300 unknown name 'relu_grad'"]);
    const member = checkSources({ "m.fsm": model("  g = sum_to(4)\n  fc = linear(4, 4)", "    return mse_loss(fc(x), y)") });
    expect(member.diagnostics.map((d) => d.code)).toEqual(["FSM302"]);
  });
});
