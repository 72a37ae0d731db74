// bench/depth: compile time against model depth. gpt-tiny (samples/gpt-tiny.fsm) with n_layer raised to each
// depth is checked, compiled for 4 CPU devices (everything auto, so the plan search runs) and written, each
// phase timed once in this process (`checkMs`, `compileMs`, `writeMs`); `processMs` is the whole
// `fsm compile` command as a fresh process, the figure a user waits for. GPT-3 175B on 1024 H100s, the
// largest sample, is timed the same way. Compile should stay linear-ish in depth with no recursion limit.
// Prints one JSON object; run with `node dist/bench/depth.js [DEPTH...]` after `npm run build` (default
// depths 2, 500, 2000, 5000).
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { writePlan } from "../src/plan/serialize.js";

const root = resolve(fileURLToPath(import.meta.url), "../../..");
const cli = join(root, "bin", "fsm.js");
const depths = process.argv.length > 2 ? process.argv.slice(2).map(Number) : [2, 500, 2000, 5000];
const dir = mkdtempSync(join(tmpdir(), "fsm-bench-depth-"));

const since = (t0: number): number => Number((performance.now() - t0).toFixed(1));

/** The whole CLI as a fresh process: module loading, check, compile, write and the printed summary. */
function processMs(args: readonly string[]): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [cli, "compile", ...args], { encoding: "utf8", maxBuffer: 1 << 26 });
  const ms = since(t0);
  if (r.status !== 0) throw new Error(`fsm compile ${args.join(" ")} failed (${r.status}): ${r.stderr}`);
  return ms;
}

try {
  cpSync(join(root, "samples", "lib"), join(dir, "lib"), { recursive: true });
  const tiny = readFileSync(join(root, "samples", "gpt-tiny.fsm"), "utf8");
  if (!tiny.includes("n_layer = 2")) throw new Error("samples/gpt-tiny.fsm no longer says n_layer = 2");
  const cases = depths.map((depth) => {
    const source = join(dir, `gpt-${depth}.fsm`);
    writeFileSync(source, tiny.replace("n_layer = 2", `n_layer = ${depth}`));
    const output = join(dir, `gpt-${depth}.plan.json`);
    let t0 = performance.now();
    const model = checkFile(source).model;
    const checkMs = since(t0);
    if (!model) throw new Error(`${source} failed to check`);
    t0 = performance.now();
    const compiled = compileModel(model, { cluster: "cpu", devices: 4, source, fsmVersion: "bench" });
    const compileMs = since(t0);
    t0 = performance.now();
    const planBytes = writePlan(output, compiled.plan);
    const writeMs = since(t0);
    return {
      depth,
      ops: compiled.plan.graph.ops.length,
      chosen: compiled.plan.search?.chosen ?? "(no search)",
      planBytes,
      checkMs,
      compileMs,
      writeMs,
      processMs: processMs([source, "--devices", "4", "-o", output]),
    };
  });
  const gpt3 = join(root, "samples", "gpt3-175b.fsm");
  const largest = { model: "gpt3-175b.fsm", cluster: "h100-sxm", devices: 1024, processMs: processMs([gpt3, "--cluster", "h100-sxm", "--devices", "1024", "-o", join(dir, "gpt3.plan.json")]) };
  console.log(JSON.stringify({ bench: "depth", node: process.version, cluster: "cpu × 4", cases, largest }, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
