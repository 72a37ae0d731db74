// Tests that every sample parses cleanly and that the AST has the expected structure and spans.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { BlockDecl, FileAst, ForwardDecl, MemberDecl, ModelDecl, SettingsSection } from "../../src/parse/ast.js";
import { parseSource } from "../../src/parse/index.js";
import { allSpans, sexpr, spanIsValid } from "./helpers.js";

const samplesDir = join(import.meta.dirname, "../../samples");
const sampleFiles = [
  ...readdirSync(samplesDir).filter((f) => f.endsWith(".fsm")),
  ...readdirSync(join(samplesDir, "lib"))
    .filter((f) => f.endsWith(".fsm"))
    .map((f) => `lib/${f}`),
];

function parseSample(name: string): { ast: FileAst; text: string } {
  const text = readFileSync(join(samplesDir, name), "utf8");
  const { ast, diagnostics } = parseSource(name, text);
  expect(diagnostics).toEqual([]);
  return { ast, text };
}

function model(ast: FileAst): ModelDecl {
  const m = ast.items.find((i): i is ModelDecl => i.kind === "Model");
  if (!m) throw new Error("no model");
  return m;
}

function members(body: ModelDecl["body"]): MemberDecl[] {
  return body.filter((i): i is MemberDecl => i.kind === "Member");
}

