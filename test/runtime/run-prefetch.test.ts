// The run loop makes step i + 1's batch while the devices run step i (a data loader's prefetch). What a step
// trains on is still its own batch (the losses equal a run whose batches are all made up front, elsewhere:
// run.test.ts, the resume tests), and a batch that cannot be made is still its own step's error, even when it
// was made ahead: here the token file is emptied after step 1, so step 2 (made during step 1) trains and step 3
// (made during step 2) fails, named as step 3.
import { mkdtempSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { runPlan, RunError } from "../../src/runtime/run-loop.js";
import { writeTokenModel } from "../support/token-model.js";

function tokenPlan(dir: string) {
  const source = writeTokenModel(dir, Uint16Array.from({ length: 1000 }, (_, i) => (i * 7) % 64), 4);
  return compileModel(checkFile(source).model!, { cluster: "cpu", devices: 1, source, fsmVersion: "test" }).plan;
}

describe("the run loop's prefetch", () => {
  it("a batch made ahead that cannot be made fails its own step, after the step before it trained", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-prefetch-"));
    const plan = tokenPlan(dir);
    const trained: number[] = [];
    const run = runPlan(plan, {
      onStep: (r) => {
        trained.push(r.step);
        if (r.step === 1) truncateSync(join(dir, "train.bin"), 0);
      },
    });
    await expect(run).rejects.toThrow(RunError);
    await expect(run).rejects.toThrow(/^step 3: token file .*train\.bin: short read at byte \d+/);
    expect(trained).toEqual([1, 2]);
  });

  it("a batch whose input is named like the loop's own bookkeeping still trains", async () => {
    // The made-ahead batch travels wrapped: a model input named `thrown` (or anything) is data, not an error.
    const dir = mkdtempSync(join(tmpdir(), "fsm-prefetch-"));
    const source = join(dir, "named.fsm");
    writeFileSync(
      source,
      `model named {
  fc = linear(4, 2)
  forward(thrown: f32[B, 4], batch: f32[B, 2]) {
    return mse_loss(fc(thrown), batch)
  }
}
train {
  batch = 8
  optimizer = sgd(lr: 0.1)
  steps = 3
}
parallel { devices = 1 }
`,
    );
    const plan = compileModel(checkFile(source).model!, { cluster: "cpu", devices: 1, source, fsmVersion: "test" }).plan;
    const losses: number[] = [];
    const summary = await runPlan(plan, { onStep: (r) => losses.push(r.loss) });
    expect(summary.steps).toBe(3);
    expect(losses).toHaveLength(3);
    expect(losses.every(Number.isFinite)).toBe(true);
  });
});
