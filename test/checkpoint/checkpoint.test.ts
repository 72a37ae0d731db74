// Checkpoints of native runs: 10 steps equal 5 + resume + 5 bit for bit (weights, optimizer state, loss
// scale and data position restored), files are safetensors any reader can parse (checked here by parsing the
// bytes independently of our reader), the manifest is written last, and what is incomplete, corrupt, newer
// or for another model is refused with a clear error.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkFile } from "../../src/check/check.js";
import { compileModel } from "../../src/compile/compile.js";
import type { Plan } from "../../src/plan/plan.js";
import { runPlan } from "../../src/runtime/run-loop.js";
import { readSafetensors, writeSafetensors } from "../../src/checkpoint/safetensors.js";
import { createEngine } from "../../src/runtime/engines.js";
import { graphFromJson } from "../../src/plan/graph-from-json.js";
import { runCli as run } from "../support/cli.js";
import { samplePath, sets } from "../compile/helpers.js";

const root = mkdtempSync(join(tmpdir(), "fsm-ckpt-"));

function planFor(o: Record<string, string | number>, devices: number): Plan {
  const model = checkFile(samplePath("gpt-tiny"), { overrides: sets({ checkpoint: "never", ...o }) }).model!;
  return compileModel(model, { cluster: "cpu", devices, source: "gpt-tiny", fsmVersion: "test" }).plan;
}

async function train(plan: Plan, steps: number, extra: Parameters<typeof runPlan>[1] = {}): Promise<{ losses: number[]; params: Map<string, Float32Array> }> {
  const out = { losses: [] as number[], params: new Map<string, Float32Array>() };
  await runPlan(plan, { steps, engine: "native", ...extra, onStep: (r) => out.losses.push(r.loss), onDone: (e) => plan.graph.params.forEach((p) => out.params.set(p.name, e.param(p.name))) });
  return out;
}

