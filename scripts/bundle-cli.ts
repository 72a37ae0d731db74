// Owns the last step of `npm run build`: bundles the compiled CLI (dist/src/cli/main.js and everything it
// imports) into a few ES modules under dist/cli/, which bin/fsm.js loads. Node resolves, reads and links
// every module of a command separately: `fsm compile` loaded 239 modules and `fsm run` more, some 0.1–0.15 s
// of every invocation on a 2-core machine (`fsm run samples/mlp.fsm --steps 1`: 0.51 → 0.37 s; `fsm check`:
// 0.32 → 0.26 s). Each command stays its own chunk, loaded when that command runs (main.ts imports them
// dynamically), and packages (chevrotain, graphlib) stay outside, loaded from node_modules as before.
// dist/src/ keeps the module tree: tests, benchmarks and scripts import it.
import { build } from "esbuild";
import { rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// Compiled to dist/scripts/, so the repository root is two levels up; the source layout (scripts/) is one level up.
const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, basename(dirname(here)) === "dist" ? "../.." : "..");
const outdir = join(repoRoot, "dist", "cli");

// A stale chunk from an earlier build must not linger beside the new ones (their names are content hashes).
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [join(repoRoot, "dist", "src", "cli", "main.js")],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  packages: "external",
  sourcemap: true,
  logLevel: "warning",
});
