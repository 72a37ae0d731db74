import { it } from "vitest";
import { trainSample } from "./helpers.js";
import { verifyGraph } from "../../src/graph/verify.js";
import { printGraph } from "../../src/graph/print.js";
it("smoke", () => {
  for (const s of ["mlp", "gpt-tiny", "gpt2-124m", "llama-7b", "gpt3-175b"]) {
    const t0 = performance.now();
    const { training } = trainSample(s);
    const t1 = performance.now();
    const p = verifyGraph(training);
    console.log(s, training.ops().length, (t1 - t0).toFixed(0), "ms", p.slice(0, 10));
    if (s === "gpt-tiny") console.log(printGraph(training));
  }
});
