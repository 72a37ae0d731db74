import { it } from "vitest";
import { trainSample } from "../passes/helpers.js";
import { TrainingSession } from "../../src/interp/session.js";
import { syntheticData } from "../../src/data/synthetic.js";
import { Rng } from "../../src/interp/random.js";
it("smoke", () => {
  for (const mode of ["normal", "fanin"]) {
    const { training, model } = trainSample("mlp");
    const s = new TrainingSession(training, { seed: 1 });
    if (mode === "fanin") {
      const r = new Rng(5);
      for (const [n, t] of s.params) if (n.endsWith("weight")) { const b = 1 / Math.sqrt(t.shape[1]!); for (let i = 0; i < t.data.length; i++) t.data[i] = (2 * r.uniform() - 1) * b; }
    }
    const data = syntheticData(training, { seed: 1, batch: model.train!.batch });
    const losses: number[] = [];
    for (let i = 0; i < 300; i++) losses.push(s.step(data.batch(i)).loss);
    console.log(mode, losses.filter((_, i) => i % 10 === 0).map((l) => l.toFixed(3)).join(" "));
  }
});
