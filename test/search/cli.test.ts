// The search as a user sees it: `fsm compile` with settings left auto prints the choice, the runners-up and
// the rejected families; --json carries the search record; --explain and `fsm explain PLAN` say why.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli as run } from "../support/cli.js";
import { samplePath } from "../compile/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-search-cli-"));
const gpt2 = (...extra: string[]) => ["compile", samplePath("gpt2-124m"), "--cluster", "h100-sxm", "--devices", "64", ...extra];

describe("fsm compile with settings left auto", () => {
  it("prints the search's counts, the chosen plan, the runners-up and why families were rejected", async () => {
    const r = await run(...gpt2("-o", join(dir, "a.json")));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/search: \d+ candidates, \d+ evaluated \(optimal stage split each\), \d+ pruned by the step-time bound, \d+ did not fit, \d+ simulated, in [\d.]+ s/);
    const chosen = /chosen: (pp=(\d+) dp=(\d+) .*)/.exec(r.stdout)!;
    expect(r.stdout).toContain(`model gpt2 on h100-sxm: 64 devices (8 nodes) = ${chosen[2]} pipeline stage`);
    expect(r.stdout).toMatch(/<- chosen/);
    expect(r.stdout).toContain("rejected:\n");
    expect(r.stdout).toContain("pp=64 dp=1: 64 stages exceed the model's 16 layers");
  });

  it("--json includes the search record with candidates, pruned and seconds", async () => {
    const r = await run(...gpt2("-o", join(dir, "b.json"), "--json"));
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as { search: { chosen: string; stats: { candidates: number; pruned: number; evaluated: number; seconds: number } } };
    expect(j.search.stats.candidates).toBe(j.search.stats.evaluated + j.search.stats.pruned);
    expect(j.search.stats.pruned).toBeGreaterThan(0);
    expect(j.search.stats.seconds).toBeGreaterThan(0);
    expect(j.search.chosen).toMatch(/^pp=\d+ dp=\d+ shard=fsdp/);
  });

  it("--explain and fsm explain PLAN give the same account of each choice", async () => {
    const out = join(dir, "c.json");
    const compiled = await run(...gpt2("-o", out, "--explain"));
    expect(compiled.code).toBe(0);
    const explained = await run("explain", out);
    expect(explained.code).toBe(0);
    for (const text of ["pipeline depth × data parallel (best estimate per family", "checkpoint (the rest as chosen", "stage split (layers per stage): [", "the compiled plan's own simulation:"]) {
      expect(explained.stdout).toContain(text);
      expect(compiled.stdout).toContain(text);
    }
    // Every family of the cluster is accounted for, with an estimate or a reason.
    for (const family of ["pp=1 dp=64", "pp=2 dp=32", "pp=4 dp=16", "pp=8 dp=8", "pp=16 dp=4", "pp=32 dp=2", "pp=64 dp=1"]) {
      expect(explained.stdout).toMatch(new RegExp(`  ${family}: \\S`));
    }
    const json = await run("explain", out, "--json");
    expect((JSON.parse(json.stdout) as { chosen: string }).chosen).toBe(/chosen: (.*)/.exec(compiled.stdout)![1]);
  });

  it("a plan compiled with every setting given has no search to explain, only its split", async () => {
    const out = join(dir, "d.json");
    const all = ["--set", "parallel.stages=2", "--set", "parallel.chunks=2", "--set", "parallel.checkpoint=never", "--set", "parallel.shard=none"];
    expect((await run("compile", samplePath("gpt-tiny"), "--devices", "4", "-o", out, ...all)).code).toBe(0);
    const r = await run("explain", out);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("every parallel setting was given, so nothing was searched");
    expect(r.stdout).toContain("stage split (layers per stage): [");
  });

  it("a corrupt search record is refused with its JSON path; usage mistakes exit 2", async () => {
    const good = join(dir, "a.json");
    const plan = JSON.parse(readFileSync(good, "utf8")) as { search: { candidates: { status: string }[] } };
    plan.search.candidates[0]!.status = "maybe";
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify(plan));
    const r = await run("explain", bad);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("search.candidates[0].status");
    expect((await run("explain")).code).toBe(2);
  });
});