describe("samples", () => {
  it("finds the samples", () => {
    expect(sampleFiles).toEqual(expect.arrayContaining(["gpt-tiny.fsm", "gpt2-124m.fsm", "mlp.fsm", "lib/transformer.fsm"]));
  });

  it.each(sampleFiles)("%s parses with no diagnostics and valid spans", (name) => {
    const { ast, text } = parseSample(name);
    expect(ast.kind).toBe("File");
    expect(ast.file).toBe(name);
    expect(ast.items.length).toBeGreaterThan(0);
    for (const span of allSpans(ast)) {
      expect(span.file).toBe(name);
      expect(spanIsValid(span, text)).toBe(true);
    }
  });

  it("gpt-tiny: import, model members, forward, train and parallel", () => {
    const { ast } = parseSample("gpt-tiny.fsm");
    expect(ast.items.map((i) => i.kind)).toEqual(["Import", "Model", "Train", "Parallel"]);
    const imp = ast.items[0]!;
    expect(imp.kind === "Import" && imp.path.value).toBe("lib/transformer.fsm");
    expect(imp.span).toMatchObject({ line: 2, column: 1, endLine: 2, endColumn: 29 });

    const m = model(ast);
    expect(m.name.name).toBe("gpt_tiny");
    expect(m.name.span).toMatchObject({ line: 4, column: 7, endColumn: 15 });
    // `const vocab = 64, ctx = 16, ...` yields one ConstDecl per binding.
    expect(m.body.filter((i) => i.kind === "Const").map((c) => c.kind === "Const" && c.name.name)).toEqual([
      "vocab", "ctx", "d", "heads", "n_layer",
    ]);
    expect(members(m.body).map((x) => x.name.name)).toEqual(["wte", "wpe", "layers", "ln_f", "lm_head"]);

    const layers = members(m.body).find((x) => x.name.name === "layers")!;
    expect(layers.repeat && sexpr(layers.repeat.count)).toBe("n_layer");
    expect(layers.repeat?.index).toBeUndefined();
    expect(sexpr(layers.init)).toBe("(call GPTBlock d heads:heads)");
    expect(layers.span).toMatchObject({ line: 8, column: 3 });

    const head = members(m.body).find((x) => x.name.name === "lm_head")!;
    expect(sexpr(head.init)).toBe("(call linear d vocab bias:false tie:(. wte weight))");

    const fwd = m.body.find((i): i is ForwardDecl => i.kind === "Forward")!;
    expect(fwd.inputs.map((i) => `${i.name.name}: ${i.type?.dtype.name}[${i.type?.dims.map(sexpr).join(", ")}]`)).toEqual([
      "tokens: i32[B, S]",
      "targets: i32[B, S]",
    ]);
    expect(fwd.body.map((s) => s.kind)).toEqual(["Assign", "For", "Return"]);
    const loop = fwd.body[1]!;
    expect(loop.kind === "For" && [loop.variable.name, sexpr(loop.iterable), loop.body.length]).toEqual(["layer", "layers", 1]);
    const ret = fwd.body[2]!;
    expect(ret.kind === "Return" && sexpr(ret.value)).toBe("(call cross_entropy (call lm_head (call ln_f h)) targets)");
    expect(ret.span).toMatchObject({ line: 17, column: 5, endLine: 17, endColumn: 52 });

    const train = ast.items[2] as SettingsSection;
    expect(train.keyword.name).toBe("train");
    expect(train.settings.map((s) => s.key.name)).toEqual(["batch", "seq", "optimizer", "clip_grad_norm", "precision", "seed", "steps", "data"]);
    expect(sexpr(train.settings[2]!.value)).toBe("(call adam lr:3e-3 betas:(tuple 0.9 0.99) eps:1e-8)");

    const par = ast.items[3] as SettingsSection;
    expect(par.kind).toBe("Parallel");
    expect(par.settings.map((s) => `${s.key.name}=${sexpr(s.value)}`)).toEqual([
      "devices=auto", "stages=auto", "chunks=auto", "schedule=1f1b", "checkpoint=auto", "shard=auto",
    ]);
  });

  it("gpt3-175b: annotations attach to the following member", () => {
    const { ast } = parseSample("gpt3-175b.fsm");
    const layers = members(model(ast).body).find((x) => x.name.name === "layers")!;
    expect(layers.annotations.map((a) => a.name.name)).toEqual(["checkpoint", "fsdp_unit"]);
    expect(layers.annotations[0]!.span).toMatchObject({ line: 8, column: 3, endColumn: 14 });
    // The member's own span starts at its name, on the line after the annotations.
    expect(layers.span.line).toBe(9);
    expect(members(model(ast).body).filter((x) => x.annotations.length > 0)).toHaveLength(1);
  });

  it("lib/transformer: blocks, params with defaults, body order", () => {
    const { ast } = parseSample("lib/transformer.fsm");
    const blocks = ast.items.filter((i): i is BlockDecl => i.kind === "Block");
    expect(blocks.map((b) => b.name.name)).toEqual(["MLP", "GPTBlock", "SwiGLU", "LlamaBlock"]);
    const mlp = blocks[0]!;
    expect(mlp.params.map((p) => `${p.name.name}:${p.type?.name}${p.default ? "=" + sexpr(p.default) : ""}`)).toEqual([
      "d:int",
      "hidden:int=(* 4 d)",
    ]);
    expect(mlp.span).toMatchObject({ line: 4, column: 1, endLine: 10, endColumn: 2 });
    const llama = blocks[3]!;
    expect(llama.params.map((p) => p.default && sexpr(p.default))).toEqual([undefined, undefined, "heads", undefined]);
    expect(llama.body.map((i) => i.kind)).toEqual(["Member", "Member", "Member", "Member", "Forward"]);
    const gpt = blocks[1]!;
    const fwd = gpt.body.find((i): i is ForwardDecl => i.kind === "Forward")!;
    expect(fwd.inputs).toHaveLength(1);
    expect(fwd.inputs[0]!.type).toBeUndefined();
    const first = fwd.body[0]!;
    expect(first.kind === "Assign" && sexpr(first.value)).toBe("(+ x (call attn (call ln_1 x)))");
  });

  it("mlp: repeat with a literal count and typed inputs using constants", () => {
    const { ast } = parseSample("mlp.fsm");
    const m = model(ast);
    const hidden = members(m.body).find((x) => x.name.name === "hidden_layers")!;
    expect(hidden.repeat?.count).toMatchObject({ kind: "Number", value: 4, isInt: true });
    expect(hidden.repeat?.span).toMatchObject({ line: 14, column: 19, endColumn: 28 });
    const fwd = m.body.find((i): i is ForwardDecl => i.kind === "Forward")!;
    expect(fwd.inputs[0]!.type?.dims.map(sexpr)).toEqual(["B", "d_in"]);
  });

  it("repeat ... as i binds an index name", () => {
    const { ast, diagnostics } = parseSource("t.fsm", "model m {\n  layers = repeat(2 * n) as i Block(d, idx: i)\n}");
    expect(diagnostics).toEqual([]);
    const layers = members(model(ast).body)[0]!;
    expect(layers.repeat?.index?.name).toBe("i");
    expect(layers.repeat?.index?.span).toMatchObject({ line: 2, column: 29 });
    expect(sexpr(layers.repeat!.count)).toBe("(* 2 n)");
    expect(sexpr(layers.init)).toBe("(call Block d idx:i)");
  });

  it("annotations on blocks and models, with and without arguments", () => {
    const src = "@checkpoint @fsdp_unit\nblock B(d: int) { }\n@stage(0)\nmodel m { @stage(1) a = B(1)\n @stage(k: 2) b = B(2) }";
    const { ast, diagnostics } = parseSource("t.fsm", src);
    expect(diagnostics).toEqual([]);
    const [b, m] = ast.items as [BlockDecl, ModelDecl];
    expect(b.annotations.map((a) => a.name.name)).toEqual(["checkpoint", "fsdp_unit"]);
    expect(b.annotations.every((a) => a.args.length === 0)).toBe(true);
    expect(b.span.line).toBe(2);
    expect(m.annotations.map((a) => `${a.name.name}(${a.args.map((x) => sexpr(x.value)).join()})`)).toEqual(["stage(0)"]);
    const ms = members(m.body);
    expect(ms.map((x) => x.annotations[0]!.args[0]!.value)).toMatchObject([{ value: 1 }, { value: 2 }]);
    expect(ms[1]!.annotations[0]!.args[0]!.name?.name).toBe("k");
  });

  it("commas between settings are optional", () => {
    const { ast, diagnostics } = parseSource("t.fsm", "parallel { devices = 8, stages = 2 chunks = 4,\n balance = [1, 2, 3, 2], }");
    expect(diagnostics).toEqual([]);
    const par = ast.items[0] as SettingsSection;
    expect(par.settings.map((s) => `${s.key.name}=${sexpr(s.value)}`)).toEqual(["devices=8", "stages=2", "chunks=4", "balance=[1 2 3 2]"]);
  });

  // Timing lives in bench/frontend (never in tests); this checks that a large file parses completely.
  it("parses a 2,000-layer generated model", () => {
    let src = 'import "lib/transformer.fsm"\nmodel big {\n  const d = 64, heads = 4\n';
    for (let i = 0; i < 2000; i++) src += `  @stage(${i % 8}) @checkpoint\n  layer_${i} = GPTBlock(d, heads: heads, hidden: 4 * d + ${i})\n`;
    src += "  forward(x: f32[B, S, d]) {\n    h = x\n";
    for (let i = 0; i < 2000; i++) src += `    h = layer_${i}(h) + 0.5 * h\n`;
    src += "    return mean(h)\n  }\n}\n";
    const { ast, diagnostics } = parseSource("big.fsm", src);
    expect(diagnostics).toEqual([]);
    expect(model(ast).body).toHaveLength(2 + 2000 + 1);
  });
});
