// Calibration files: the format is validated on load, shape keys are stable text, and a measured op replaces
// the roofline estimate (and only that op).
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { CalibrationError, checkCalibrationProfile, loadCalibration, parseCalibration, shapeKey } from "../../src/cost/calibration.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { estimateOp } from "../../src/cost/graph-cost.js";
import { dim, symDim } from "../../src/graph/dim.js";

const root = resolve(import.meta.dirname, "../..");
const header = { format: "fsm-calibration", version: 1, profile: "cpu", machine: "test machine", date: "2025-01-31" };

describe("calibration", () => {
  it("shape keys evaluate symbols, sort attributes and leave out parameter references", () => {
    const x = { dtype: "bf16" as const, shape: [symDim("B"), symDim("S"), dim(768)] };
    const w = { dtype: "bf16" as const, shape: [dim(3072), dim(768)] };
    const tie = { kind: "ParamRef" as const, name: "wte.weight", type: w };
    expect(shapeKey([x, w], { out: 3072, in: 768, bias: false, tie }, { B: 8, S: 1024 })).toBe("bf16[8,1024,768],bf16[3072,768]|bias=false,in=768,out=3072");
    expect(shapeKey([x], { shape: [dim(8), symDim("S")] }, { B: 8, S: 4 })).toBe("bf16[8,4,768]|shape=[8,4]");
  });

  it("a measured op replaces its roofline estimate; other ops keep theirs", () => {
    const model = checkFile(join(root, "samples/gpt-tiny.fsm")).model!;
    const g = model.graph;
    const options = (cal?: ReturnType<typeof parseCalibration>) => ({
      cluster: clusterFor("cpu", 1, cal),
      precision: "fp32" as const,
      bindings: { B: 8, S: 16 },
    });
    const fc = g.ops().find((o) => o.scope === "layers.0.mlp.fc")!;
    const other = g.ops().find((o) => o.scope === "layers.0.mlp.proj")!;
    const key = shapeKey(fc.inputs.map((t) => g.tensor(t).type), fc.attrs, { B: 8, S: 16 });
    expect(key).toBe("f32[8,16,32],f32[128,32],f32[128]|bias=true,in=32,out=128");
    const cal = parseCalibration({ ...header, ops: [{ op: "linear", shape: key, forwardSeconds: 0.5, backwardSeconds: 1.25 }] }, "test.json");

    const estimated = estimateOp(g, fc.id, options());
    expect(estimated.calibrated).toBe(false);
    expect(estimated.forwardSeconds).toBeLessThan(0.01);
    const measured = estimateOp(g, fc.id, options(cal));
    expect(measured).toMatchObject({ calibrated: true, forwardSeconds: 0.5, backwardSeconds: 1.25 });
    expect(measured.cost).toEqual(estimated.cost);
    expect(estimateOp(g, other.id, options(cal))).toEqual(estimateOp(g, other.id, options()));
  });

  it("loads from a file and names the file in its errors", () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-cal-"));
    const good = join(dir, "good.json");
    writeFileSync(good, JSON.stringify({ ...header, ops: [] }));
    expect(loadCalibration(good)).toMatchObject({ profile: "cpu", machine: "test machine", date: "2025-01-31", entries: [] });
    const bad = join(dir, "bad.json");
    writeFileSync(bad, "{ not json");
    expect(() => loadCalibration(bad)).toThrow(CalibrationError);
    expect(() => loadCalibration(bad)).toThrow(/bad\.json is not valid JSON/);
    expect(() => loadCalibration(join(dir, "missing.json"))).toThrow(/cannot read calibration file/);
  });

  it("rejects malformed contents with the offending field", () => {
    const parse = (json: unknown) => () => parseCalibration(json, "c.json");
    expect(parse({ ...header, format: "other", ops: [] })).toThrow("calibration c.json: 'format' must be \"fsm-calibration\"");
    expect(parse({ ...header, version: 4, ops: [] })).toThrow(/'version' must be 1, 2 or 3, got 4/);
    expect(parse({ ...header, date: "yesterday", ops: [] })).toThrow(/ISO 8601/);
    expect(parse({ ...header, ops: [{ op: "linear", shape: "", forwardSeconds: -1, backwardSeconds: 0 }] })).toThrow("ops[0].forwardSeconds must be a non-negative number");
    // No measurement takes no time: a zero forward (an all-zero file priced every op free: MFU 219%).
    expect(parse({ ...header, ops: [{ op: "linear", shape: "", forwardSeconds: 0, backwardSeconds: 0 }] })).toThrow("calibration c.json: ops[0].forwardSeconds is 0");
    expect(parse({ ...header, ops: [{ op: "linear", shape: "", forwardSeconds: 1e-6, backwardSeconds: Infinity }] })).toThrow("ops[0].backwardSeconds must be a non-negative number");
    // An op with no gradient has no backward to time: zero there is a measurement.
    expect(parse({ ...header, ops: [{ op: "positions", shape: "", forwardSeconds: 1e-6, backwardSeconds: 0 }] })().entries).toHaveLength(1);
    const e = { op: "relu", shape: "f32[4]|", forwardSeconds: 1, backwardSeconds: 1 };
    expect(parse({ ...header, ops: [e, e] })).toThrow(/ops\[1\] repeats op 'relu'/);
  });

  it("a calibration belongs to one profile", () => {
    const cal = parseCalibration({ ...header, ops: [] }, "c.json");
    expect(() => clusterFor("h100-sxm", 8, cal)).toThrow("calibration c.json was measured on 'cpu', not 'h100-sxm'");
    expect(() => checkCalibrationProfile(cal, "h100-sxm")).toThrow(CalibrationError);
    expect(() => checkCalibrationProfile(cal, "cpu")).not.toThrow();
  });
});
