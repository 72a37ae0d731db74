// .npy arrays feeding `fsm run`: NumPy's format read independently of any writer of ours (files written by
// NumPy itself where /usr/bin/python3 has it, and by a minimal writer here), rows shuffled by seed, the model
// learns from them, and every mismatch with the model's inputs is refused before training.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import { npyData } from "../../src/data/npy.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { runCli as run } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";
import { rng } from "../support/prng.js";

const dir = mkdtempSync(join(tmpdir(), "fsm-npy-"));
// Debian's python3-torch (installed by .ci/run) brings NumPy.
const hasNumpy = existsSync("/usr/bin/python3") && spawnSync("/usr/bin/python3", ["-c", "import numpy"]).status === 0;
const mlpPlan = compileModel(checkFile(samplePath("mlp")).model!, { cluster: "cpu", devices: 1, source: "m", fsmVersion: "test" }).plan;
const mlp = graphFromJson(mlpPlan.model.name, mlpPlan.graph);
const inputs = mlp.inputs().map((t) => mlp.tensor(t));
const width = (name: string): number => inputs.find((t) => t.name === name)!.type.shape[1]!.coef;

/** A version-1 .npy file: magic, header dict padded so the data starts at a multiple of 64. */
function npy(path: string, descr: string, shape: readonly number[], data: ArrayBufferView, fortran = false): string {
  let header = `{'descr': '${descr}', 'fortran_order': ${fortran ? "True" : "False"}, 'shape': (${shape.join(", ")}${shape.length === 1 ? "," : ""}), }`;
  header += " ".repeat(64 - ((10 + header.length + 1) % 64)) + "\n";
  const pre = Buffer.alloc(10);
  pre.write("\x93NUMPY", 0, "latin1");
  pre[6] = 1;
  pre.writeUInt16LE(header.length, 8);
  writeFileSync(path, Buffer.concat([pre, Buffer.from(header, "latin1"), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
  return path;
}

/** n rows of x ~ U(-1.7, 1.7) and y = tanh(x·W) for a fixed W: learnable. */
function dataset(n: number): { x: Float32Array; y: Float32Array } {
  const [dx, dy] = [width(inputs[0]!.name), width(inputs[1]!.name)];
  const next = rng(9);
  const w = Float32Array.from({ length: dx * dy }, () => (next() * 2 - 1) / Math.sqrt(dx));
  const x = Float32Array.from({ length: n * dx }, () => (next() * 2 - 1) * 1.7); // variance ≈ 1
  const y = new Float32Array(n * dy);
  for (let r = 0; r < n; r++) for (let j = 0; j < dy; j++) {
    let s = 0;
    for (let i = 0; i < dx; i++) s += x[r * dx + i]! * w[i * dy + j]!;
    y[r * dy + j] = Math.tanh(s);
  }
  return { x, y };
}

describe(".npy data", () => {
  const [xName, yName] = [inputs[0]!.name, inputs[1]!.name];
  const n = 256;
  const { x, y } = dataset(n);
  const xFile = npy(join(dir, "x.npy"), "<f4", [n, width(xName)], x);
  const yFile = npy(join(dir, "y.npy"), "<f4", [n, width(yName)], y);

  it("batches are rows of the files, every row once per epoch in a seeded order", () => {
    const data = npyData(mlp, { [xName]: xFile, [yName]: yFile }, { batch: 32, seed: 1 });
    expect(data.rows).toBe(n);
    const seen = new Set<number>();
    const dx = width(xName);
    for (let step = 0; step < n / 32; step++) {
      const b = data.batch(step);
      const bx = b[xName]!.data as Float32Array;
      for (let r = 0; r < 32; r++) {
        const row = bx.subarray(r * dx, (r + 1) * dx);
        const k = [...Array(n).keys()].find((i) => row.every((v, j) => v === x[i * dx + j]))!;
        expect(k).toBeDefined();
        seen.add(k);
        // x and y rows stay paired.
        const dy = width(yName);
        expect(Array.from((b[yName]!.data as Float32Array).subarray(r * dy, (r + 1) * dy))).toEqual(Array.from(y.subarray(k * dy, (k + 1) * dy)));
      }
    }
    expect(seen.size).toBe(n);
    data.close();
  });

  it("a data-parallel rank reads only its own rows: the ranks' slices, in order, are the global batch", () => {
    const data = npyData(mlp, { [xName]: xFile, [yName]: yFile }, { batch: 32, seed: 1 });
    for (const step of [0, 3]) {
      const whole = data.batch(step);
      const parts = [0, 1, 2, 3].map((r) => data.batch(step, { from: 8 * r, count: 8 }));
      for (const name of [xName, yName]) {
        expect(parts[0]![name]!.shape[0]).toBe(8);
        expect(parts.flatMap((p) => Array.from(p[name]!.data))).toEqual(Array.from(whole[name]!.data));
      }
    }
    expect(() => data.batch(0, { from: 30, count: 4 })).toThrow("rows [30, 34) are not within the batch of 32");
    data.close();
  });

  it("fsm run learns the map from the files", async () => {
    const r = await run("run", samplePath("mlp"), "--devices", "2", "--set", `train.data=npy(${xName}: "${xFile}", ${yName}: "${yFile}")`, "--steps", "240", "--json");
    expect(r.code, r.stderr).toBe(0);
    const l = r.stdout.trim().split("\n").map((s) => JSON.parse(s) as { loss?: number }).filter((s) => s.loss !== undefined).map((s) => s.loss!);
    expect(l.slice(-10).reduce((a, b) => a + b) / 10).toBeLessThan(0.8 * (l.slice(0, 10).reduce((a, b) => a + b) / 10));
  }, 60_000);

  it.skipIf(!hasNumpy)("reads what NumPy itself writes (a float64 file, converted to the f32 input)", () => {
    const py = `import numpy as np, sys\nx = np.arange(${n * width(xName)}, dtype=np.float64).reshape(${n}, ${width(xName)}) / 1000\nnp.save(sys.argv[1], x)\nnp.save(sys.argv[2], np.ones((${n}, ${width(yName)}), dtype=np.float32))\n`;
    const [a, b] = [join(dir, "np-x.npy"), join(dir, "np-y.npy")];
    const r = spawnSync("/usr/bin/python3", ["-c", py, a, b], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    const data = npyData(mlp, { [xName]: a, [yName]: b }, { batch: 4, seed: 3 });
    const row = Array.from((data.batch(0)[xName]!.data as Float32Array).subarray(0, width(xName)));
    const k = Math.round(row[0]! * 1000) / width(xName);
    expect(Number.isInteger(k)).toBe(true);
    expect(row).toEqual(Array.from({ length: width(xName) }, (_, j) => Math.fround((k * width(xName) + j) / 1000)));
    data.close();
  });

  it("converts the 8-byte dtypes to the inputs' f32/i32 and reads the 4-byte ones as they are", () => {
    const dx = width(xName);
    const x64 = Float64Array.from({ length: n * dx }, (_, i) => i / 3);
    const f8 = npy(join(dir, "x8.npy"), "<f8", [n, dx], x64);
    const data = npyData(mlp, { [xName]: f8, [yName]: yFile }, { batch: 4, seed: 5 });
    const whole = npyData(mlp, { [xName]: xFile, [yName]: yFile }, { batch: 4, seed: 5 });
    const [b, w] = [data.batch(2), whole.batch(2)];
    expect(b[yName]).toEqual(w[yName]);
    // The same rows in the same order (the order depends only on the seed and the row count).
    const rowOf = (t: Float32Array, r: number) => Array.from(t.subarray(r * dx, (r + 1) * dx));
    for (let r = 0; r < 4; r++) {
      const k = [...Array(n).keys()].find((i) => rowOf(w[xName]!.data as Float32Array, r).every((v, j) => v === x[i * dx + j]));
      expect(k).toBeDefined();
      expect(rowOf(b[xName]!.data as Float32Array, r)).toEqual(Array.from(x64.subarray(k! * dx, (k! + 1) * dx), Math.fround));
    }
    data.close();
    whole.close();
    // Integer inputs: <i4 and <i8 give the same i32 batches; an i64 value beyond i32 is refused.
    const plan = compileModel(checkFile(samplePath("gpt-tiny"), { overrides: sets({ stages: 1, chunks: 1 }) }).model!, { cluster: "cpu", devices: 1, source: "t", fsmVersion: "test" }).plan;
    const gpt = graphFromJson(plan.model.name, plan.graph);
    const ids = Int32Array.from({ length: 40 * 16 }, (_, i) => (i * 7) % 64);
    const i4 = { tokens: npy(join(dir, "t4.npy"), "<i4", [40, 16], ids), targets: npy(join(dir, "y4.npy"), "<i4", [40, 16], ids) };
    const i8 = { tokens: npy(join(dir, "t8.npy"), "<i8", [40, 16], BigInt64Array.from(ids, BigInt)), targets: i4.targets };
    const [a4, a8] = [npyData(gpt, i4, { batch: 8, seq: 16, seed: 2 }), npyData(gpt, i8, { batch: 8, seq: 16, seed: 2 })];
    for (const step of [0, 7]) {
      expect(a8.batch(step)).toEqual(a4.batch(step));
      expect(a4.batch(step).tokens!.data).toBeInstanceOf(Int32Array);
    }
    a4.close();
    a8.close();
    const big = BigInt64Array.from(ids, BigInt);
    big[3] = 2n ** 31n;
    const bad = { tokens: npy(join(dir, "big.npy"), "<i8", [40, 16], big), targets: i4.targets };
    expect(() => npyData(gpt, bad, { batch: 40, seq: 16, seed: 2 })).toThrow("value 2147483648 in row 0 does not fit the int32 input 'tokens'");
  });

  it("refuses mismatches before training, naming the file and the problem", async () => {
    const files = (o: Record<string, string>) => ({ [xName]: xFile, [yName]: yFile, ...o });
    const opts = { batch: 32, seed: 1 };
    expect(() => npyData(mlp, { [xName]: xFile }, opts)).toThrow(`npy(...) gives no file for input ${yName}`);
    expect(() => npyData(mlp, files({ z: xFile }), opts)).toThrow(/names z, which model .* has no input called/);
    expect(() => npyData(mlp, files({ [xName]: join(dir, "none.npy") }), opts)).toThrow(/cannot open \.npy file .*none\.npy/);
    const notNpy = join(dir, "bad.npy");
    writeFileSync(notNpy, "hello, this is not numpy");
    expect(() => npyData(mlp, files({ [xName]: notNpy }), opts)).toThrow(/not a \.npy file/);
    expect(() => npyData(mlp, files({ [xName]: npy(join(dir, "i.npy"), "<i4", [n, width(xName)], new Int32Array(n * width(xName))) }), opts)).toThrow(/dtype <i4 for input 'x', which is f32/);
    expect(() => npyData(mlp, files({ [xName]: npy(join(dir, "w.npy"), "<f4", [n, width(xName) + 1], new Float32Array(n * (width(xName) + 1))) }), opts)).toThrow(/rows of shape \(\d+\) for input 'x', which needs rows of shape/);
    expect(() => npyData(mlp, files({ [xName]: npy(join(dir, "r.npy"), "<f4", [n - 1, width(xName)], new Float32Array((n - 1) * width(xName))) }), opts)).toThrow(/has 25[56] rows but .* has 25[56]: every input needs one row per example/);
    expect(() => npyData(mlp, files({ [xName]: npy(join(dir, "f.npy"), "<f4", [n, width(xName)], x, true) }), opts)).toThrow(/Fortran-order/);
    expect(() => npyData(mlp, files({ [xName]: npy(join(dir, "h.npy"), "<f2", [n, width(xName)], new Uint16Array(n * width(xName))) }), opts)).toThrow(/dtype '<f2' is not supported/);
    const r = await run("run", samplePath("mlp"), "--set", `train.data=npy(${xName}: "${notNpy}", ${yName}: "${yFile}")`, "--steps", "2");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("is not a .npy file");
  });
});
