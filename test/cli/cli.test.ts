// The fsm CLI as a user runs it: exit codes, diagnostics on stderr, outputs on stdout, --help/--version,
// --set overrides; in-process through main() plus one real process through bin/fsm.js.
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli as run } from "../support/cli.js";

const root = resolve(import.meta.dirname, "../..");
const sample = (f: string) => join(root, "samples", f);
const fixture = (f: string) => join(root, "test/fixtures/errors", f);


describe("fsm check", () => {
  it("accepts every sample with exit code 0", async () => {
    const r = await run("check", sample("mlp.fsm"), sample("gpt-tiny.fsm"), sample("gpt2-124m.fsm"));
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain("model gpt2: 124,439,808 parameters");
  });

  it("reports errors with file:line:col, a caret and exit code 1", async () => {
    const r = await run("check", fixture("shape-linear-mismatch.fsm"));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("shape-linear-mismatch.fsm:5:21: error[FSM402]: linear expects last dimension 8, got input f32[B, 4]");
    expect(r.stderr).toMatch(/5 \|     return mse_loss\(fc\(x\), y\)\n {2}\| {21}\^{5}/);
    expect(r.stderr).toContain("1 error");
    expect(r.stderr).not.toMatch(/at .*\.ts:\d+/); // no stack trace for bad input
  });

  it("checks several files and fails if any fails", async () => {
    const r = await run("check", sample("mlp.fsm"), fixture("name-unknown-op.fsm"));
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("mlp.fsm: ok");
    expect(r.stderr).toContain("did you mean 'linear'?");
  });

  it("a missing file is a diagnostic, not a crash", async () => {
    const r = await run("check", join(root, "no-such-file.fsm"));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error[FSM200]: cannot read");
  });

  it("--set overrides settings and its mistakes point into the override", async () => {
    expect((await run("check", sample("mlp.fsm"), "--set", "parallel.shard=fsdp", "--set", "train.batch=64")).code).toBe(0);
    const bad = await run("check", sample("mlp.fsm"), "--set", "parallel.shard=fsdpp");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("--set #1:1:20: error[FSM500]: parallel.shard must be one of none, oss, sddp, fsdp");
    expect(bad.stderr).toContain("did you mean 'fsdp'?");
    const malformed = await run("check", sample("mlp.fsm"), "--set", "shard=fsdp");
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toContain("error[FSM510]");
    const unknown = await run("check", sample("mlp.fsm"), "--set", "parallel.stagse=2");
    expect(unknown.stderr).toContain("error[FSM310]: unknown parallel setting 'stagse'");
    const infeasible = await run("check", sample("mlp.fsm"), "--set", "parallel.balance=[1, 2]");
    expect(infeasible.stderr).toContain("error[FSM501]: balance [1, 2] covers 3 layers but the model has 6");
  });
});

describe("fsm run FILE.fsm: --devices' default", () => {
  // The default of 1 device yields to the file and to --set: only an explicit --devices can contradict them.
  it("yields to --set parallel.devices and to stages given in the file", async () => {
    const set = await run("run", sample("mlp.fsm"), "--set", "parallel.devices=2", "--steps", "1");
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/^run mlp: 2 cpu virtual devices/);
    const stages = await run("run", sample("mlp.fsm"), "--set", "parallel.stages=2", "--set", "parallel.data_parallel=1", "--steps", "1");
    expect(stages.code, stages.stderr).toBe(0);
    expect(stages.stdout).toMatch(/^run mlp: 2 cpu virtual devices = 2 stages/);
    const explicit = await run("run", sample("mlp.fsm"), "--devices", "1", "--set", "parallel.devices=2", "--steps", "1");
    expect(explicit.code).toBe(1);
    expect(explicit.stderr).toContain("--devices 1 contradicts parallel.devices = 2");
  }, 60_000);
});

describe("fsm graph", () => {
  it("prints JSON with model, exact parameter count, ops and layers", async () => {
    const r = await run("graph", sample("llama-7b.fsm"), "--json");
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as { model: string; parameters: number; ops: number; layers: unknown[] };
    expect(j.model).toBe("llama_7b");
    expect(j.parameters).toBe(6_738_415_616);
    expect(j.ops).toBeGreaterThan(32 * 10);
    expect(j.layers.length).toBe(35);
    const same = await run("graph", sample("llama-7b.fsm"), "--format", "json");
    expect(same.stdout).toBe(r.stdout);
  });

  it("prints DOT and text", async () => {
    const dot = await run("graph", sample("mlp.fsm"), "--format=dot");
    expect(dot.code).toBe(0);
    expect(dot.stdout).toMatch(/^digraph /);
    expect(dot.stdout.match(/subgraph cluster_/g)?.length).toBe(6);
    const text = await run("graph", sample("mlp.fsm"));
    expect(text.stdout).toContain("hidden_layers.3.fc.weight");
  });

  it("rejects a bad format with a usage error", async () => {
    const r = await run("graph", sample("mlp.fsm"), "--format", "png");
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--format must be one of text, dot, json");
  });
});

describe("usage", () => {
  it("--help and --version", async () => {
    const help = await run("--help");
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("check");
    expect(help.stdout).toContain("graph");
    for (const cmd of ["check", "graph"]) {
      const r = await run(cmd, "--help");
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`fsm ${cmd}`);
    }
    const v = await run("--version");
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
    expect(v.stdout.trim()).toBe(pkg.version);
  });

  it("usage errors exit with 2", async () => {
    expect((await run()).code).toBe(2);
    expect((await run("frobnicate")).code).toBe(2);
    expect((await run("check")).code).toBe(2);
    expect((await run("check", "--bogus", sample("mlp.fsm"))).code).toBe(2);
    expect((await run("graph", sample("mlp.fsm"), "--format")).code).toBe(2);
  });
});

describe("bin/fsm.js (a real process)", () => {
  const bin = join(root, "bin/fsm.js");
  it("runs the built CLI", () => {
    expect(existsSync(join(root, "dist/cli/main.js")), "run `npm run build` (npm ci does it) first").toBe(true);
    const out = execFileSync(process.execPath, [bin, "check", sample("gpt-tiny.fsm")], { encoding: "utf8" });
    expect(out).toContain("ok (model gpt_tiny");
    const bad = spawnSync(process.execPath, [bin, "check", fixture("lex-bad-character.fsm")], { encoding: "utf8" });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain("error[FSM100]: unexpected character '$'");
  });

  it("runs the bundle of the TypeScript last compiled (npm run build bundles after compiling)", () => {
    // bin/fsm.js loads dist/cli/ (scripts/bundle-cli.ts), made from dist/src/: compiled again but not
    // bundled, the command would run the code before the change.
    const compiled = statSync(join(root, "dist/src/cli/main.js")).mtimeMs;
    const bundled = statSync(join(root, "dist/cli/main.js")).mtimeMs;
    expect(bundled, "dist/cli/ is older than dist/src/: run `npm run build`, which compiles and bundles").toBeGreaterThanOrEqual(compiled);
  });

  it("says how to build when the bundle is missing", () => {
    // A copy of bin/fsm.js beside an empty dist/: the import it makes fails as it would before a build.
    const dir = mkdtempSync(join(tmpdir(), "fsm-bin-"));
    try {
      mkdirSync(join(dir, "bin"));
      copyFileSync(bin, join(dir, "bin", "fsm.js"));
      writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
      const r = spawnSync(process.execPath, [join(dir, "bin", "fsm.js"), "--version"], { encoding: "utf8" });
      expect(r.status).toBe(1);
      expect(r.stderr).toBe("fsm is not built: run 'npm run build' (or 'npm ci') in fsm's directory first\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