describe("checkpoints", () => {
  const shapes: [string, Record<string, string | number>, number][] = [
    ["fsdp 2 stages × 2 replicas", { stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4],
    ["oss 1 stage × 2 replicas", { stages: 1, data_parallel: 2, chunks: 2, shard: "oss" }, 2],
    ["fp16 sddp, dynamic loss scale", { stages: 1, data_parallel: 2, chunks: 2, shard: "sddp", "train.precision": "fp16" }, 2],
    // Each rank's slices of the split weights, and FSDP shards of those slices.
    ["tensor parallel 2 × fsdp 2 replicas", { tensor_parallel: 2, stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4],
  ];
  for (const [title, o, devices] of shapes) {
    it(`${title}: 10 steps = 5 + resume + 5, bit for bit`, async () => {
      const plan = planFor(o, devices);
      const dir = join(root, title.replace(/\W+/g, "-"));
      const whole = await train(plan, 10);
      const first = await train(plan, 5, { save: { dir } });
      const second = await train(plan, 5, { resume: dir });
      expect([...first.losses, ...second.losses]).toEqual(whole.losses);
      for (const [p, v] of whole.params) expect(Array.from(second.params.get(p)!), p).toEqual(Array.from(v));
    }, 60_000);
  }

  it("the files are safetensors: an independent parse finds every weight by name with its bytes; the manifest comes last", async () => {
    const plan = planFor({ stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1);
    const dir = join(root, "plain");
    const r = await train(plan, 3, { save: { dir, every: 2 } });
    const manifest = JSON.parse(readFileSync(join(dir, "latest.json"), "utf8")) as { step: number; dir: string };
    expect(manifest.step).toBe(3);
    expect(readdirSync(dir).sort()).toEqual(["latest.json", "step-000002", "step-000003"]);
    const bytes = readFileSync(join(dir, manifest.dir, "rank-00000.safetensors"));
    const n = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.toString("utf8", 8, 8 + n)) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
    for (const p of plan.graph.params) {
      const t = header[p.name]!;
      expect(t.dtype).toBe("F32");
      const data = bytes.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]);
      expect(Array.from(new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length)))).toEqual(Array.from(r.params.get(p.name)!));
      expect(header[`${p.name}.exp_avg`]?.shape).toEqual(t.shape);
    }
    // And another language's reader: Python with NumPy (where /usr/bin/python3 has it) sums wte.weight.
    const py = "import json,struct,sys,numpy as np\nb=open(sys.argv[1],'rb').read()\nn=struct.unpack('<Q',b[:8])[0]\nh=json.loads(b[8:8+n])\nt=h['wte.weight']\na=np.frombuffer(b[8+n+t['data_offsets'][0]:8+n+t['data_offsets'][1]],dtype='<f4').reshape(t['shape'])\nprint(repr(float(a.astype(np.float64).sum())))";
    const out = spawnSync("/usr/bin/python3", ["-c", py, join(dir, manifest.dir, "rank-00000.safetensors")], { encoding: "utf8" });
    // Skipped only where NumPy is missing; a failing script is a failure.
    const hasNumpy = spawnSync("/usr/bin/python3", ["-c", "import numpy"]).status === 0;
    if (hasNumpy) expect(out.status, out.stderr).toBe(0);
    if (hasNumpy) expect(Number(out.stdout.trim())).toBeCloseTo(Array.from(r.params.get("wte.weight")!).reduce((x, y) => x + y, 0), 6);
  }, 60_000);

  // PyTorch (where /usr/bin/python3 has it) reads the rank files by the format alone: F32 and BF16 tensors
  // through torch.frombuffer, and its own fp32 → bf16 rounding of the master weights gives the bf16 compute
  // copies' bits exactly; the consolidated file's tensors take their full shapes.
  it.skipIf(spawnSync("/usr/bin/python3", ["-c", "import torch"]).status !== 0)("PyTorch reads a bf16 run's rank file and the consolidated file", async () => {
    const plan = planFor({ stages: 1, data_parallel: 2, chunks: 1, shard: "fsdp", "train.precision": "bf16" }, 2);
    const dir = join(root, "torch");
    const r = await train(plan, 2, { save: { dir } });
    const whole = join(root, "torch.safetensors");
    expect((await run("consolidate", dir, "-o", whole)).code).toBe(0);
    const py = [
      "import json,struct,sys,torch",
      "def load(path):",
      "  b=bytearray(open(path,'rb').read()); n=struct.unpack('<Q',b[:8])[0]; h=json.loads(b[8:8+n]); h.pop('__metadata__',None)",
      "  dt={'F32':(torch.float32,4),'BF16':(torch.bfloat16,2),'F16':(torch.float16,2),'I32':(torch.int32,4)}",
      "  return {k:torch.frombuffer(b,dtype=dt[v['dtype']][0],count=(v['data_offsets'][1]-v['data_offsets'][0])//dt[v['dtype']][1],offset=8+n+v['data_offsets'][0]).reshape(v['shape']) for k,v in h.items()}",
      "rank=load(sys.argv[1]); pairs=[k for k in rank if k.endswith(':compute') and k[:-8] in rank]",
      "same=all(torch.equal(rank[k].view(torch.int16), rank[k[:-8]].to(torch.bfloat16).view(torch.int16)) for k in pairs)",
      "full=load(sys.argv[2])",
      "print(json.dumps({'pairs':len(pairs),'same':same,'shapes':{k:list(v.shape) for k,v in full.items()},'sum':float(full['wte.weight'].double().sum())}))",
    ].join("\n");
    const out = spawnSync("/usr/bin/python3", ["-c", py, join(dir, "step-000002", "rank-00000.safetensors"), whole], { encoding: "utf8" });
    expect(out.status, out.stderr).toBe(0);
    const got = JSON.parse(out.stdout) as { pairs: number; same: boolean; shapes: Record<string, number[]>; sum: number };
    expect(got.pairs).toBeGreaterThan(0);
    expect(got.same).toBe(true);
    for (const p of plan.graph.params) expect(got.shapes[p.name], p.name).toEqual(plan.graph.tensors[p.tensor]!.shape.map(Number));
    expect(got.sum).toBeCloseTo(Array.from(r.params.get("wte.weight")!).reduce((x, y) => x + y, 0), 6);
  }, 60_000);

  it("a save killed midway leaves only a temporary directory, which the next save removes (a live process's is kept)", async () => {
    const plan = planFor({ stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1);
    const dir = join(root, "abandoned");
    // A process that has exited: its pid is free (and not reused within this test).
    const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" }).stdout;
    mkdirSync(join(dir, `step-000009.tmp-${dead}`), { recursive: true });
    writeFileSync(join(dir, `step-000009.tmp-${dead}`, "rank-00000.safetensors"), "half a file");
    mkdirSync(join(dir, `step-000009.tmp-${process.ppid}`), { recursive: true });
    await train(plan, 2, { save: { dir } });
    expect(readdirSync(dir).sort()).toEqual(["latest.json", "step-000002", `step-000009.tmp-${process.ppid}`]);
  }, 60_000);

  it("refuses what is not a complete checkpoint of this plan", async () => {
    const plan = planFor({ stages: 1, data_parallel: 2, chunks: 1, shard: "none" }, 2);
    const dir = join(root, "refuse");
    await train(plan, 2, { save: { dir } });
    const fail = async (d: string, p: Plan = plan) => {
      try {
        await train(p, 1, { resume: d });
      } catch (e) {
        return (e as Error).message;
      }
      return "no error";
    };
    // A save that never wrote its manifest is not a checkpoint.
    const partial = join(root, "partial");
    mkdirSync(join(partial, "step-000001"), { recursive: true });
    writeFileSync(join(partial, "step-000001", "rank-00000.safetensors"), readFileSync(join(dir, (JSON.parse(readFileSync(join(dir, "latest.json"), "utf8")) as { dir: string }).dir, "rank-00000.safetensors")));
    expect(await fail(partial)).toMatch(/holds no complete checkpoint/);
    // Another plan, another model, a newer format, a truncated or corrupt rank file.
    const m = JSON.parse(readFileSync(join(dir, "latest.json"), "utf8")) as Record<string, unknown>;
    // Another plan resumes by resharding (reshard.test.ts) only if the parameters are the same.
    writeFileSync(join(dir, "latest.json"), JSON.stringify({ ...m, fingerprint: "another plan", params: { ...(m.params as object), "wte.weight": [65, 32], "extra.bias": [4] } }));
    expect(await fail(dir)).toMatch(/saved from another plan of gpt_tiny \(2 devices; this plan has 2\) whose state does not fit this one: wte\.weight is \[65, 32\], this plan's is \[64, 32\]; unexpected extra\.bias/);
    writeFileSync(join(dir, "latest.json"), JSON.stringify({ ...m, model: "llama" }));
    expect(await fail(dir)).toMatch(/checkpoint of model llama, not gpt_tiny/);
    writeFileSync(join(dir, "latest.json"), JSON.stringify({ ...m, version: 99 }));
    expect(await fail(dir)).toMatch(/written by a newer fsm/);
    writeFileSync(join(dir, "latest.json"), JSON.stringify(m));
    const file = join(dir, m.dir as string, "rank-00001.safetensors");
    const good = readFileSync(file);
    writeFileSync(file, good.subarray(0, good.length - 100));
    expect(await fail(dir)).toMatch(/rank-00001\.safetensors: tensor \S+ data \[\d+, \d+\) lies outside the file \(truncated\?\)/);
    writeFileSync(file, Buffer.concat([good.subarray(0, 8), Buffer.from("{not json"), good.subarray(17)]));
    expect(await fail(dir)).toMatch(/its header is not JSON/);
    writeFileSync(file, good);
    expect(await fail(dir)).toBe("no error");
  }, 60_000);

  it("through the CLI: --save, --save-every, --resume; the reference engines say checkpoints need the native one", async () => {
    const dir = join(root, "cli");
    const a = await run("run", samplePath("gpt-tiny"), "--devices", "2", "--steps", "4", "--save", dir, "--save-every", "2", "--json");
    expect(a.code, a.stderr).toBe(0);
    const b = await run("run", samplePath("gpt-tiny"), "--devices", "2", "--steps", "2", "--resume", dir, "--json");
    expect(b.code, b.stderr).toBe(0);
    const c = await run("run", samplePath("gpt-tiny"), "--devices", "2", "--steps", "2", "--resume", dir, "--engine", "native-kernels");
    expect(c.code).toBe(1);
    expect(c.stderr).toContain("checkpoints are saved and resumed by the native engine, not native-kernels");
    expect((await run("run", samplePath("gpt-tiny"), "--save-every", "2")).code).toBe(2);
    // A --save path that is a file is refused before training, not after it.
    writeFileSync(join(root, "a-file"), "");
    const d = await run("run", samplePath("gpt-tiny"), "--steps", "2", "--save", join(root, "a-file"));
    expect(d.code).toBe(1);
    expect(d.stderr).toContain(`--save ${join(root, "a-file")}: is a regular file, not a directory`);
    expect(d.stdout).not.toContain("step 1/2");
  }, 60_000);
});

