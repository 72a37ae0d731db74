import { it } from "vitest";
import { Graph } from "../../src/graph/graph.js";
import { B, S, ty, emit, gptBlock } from "./helpers.js";
it("perf", () => {
  for (let rep = 0; rep < 3; rep++) {
  const T = ty("f32", B, S, 16);
  let t0 = performance.now();
  const g = new Graph("raw");
  let h = g.addInput("x", T);
  for (let i = 0; i < 2000; i++) {
    const l = g.addLayer(`layers.${i}`);
    const w = g.addParam({ name: `p${i}`, type: ty("f32", 16), init: "ones", layer: l, scope: "" });
    for (let j = 0; j < 20; j++) h = g.addOp({ op: "add", attrs: {}, inputs: [h, w], outputTypes: [T], scope: `layers.${i}`, layer: l })[0]!;
  }
  const t1 = performance.now();
  const g2 = new Graph("deep");
  const x = g2.addInput("x", T);
  h = x;
  for (let i = 0; i < 2000; i++) {
    const l = g2.addLayer(`layers.${i}`);
    h = gptBlock(g2, h, 16, 2, `layers.${i}`, l);
    for (let j = 0; j < 6; j++) h = emit(g2, "add", [h, emit(g2, "gelu", [h], {}, { scope: `layers.${i}`, layer: l })], {}, { scope: `layers.${i}`, layer: l });
  }
  const t2 = performance.now();
  console.log(`raw ${(t1 - t0).toFixed(0)} ms, emit ${(t2 - t1).toFixed(0)} ms`);
  }
});
