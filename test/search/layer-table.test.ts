// The search's stash bytes of a layer interval (LayerTable's profile) against summing the kept tensors
// directly, for every interval: the O(L) prefix-sum form must equal the definition.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { clusterFor } from "../../src/cost/cluster.js";
import { bytesOf } from "../../src/graph/ops/cost-rules.js";
import { onDevice } from "../../src/cost/precision.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";
import { LayerTable } from "../../src/search/layer-table.js";
import { samplePath } from "../compile/helpers.js";

const SKIP = `
block Dense(d: int) {
  fc = linear(d, d)
  forward(x) {
    return relu(fc(x))
  }
}
block Res(d: int) {
  fc = linear(d, d)
  forward(x) {
    return fc(x) + x
  }
}
model skip {
  a = Res(16)
  b = Dense(16)
  c = Dense(16)
  head = linear(16, 4)
  forward(x: f32[B, 16], y: f32[B, 4]) {
    h0 = a(x)
    h2 = c(b(x))
    return mse_loss(head(h2 * h0), y)
  }
}
train {
  batch = 8
  optimizer = sgd(lr: 0.1)
}
`;

function skipFile(): string {
  const f = join(mkdtempSync(join(tmpdir(), "fsm-lt-")), "skip.fsm");
  writeFileSync(f, SKIP);
  return f;
}

describe("LayerTable.keptIn", () => {
  for (const name of ["mlp", "gpt-tiny", "gpt2-124m", "skip"] as const) {
    it(`${name}: every interval's stash equals the sum over its kept tensors`, () => {
      const model = checkFile(name === "skip" ? skipFile() : samplePath(name)).model;
      expect(model, name).toBeDefined();
      if (!model) return;
      const training = buildTrainingGraph(model.graph, model.train!);
      const table = new LayerTable(training, clusterFor("cpu", 1), model.train!.precision, model.train!.seq);
      const b = 2;
      const profile = table.at(b);
      const bindings = model.train!.seq === undefined ? { B: b } : { B: b, S: model.train!.seq };
      const kept = (table as unknown as { kept: { tensor: number; q: number; s: number }[] }).kept;
      const annotated = table.annotated;
      const L = table.count;
      let spans = 0;
      for (const k of kept) if (k.s - k.q >= 2) spans++;
      for (let i = 0; i < L; i++) {
        for (let j = i + 1; j <= L; j++) {
          let want = 0;
          for (const k of kept) {
            if (annotated[k.q] && k.s === k.q) continue;
            if (k.q >= i && k.s < j) want += bytesOf(onDevice(training.tensor(k.tensor).type, model.train!.precision), bindings);
          }
          expect(profile.keptIn(i, j), `[${i}, ${j})`).toBe(want);
        }
      }
      // a's output (an add's, which saves nothing) is first saved by the product after c: a span.
      if (name === "skip") expect(spans).toBeGreaterThan(0);
    });
  }
});
