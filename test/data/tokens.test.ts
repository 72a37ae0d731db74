// Token files (flat little-endian u16/u32 ids) feeding `fsm run`: each row is a window of S + 1 tokens from
// the file (tokens = first S, targets = last S), windows shuffled by the seed, a new order each epoch; the
// model learns from them; a bad file is refused before training with a message naming the file and problem.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { DataError, tokenData } from "../../src/data/tokens.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { runCli as run } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-tokens-"));
const gptTiny = () => {
  const plan = compileModel(checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 1, chunks: 1 }) }).model!, { cluster: "cpu", devices: 1, source: "t", fsmVersion: "test" }).plan;
  return graphFromJson(plan.model.name, plan.graph);
};

/** A learnable stream for a 64-token vocabulary: x_{i+1} = (5·x_i + 3) mod 64, restarted at random points. */
function writeTokens(name: string, n: number, dtype: "u16" | "u32", transform = (x: number, _i: number) => x): string {
  const path = join(dir, name);
  const ids = dtype === "u16" ? new Uint16Array(n) : new Uint32Array(n);
  let x = 7;
  for (let i = 0; i < n; i++) {
    x = i % 97 === 0 ? (i * 13) % 64 : (5 * x + 3) % 64;
    ids[i] = transform(x, i);
  }
  writeFileSync(path, Buffer.from(ids.buffer));
  return path;
}

