// `fsm viz` as a user runs it: every format to stdout or a file (the format following -o's extension), and
// bad input — a missing or corrupt plan, a bad option — as a clear message with exit 1 (2 for usage).
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { loadPlan } from "../../src/verify/load.js";
import { renderText } from "../../src/viz/text.js";
import { buildViewModel } from "../../src/viz/view-model.js";
import { samplePath } from "../compile/helpers.js";
import { runCli as run } from "../support/cli.js";
import { xmlProblems } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-viz-"));
const plan = join(dir, "mlp.json");

beforeAll(async () => {
  const r = await run("compile", samplePath("mlp"), "--devices", "4", "--set", "parallel.stages=2", "--set", "parallel.chunks=2", "-o", plan);
  expect(r.code, r.stderr).toBe(0);
});

describe("fsm viz", () => {
  it("prints text, DOT and SVG to stdout", async () => {
    const text = await run("viz", plan, "--format", "text");
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toBe(renderText(buildViewModel(loadPlan(plan))));
    const dot = await run("viz", plan, "--format", "dot");
    expect(dot.stdout).toMatch(/^digraph "mlp" \{\n/);
    expect(dot.stdout).toContain("subgraph cluster_stage1 {");
    const svg = await run("viz", plan, "--format", "svg");
    expect(xmlProblems(svg.stdout)).toEqual([]);
    const html = await run("viz", plan);
    expect(html.stdout.startsWith("<!DOCTYPE html>")).toBe(true);
  });

  it("writes -o FILE, in the format its extension names unless --format says otherwise", async () => {
    for (const [name, start] of [["p.html", "<!DOCTYPE html>"], ["p.svg", "<?xml"], ["p.dot", "digraph"], ["p.txt", "mlp on cpu"], ["p.out", "<!DOCTYPE html>"]] as const) {
      const out = join(dir, name);
      const r = await run("viz", plan, "-o", out);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^wrote ${out.replace(/[.]/g, "\\.")} \\((html|svg|dot|text), `));
      expect(readFileSync(out, "utf8").startsWith(start), name).toBe(true);
    }
    const forced = join(dir, "forced.html");
    expect((await run("viz", plan, "-o", forced, "--format", "text")).code).toBe(0);
    expect(readFileSync(forced, "utf8").startsWith("mlp on cpu")).toBe(true);
  });

  it("refuses to write the HTML page to a terminal, and says what to do instead", async () => {
    let stderr = "";
    const code = await main(["viz", plan], { stdout: () => undefined, stderr: (s) => (stderr += s), isTTY: true });
    expect(code).toBe(2);
    expect(stderr).toContain("the HTML page is not written to a terminal: give -o FILE.html, redirect stdout, or use --format text");
  });

  it("a missing or corrupt plan is an error with exit 1", async () => {
    const missing = await run("viz", join(dir, "nope.json"), "--format", "text");
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nope\.json: error: invalid plan: cannot read .*nope\.json: ENOENT/);
    const corrupt = join(dir, "corrupt.json");
    writeFileSync(corrupt, '{"format": "fsm-plan", "version": 1, ');
    const c = await run("viz", corrupt);
    expect(c.code).toBe(1);
    expect(c.stderr).toMatch(/corrupt\.json: error: invalid plan: not valid JSON/);
    const wrong = join(dir, "wrong.json");
    writeFileSync(wrong, JSON.stringify({ ...JSON.parse(readFileSync(plan, "utf8")), stages: "two" }));
    const w = await run("viz", wrong, "--format", "text");
    expect(w.code).toBe(1);
    expect(w.stderr).toMatch(/wrong\.json: error: invalid plan: .*stages/);
    expect(w.stdout).toBe("");
  });

  it("option mistakes are usage errors (exit 2)", async () => {
    const cases: [string[], RegExp][] = [
      [["--format", "png"], /--format must be one of html, svg, dot, text, got 'png'/],
      [["--step", "2"], /--step picks a step of a trace: give --trace TRACE too/],
      [["--trace", "t.json", "--format", "dot"], /--trace draws a measured timeline/],
      [["--trace", "t.json", "--step", "x"], /--step must be a step number, got 'x'/],
      [["--bogus"], /unknown option '--bogus'/],
    ];
    for (const [extra, message] of cases) {
      const r = await run("viz", plan, ...extra);
      expect(r.code, extra.join(" ")).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    expect((await run("viz")).code).toBe(2);
    const help = await run("viz", "--help");
    expect(help.stdout).toMatch(/^fsm viz PLAN \[-o FILE\]/);
  });

  it("a file that cannot be written is an error with exit 1", async () => {
    const r = await run("viz", plan, "-o", join(dir, "no-such-dir", "p.html"));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/p\.html: its directory \S+no-such-dir does not exist/);
    expect(existsSync(join(dir, "no-such-dir"))).toBe(false);
  });
});
