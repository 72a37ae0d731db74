// graphToJson shares what it can (shape lists, attributes that are already JSON) and writes exactly what a
// plain field-by-field conversion writes.
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { dimToString } from "../../src/graph/dim.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { graphToJson } from "../../src/plan/graph-json.js";
import { samplePath } from "../compile/helpers.js";

describe("graphToJson", () => {
  const model = checkFile(samplePath("gpt-tiny"), {}).model!;
  const training = buildTrainingGraph(model.graph, model.train!);
  const json = graphToJson(training);

  it("writes every tensor's shape and every op's attributes as a plain conversion does", () => {
    const plainAttr = (v: unknown): unknown =>
      typeof v === "number" ? (Number.isFinite(v) ? v : { number: String(v) }) : Array.isArray(v) ? { shape: v.map(dimToString) } : typeof v === "object" && v !== null ? ("coef" in v ? { dim: dimToString(v as never) } : { param: (v as { name: string }).name }) : v;
    expect(JSON.stringify(json.tensors)).toBe(JSON.stringify(training.tensors().map((t) => ({ name: t.name, dtype: t.type.dtype, shape: t.type.shape.map(dimToString), kind: t.kind }))));
    expect(JSON.stringify(json.ops.map((o) => o.attrs))).toBe(JSON.stringify(training.ops().map((o) => Object.fromEntries(Object.entries(o.attrs).map(([k, v]) => [k, plainAttr(v)])))));
  });

  it("gives tensors of one shape one list, and reuses attributes that need no conversion", () => {
    const byText = new Map<string, unknown>();
    for (const t of json.tensors) {
      const text = t.shape.join(",");
      if (!byText.has(text)) byText.set(text, t.shape);
      expect(t.shape).toBe(byText.get(text));
    }
    expect(byText.size).toBeLessThan(json.tensors.length / 5);
    const adam = training.ops().filter((o) => o.op === "adam_update");
    expect(adam.length).toBeGreaterThan(1);
    for (const o of adam) expect(json.ops[o.id]!.attrs).toBe(o.attrs);
    // An attribute holding a dimension is written out, in a copy.
    const withDim = training.ops().find((o) => Object.values(o.attrs).some((v) => typeof v === "object"))!;
    expect(json.ops[withDim.id]!.attrs).not.toBe(withDim.attrs);
  });
});
