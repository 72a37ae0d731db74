// The graph check: the training graph rebuilt from JSON keeps the compiler's invariants, shapes first.
import { describe, expect, it } from "vitest";
import { checkGraphShapes, graphPath } from "../../src/verify/check-graph-shapes.js";
import { edited, fsdpPlan, refusal } from "../plan/plan-edits.js";

describe("checkGraphShapes", () => {
  it("accepts a compiled plan", () => expect(() => checkGraphShapes(fsdpPlan)).not.toThrow());

  it("refuses an activation's edited shape at the op that produces it", () => {
    const e = refusal(() => checkGraphShapes(edited(fsdpPlan, (p) => (p.graph.tensors[3].shape = ["B", "S", "33"]))));
    expect(e.path).toBe("graph.ops[0]");
    expect(e.reason).toMatch(/^op 0 \(embedding in wte\): output recorded as f32\[B, S, 33\] but infers f32\[B, S, 32\]/);
  });

  it("refuses a parameter's edited shape at the op that reads it", () => {
    const e = refusal(() => checkGraphShapes(edited(fsdpPlan, (p) => (p.graph.tensors[2].shape = ["65", "32"]))));
    expect(e.path).toMatch(/^graph\.(ops\[\d+\]|paramGrads)$/);
  });

  it("refuses an edited dtype", () => {
    const e = refusal(() => checkGraphShapes(edited(fsdpPlan, (p) => (p.graph.tensors[3].dtype = "f16"))));
    expect(e.path).toMatch(/^graph\.ops\[\d+\]$/);
  });

  it("names the section a message is about", () => {
    expect(graphPath("op 12 (matmul): output recorded as f32[B] but infers f32[S]")).toBe("graph.ops[12]");
    expect(graphPath("gradient of w is f32[2], the parameter f32[3]")).toBe("graph.paramGrads");
    expect(graphPath("state m belongs to unknown parameter w")).toBe("graph.states");
    expect(graphPath("the loss %4 must be an f32 scalar, got f32[B]")).toBe("graph.loss");
    expect(graphPath("graph has a cycle through ops 1, 2")).toBe("graph.ops");
  });
});
