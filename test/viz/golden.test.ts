// Golden text and DOT renderings of a few plans (test/golden/viz/): mlp and gpt-tiny on 4 CPU devices (2
// stages × 2 replicas; gpt-tiny with FSDP) and gpt2-124m on 16 H100s (OSS, 8 micro-batches). Regenerate
// deliberately with FSM_UPDATE_GOLDEN=1 npx vitest run test/viz/golden.test.ts, then review the diff.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { renderDot } from "../../src/viz/dot.js";
import { renderText } from "../../src/viz/text.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import { golden } from "../support/golden.js";
import { CASES, planFor } from "./helpers.js";

describe("viz goldens", () => {
  for (const c of CASES) {
    it(`${c.id} on ${c.cluster} × ${c.devices}: text and DOT`, () => {
      const vm = buildViewModel(planFor(c));
      golden(`viz/${c.id}.txt`, renderText(vm));
      golden(`viz/${c.id}.dot`, renderDot(vm));
    });
  }
});

// Graphviz itself accepts the DOT (installed by .ci/run; skipped, saying why, where `dot` is missing), and
// draws one cluster per stage.
const DOT = "/usr/bin/dot";
describe.skipIf(!existsSync(DOT))("viz DOT through Graphviz", () => {
  for (const c of CASES) {
    it(`${c.id}: dot -Tsvg renders it, a cluster per stage`, () => {
      const plan = planFor(c);
      const r = spawnSync(DOT, ["-Tsvg"], { input: renderDot(buildViewModel(plan)), encoding: "utf8", timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toBe("");
      for (let k = 0; k < plan.stages.length; k++) expect(r.stdout).toContain(`cluster_stage${k}`);
    });
  }
});
