// Golden training graph: mlp.fsm's training graph as text (forward, phases, gradients, updates). Regenerate
// deliberately with FSM_UPDATE_GOLDEN=1 npx vitest run test/passes/golden.test.ts, then review the diff.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { printGraph } from "../../src/graph/print.js";
import { buildTrainingGraph } from "../../src/passes/autodiff.js";

const root = resolve(import.meta.dirname, "../..");

it("mlp.fsm → training graph text", () => {
  const m = checkFile(join("samples", "mlp.fsm")).model!;
  const actual = printGraph(buildTrainingGraph(m.graph, m.train!));
  const path = join(root, "test/golden/mlp.training.txt");
  if (process.env["FSM_UPDATE_GOLDEN"] === "1") writeFileSync(path, actual);
  expect(existsSync(path), "missing golden mlp.training.txt: run with FSM_UPDATE_GOLDEN=1 and review it").toBe(true);
  expect(actual).toBe(readFileSync(path, "utf8"));
});
