// `fsm consolidate` streams: it holds one tensor at a time, so its memory is bounded by the largest tensor,
// not the model (FairScale's consolidation gathered the whole optimizer state on one rank and ran out of
// memory). A 256 MiB checkpoint of 16 tensors of 16 MiB, sharded over 4 rank files, is consolidated by a real
// process whose peak resident memory is measured.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeSafetensors, type SafeTensor } from "../../src/checkpoint/safetensors.js";

const root = join(__dirname, "../..");
const MiB = 2 ** 20;

describe("fsm consolidate's memory", () => {
  it("grows by far less than the model (a few of its largest tensors) and writes the right bytes", () => {
    const dir = mkdtempSync(join(tmpdir(), "fsm-consolidate-mem-"));
    const tensors = 16;
    const numel = (16 * MiB) / 4;
    const ranks = 4;
    const quarter = numel / ranks;
    mkdirSync(join(dir, "step-000001"));
    const params: Record<string, number[]> = {};
    for (let k = 0; k < tensors; k++) params[`block.${k}.weight`] = [numel / 1024, 1024];
    for (let r = 0; r < ranks; r++) {
      const files = new Map<string, SafeTensor>();
      const metadata: Record<string, string> = { format: "fsm-checkpoint", fingerprint: "synthetic" };
      for (let k = 0; k < tensors; k++) {
        // Element i of tensor k is k + i / numel: every piece's position is checkable in the output.
        const data = new Float32Array(quarter).map((_, j) => k + (r * quarter + j) / numel);
        files.set(`block.${k}.weight`, { dtype: "F32", shape: [quarter], data: new Uint8Array(data.buffer) });
        metadata[`range:block.${k}.weight`] = `${r * quarter},${quarter}`;
      }
      writeSafetensors(join(dir, "step-000001", `rank-${String(r).padStart(5, "0")}.safetensors`), files, metadata);
    }
    const manifest = { format: "fsm-checkpoint", version: 1, model: "big", fingerprint: "synthetic", step: 1, devices: ranks, dir: "step-000001", params, roles: [] };
    writeFileSync(join(dir, "latest.json"), JSON.stringify(manifest));

    const out = join(dir, "model.safetensors");
    const script = `
      const { main } = await import(${JSON.stringify(join(root, "dist/src/cli/main.js"))});
      // Commands' modules load when they first run (cli/main.ts); the overview loads them all, so none is counted.
      await main(["--help"], { stdout: () => {}, stderr: () => {} });
      const before = process.memoryUsage().rss;
      const code = await main(["consolidate", ${JSON.stringify(dir)}, "-o", ${JSON.stringify(out)}], { stdout: () => {}, stderr: (s) => process.stderr.write(s) });
      console.log(JSON.stringify({ code, before, peak: process.resourceUsage().maxRSS * 1024 }));`;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    expect(child.status, child.stderr).toBe(0);
    const { code, before, peak } = JSON.parse(child.stdout) as { code: number; before: number; peak: number };
    expect(code).toBe(0);
    // The model is 256 MiB; the largest tensor 16 MiB. Reading whole rank files would need > 256 MiB.
    // The model is 256 MiB, the largest tensor 16 MiB: reading whole rank files (or gathering the model)
    // would grow by more than 256 MiB. Streaming into one reused 16 MiB buffer measured 58 MiB (the rest is
    // the CLI's code and heap).
    expect((peak - before) / MiB).toBeLessThan(5 * 16);

    const bytes = readFileSync(out);
    const n = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.toString("utf8", 8, 8 + n)) as Record<string, { shape: number[]; data_offsets: [number, number] }>;
    for (const k of [0, 7, 15]) {
      const t = header[`block.${k}.weight`]!;
      expect(t.shape).toEqual([numel / 1024, 1024]);
      const at = (i: number): number => bytes.readFloatLE(8 + n + t.data_offsets[0] + 4 * i);
      for (const i of [0, quarter - 1, quarter, 2 * quarter + 5, numel - 1]) expect(at(i)).toBe(Math.fround(k + i / numel));
    }
  }, 120_000);
});
