// Golden tests: sample files → expected graph text (and DOT for the MLP). Regenerate deliberately with
// FSM_UPDATE_GOLDEN=1 npx vitest run test/check/golden.test.ts, then review the diff.
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { golden } from "../support/golden.js";
import { checkFile } from "../../src/check/check.js";
import { graphToDot } from "../../src/graph/dot.js";
import { printGraph } from "../../src/graph/print.js";

const root = resolve(import.meta.dirname, "../..");

describe("golden graphs", () => {
  for (const sample of ["mlp", "gpt-tiny", "gpt2-124m"]) {
    it(`${sample}.fsm → graph text`, () => {
      // Relative path so the header and names do not depend on where the repository lives.
      const r = checkFile(join("samples", `${sample}.fsm`), {});
      expect(r.diagnostics).toEqual([]);
      golden(`${sample}.graph.txt`, printGraph(r.model!.graph));
    });
  }

  it("mlp.fsm → DOT", () => {
    const r = checkFile(join(root, "samples/mlp.fsm"));
    golden("mlp.dot", graphToDot(r.model!.graph));
  });

  it("printing is deterministic", () => {
    const a = printGraph(checkFile(join(root, "samples/gpt-tiny.fsm")).model!.graph);
    const b = printGraph(checkFile(join(root, "samples/gpt-tiny.fsm")).model!.graph);
    expect(a).toBe(b);
  });
});