describe("token files", () => {
  it("rows are windows of the file: targets are the tokens shifted by one; every window once per epoch, reshuffled each epoch", () => {
    // Windows with distinct contents (window w starts with 21·w mod 64), so a row tells which window it is.
    const path = join(dir, "seq.bin");
    writeFileSync(path, Buffer.from(Uint16Array.from({ length: 16 * 10 + 1 }, (_, i) => (i + Math.floor(i / 16) * 5) % 64).buffer));
    const bytes = readFileSync(path);
    const ids = new Uint16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length));
    const data = tokenData(gptTiny(), path, "u16", { batch: 2, seq: 16, seed: 1 });
    expect(data.windows).toBe(10);
    const seen: number[][] = [];
    for (let step = 0; step < 10; step++) {
      const b = data.batch(step);
      const t = b.tokens!.data as Int32Array;
      const y = b.targets!.data as Int32Array;
      for (let r = 0; r < 2; r++) {
        const row = Array.from(t.subarray(r * 16, r * 16 + 16));
        // Which window this is: the file slice that starts with it.
        const w = [...Array(10).keys()].find((k) => row.every((v, i) => v === ids[k * 16 + i]))!;
        expect(w, `step ${step} row ${r}`).toBeDefined();
        expect(Array.from(y.subarray(r * 16, r * 16 + 16))).toEqual(Array.from(ids.subarray(w * 16 + 1, w * 16 + 17)));
        seen.push([Math.floor((step * 2 + r) / 10), w]);
      }
    }
    for (const epoch of [0, 1]) expect(seen.filter(([e]) => e === epoch).map(([, w]) => w).sort((a, b) => a - b)).toEqual([...Array(10).keys()]);
    const order = (e: number) => seen.filter(([x]) => x === e).map(([, w]) => w);
    expect(order(0)).not.toEqual(order(1));
    // Deterministic by seed; another seed, another order.
    const again = tokenData(gptTiny(), path, "u16", { batch: 2, seq: 16, seed: 1 });
    expect(again.batch(3)).toEqual(data.batch(3));
    const other = tokenData(gptTiny(), path, "u16", { batch: 2, seq: 16, seed: 2 });
    expect([0, 1, 2, 3, 4].map((s) => Array.from(other.batch(s).tokens!.data))).not.toEqual([0, 1, 2, 3, 4].map((s) => Array.from(data.batch(s).tokens!.data)));
    data.close();
    again.close();
    other.close();
  });

  it("a data-parallel rank reads only its own rows: the ranks' slices, in order, are the global batch", () => {
    const path = join(dir, "slices.bin");
    writeFileSync(path, Buffer.from(Uint16Array.from({ length: 16 * 40 + 1 }, (_, i) => (i * 7) % 64).buffer));
    const data = tokenData(gptTiny(), path, "u16", { batch: 8, seq: 16, seed: 1 });
    for (const step of [0, 6]) {
      const whole = data.batch(step);
      const parts = [0, 1].map((r) => data.batch(step, { from: 4 * r, count: 4 }));
      for (const name of ["tokens", "targets"]) {
        expect(parts[1]![name]!.shape).toEqual([4, 16]);
        expect(parts.flatMap((p) => Array.from(p[name]!.data))).toEqual(Array.from(whole[name]!.data));
      }
    }
    expect(() => data.batch(0, { from: -1, count: 2 })).toThrow("rows [-1, 1) are not within the batch of 8");
    data.close();
  });

  it("fsm run trains gpt-tiny from a u16 and a u32 token file: the loss falls, and both read the same ids", async () => {
    const u16 = writeTokens("train16.bin", 20_000, "u16");
    const u32 = writeTokens("train32.bin", 20_000, "u32");
    const losses: number[][] = [];
    for (const [path, dtype] of [[u16, "u16"], [u32, "u32"]] as const) {
      const r = await run("run", samplePath("gpt-tiny"), "--devices", "2", "--set", `train.data=tokens("${path}", dtype: ${dtype})`, "--steps", "40", "--json");
      expect(r.code, r.stderr).toBe(0);
      losses.push(r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { loss?: number }).filter((x) => x.loss !== undefined).map((x) => x.loss!));
    }
    expect(losses[1]).toEqual(losses[0]);
    const l = losses[0]!;
    expect(l.slice(-5).reduce((a, b) => a + b) / 5).toBeLessThan(l.slice(0, 5).reduce((a, b) => a + b) / 5 - 1);
  }, 60_000);

  it("the data position is saved in checkpoints: 3 steps + resume (on 4 devices instead of 2) + 3 read the uninterrupted run's batches", async () => {
    // A small file (20 windows, 2.5 batches) so the resumed steps cross an epoch boundary into a new order.
    const path = writeTokens("resume.bin", 16 * 20 + 1, "u16");
    const data = ["--set", `train.data=tokens("${path}", dtype: u16)`];
    const losses = (out: string): number[] => out.trim().split("\n").map((l) => JSON.parse(l) as { loss?: number }).filter((x) => x.loss !== undefined).map((x) => x.loss!);
    const whole = await run("run", samplePath("gpt-tiny"), "--devices", "2", ...data, "--steps", "6", "--json");
    expect(whole.code, whole.stderr).toBe(0);
    const ckpt = join(dir, "resume-ckpt");
    const first = await run("run", samplePath("gpt-tiny"), "--devices", "2", ...data, "--steps", "3", "--json", "--save", ckpt);
    expect(first.code, first.stderr).toBe(0);
    const second = await run("run", samplePath("gpt-tiny"), "--devices", "4", "--set", "parallel.shard=fsdp", ...data, "--steps", "3", "--json", "--resume", ckpt);
    expect(second.code, second.stderr).toBe(0);
    const resumed = [...losses(first.stdout), ...losses(second.stdout)];
    const expected = losses(whole.stdout);
    expect(resumed).toHaveLength(6);
    expect(expected).toHaveLength(6);
    // Another plan after the resume: the same batches, summed in another order (rtol 1e-5).
    resumed.forEach((l, i) => expect(Math.abs(l - expected[i]!), `step ${i + 1}`).toBeLessThan(1e-5 * Math.abs(expected[i]!)));
    // And a wrong position would show: the steps' losses differ from one another by far more than that.
    expect(Math.abs(expected[3]! - expected[4]!)).toBeGreaterThan(1e-3);
  }, 60_000);

  it("refuses a bad file before training: missing, not whole tokens, too short, ids outside the vocabulary, a non-token model", async () => {
    const g = gptTiny();
    const opts = { batch: 2, seq: 16, seed: 1 };
    expect(() => tokenData(g, join(dir, "nope.bin"), "u16", opts)).toThrow(/cannot open token file .*nope\.bin/);
    const odd = join(dir, "odd.bin");
    writeFileSync(odd, Buffer.alloc(101));
    expect(() => tokenData(g, odd, "u16", opts)).toThrow(/has 101 bytes, not a whole number of u16 tokens/);
    expect(() => tokenData(g, writeTokens("short.bin", 16, "u16"), "u16", opts)).toThrow(/has 16 tokens, fewer than one sequence of 16 \+ 1/);
    // u32 ids read as u16: every other id is a high half (0 here), the rest fine — so use ids ≥ 64 instead.
    expect(() => tokenData(g, writeTokens("big.bin", 400, "u16", (x) => x + 64), "u16", opts)).toThrow(/outside the model's vocabulary of 64/);
    // One bad id near the end, in a window the first batch does not read: found when the file opens, with its index.
    expect(() => tokenData(g, writeTokens("late.bin", 4000, "u16", (x, i) => (i === 3990 ? 70 : x)), "u16", opts)).toThrow("token 70 at index 3990 is outside the model's vocabulary of 64");
    // A directory or a FIFO is no token file (the FIFO would block the open).
    expect(() => tokenData(g, dir, "u16", opts)).toThrow(/cannot open token file .*: is a directory, not a regular file/);
    // Ids at or past 2^31 in a u32 file are outside the vocabulary too (not wrapped to negative ids).
    const huge = join(dir, "huge.bin");
    writeFileSync(huge, Buffer.from(Uint32Array.from({ length: 400 }, (_, i) => (i === 5 ? 2 ** 31 : i % 64)).buffer));
    expect(() => tokenData(g, huge, "u32", { ...opts, batch: 24 })).toThrow("token 2147483648 at index 5 is outside the model's vocabulary of 64");
    const mlp = compileModel(checkFile(samplePath("mlp")).model!, { cluster: "cpu", devices: 1, source: "m", fsmVersion: "test" }).plan;
    expect(() => tokenData(graphFromJson(mlp.model.name, mlp.graph), writeTokens("m.bin", 400, "u16"), "u16", opts)).toThrow(DataError);
    // Through the CLI: exit 1, the message, nothing trained.
    const r = await run("run", samplePath("gpt-tiny"), "--set", `train.data=tokens("${odd}", dtype: u16)`, "--steps", "2");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("not a whole number of u16 tokens");
    expect(r.stdout).not.toContain("step 1");
  });
});