describe("fsm consolidate", () => {
  it("merges FSDP shards into whole tensors named by parameter path, equal to the run's weights; optimizer state on request; gaps refused", async () => {
    const plan = planFor({ stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4);
    const dir = join(root, "consolidate");
    const r = await train(plan, 3, { save: { dir } });
    const out = join(root, "model.safetensors");
    const c = await run("consolidate", dir, "-o", out, "--optimizer");
    expect(c.code, c.stderr).toBe(0);
    const { tensors, metadata } = readSafetensors(out);
    expect(metadata.step).toBe("3");
    for (const p of plan.graph.params) {
      const t = tensors.get(p.name)!;
      expect(t.shape, p.name).toEqual(plan.graph.tensors[p.tensor]!.shape.map(Number));
      const data = new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength));
      expect(Array.from(data), p.name).toEqual(Array.from(r.params.get(p.name)!));
      expect(tensors.get(`${p.name}.exp_avg_sq`)?.shape).toEqual(t.shape);
    }
    // Without --optimizer: weights only.
    expect((await run("consolidate", dir, "-o", join(root, "w.safetensors"))).code).toBe(0);
    expect([...readSafetensors(join(root, "w.safetensors")).tensors.keys()].sort()).toEqual(plan.graph.params.map((p) => p.name).sort());
    // A shard replaced by another rank's is named (the elements no rank holds then: integrity.test.ts).
    const m = JSON.parse(readFileSync(join(dir, "latest.json"), "utf8")) as { dir: string };
    const rank3 = join(dir, m.dir, "rank-00003.safetensors");
    const copy = readFileSync(rank3);
    writeFileSync(rank3, readFileSync(join(dir, m.dir, "rank-00000.safetensors")));
    const bad = await run("consolidate", dir, "-o", join(root, "bad.safetensors"));
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/rank-00003\.safetensors says it is rank 0, but \S+latest\.json names it as rank 3's file/);
    expect(readdirSync(root).filter((n) => n.startsWith("bad.safetensors")), "no half-written output").toEqual([]);
    writeFileSync(rank3, copy);
  }, 60_000);
});

