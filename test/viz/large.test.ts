// A plan far larger than this machine runs stays drawable: gpt3-175b on 1024 H100s renders to one HTML file of
// reasonable size quickly, with replicas aggregated into one row per program and repeated blocks collapsed.
// The time is printed, and asserted only against a generous bound (never a tight timed assertion).
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { samplePath } from "../compile/helpers.js";
import { runCli as run } from "../support/cli.js";
import { svgsOf, xmlProblems } from "./helpers.js";

describe("viz of a large plan", () => {
  it("gpt3-175b on h100-sxm × 1024: HTML under 5 MB, one row per program, collapsed blocks", async () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-viz-large-"));
    const plan = join(dir, "gpt3.json");
    const c = await run("compile", samplePath("gpt3-175b"), "--cluster", "h100-sxm", "--devices", "1024", "-o", plan);
    expect(c.code, c.stderr).toBe(0);
    const out = join(dir, "gpt3.html");
    const t0 = performance.now();
    const r = await run("viz", plan, "-o", out);
    const seconds = (performance.now() - t0) / 1e3;
    expect(r.code, r.stderr).toBe(0);
    const bytes = statSync(out).size;
    console.log(`viz gpt3-175b × 1024: ${seconds.toFixed(2)} s, ${(bytes / 2 ** 20).toFixed(2)} MiB`);
    expect(seconds).toBeLessThan(30);
    expect(bytes).toBeLessThan(5 * 2 ** 20);
    const html = readFileSync(out, "utf8");
    const planJson = JSON.parse(readFileSync(plan, "utf8")) as { programs: unknown[]; stages: unknown[]; graph: { layers: unknown[] } };
    expect(html.match(/<g class="row predicted" data-program="\d+">/g)).toHaveLength(planJson.programs.length);
    expect(html.match(/<tr data-stage="\d+">/g)).toHaveLength(planJson.stages.length);
    expect(html).toMatch(/layers\.\d+ \.\. layers\.\d+ \(\d+ blocks\)/);
    expect(html.match(/<g class="layer-group"/g)!.length).toBeLessThan(planJson.graph.layers.length);
    expect(svgsOf(html)).toHaveLength(3); // graph, timeline, memory
    for (const svg of svgsOf(html)) expect(xmlProblems(svg)).toEqual([]);
    const text = await run("viz", plan, "--format", "text");
    expect(text.stdout.split("\n").length).toBeLessThan(400);
  });
});