describe("fsm run --init", () => {
  it("starts any plan from a consolidated file's weights; a file that does not fit is refused with everything wrong listed", async () => {
    const trained = planFor({ stages: 2, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4);
    const dir = join(root, "init-src");
    await train(trained, 20, { save: { dir } });
    const file = join(root, "init.safetensors");
    expect((await run("consolidate", dir, "-o", file)).code).toBe(0);
    // Another plan (1 device, unsharded) starts from exactly those weights.
    const plan = planFor({ stages: 1, data_parallel: 1, chunks: 1, shard: "none" }, 1);
    const graph = graphFromJson(plan.model.name, plan.graph);
    const engine = createEngine("native", plan, graph, 1, { init: file });
    const { tensors } = readSafetensors(file);
    for (const p of plan.graph.params) {
      const t = tensors.get(p.name)!;
      expect(Array.from(engine.param(p.name)), p.name).toEqual(Array.from(new Float32Array(t.data.buffer.slice(t.data.byteOffset, t.data.byteOffset + t.data.byteLength))));
    }
    // A tensor-parallel plan cuts each rank's slices from them: read back whole, they are the file's.
    const tp = planFor({ tensor_parallel: 2, stages: 1, data_parallel: 2, chunks: 2, shard: "fsdp" }, 4);
    const tpEngine = createEngine("native", tp, graphFromJson(tp.model.name, tp.graph), 1, { init: file });
    for (const p of plan.graph.params) expect(Array.from(tpEngine.param(p.name)), `${p.name} (tensor parallel)`).toEqual(Array.from(engine.param(p.name)));
    // Trained weights start lower than the seed's.
    const fresh = await train(plan, 1);
    const warm = await train(plan, 1, { init: file });
    expect(warm.losses[0]!).toBeLessThan(fresh.losses[0]! - 0.3);
    // Wrong files: every problem in one message.
    const wrong = new Map([...tensors].filter(([n]) => n !== "wpe.weight"));
    wrong.set("ln_f.weight", { dtype: "F32", shape: [3], data: new Uint8Array(12) });
    wrong.set("extra.weight", { dtype: "F32", shape: [1], data: new Uint8Array(4) });
    const bad = join(root, "bad-init.safetensors");
    writeSafetensors(bad, wrong);
    const r = await run("run", samplePath("gpt-tiny"), "--steps", "1", "--init", bad);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/does not fit model gpt_tiny: .*missing wpe\.weight \[16, 32\].*mis-shaped ln_f\.weight: F32\[3\], the model's is F32\[32\].*unexpected extra\.weight/);
  }, 90_000);
});
