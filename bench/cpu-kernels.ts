// bench/cpu-kernels: the CPU device's elementwise, reduction and attention kernels at the shapes of the
// 867k-parameter GPT (bench/gpt-867k.fsm: B 16, S 64, d 128, hidden 512, 4 heads; attention also at the
// micro-batches of 8 and 4), in ns per element (of the call's largest operand) as the executor runs them
// (outputs zeroed first unless the kernel writes them all: timeKernel goes through Device::run), and that
// GPT's training step on one CPU device; with PyTorch eager's step on the same model, batch and thread count
// where PyTorch is installed.
//
// Each figure is measured in child processes, so two builds of the addon compare in one run: `--baseline
// PATH` (a copy of fsm_native.node from before a change) is measured interleaved with the current build
// (FSM_NATIVE_PATH or native/build/Release), round by round, and the JSON gives each one's best round
// (the least disturbed on a shared machine) and their ratio. Kernels run on one core and one thread
// (taskset -c 0 where taskset exists, OPENBLAS_NUM_THREADS=1; no kernel threads outside a program), so kernel
// figures compare work, not scheduling; steps run at 1 thread (taskset) and on every core.
//
// Usage: npm run build && node dist/bench/cpu-kernels.js [--baseline PATH] [--rounds N] [--steps N] [--no-step] [--no-torch]
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { checkFile } from "../src/check/check.js";
import { compileModel } from "../src/compile/compile.js";
import { nativeAddonPath, timeNativeKernel, type NativeAttrs, type NativeOperand, type NativeOutput } from "../src/native/binding.js";
import { runPlan } from "../src/runtime/run-loop.js";

const [B, S, D, HIDDEN, HEADS, VOCAB] = [16, 64, 128, 512, 4, 256];

interface KernelCase {
  name: string;
  op: string;
  inputs: NativeOperand[];
  attrs: NativeAttrs;
  outputs: NativeOutput[];
}

function floats(shape: readonly number[], seed: number, scale = 2): NativeOperand {
  let s = seed >>> 0 || 1;
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    data[i] = ((s >>> 0) / 2 ** 32 * 2 - 1) * scale;
  }
  return { shape, data };
}

const f32 = (shape: readonly number[]): NativeOutput => ({ shape, dtype: "f32" });

function cases(): KernelCase[] {
  const act = [B, S, HIDDEN];
  const res = [B, S, D];
  const attn: NativeAttrs = { heads: HEADS, causal: true, bias: true, rope: false };
  const wqkv = floats([3 * D, D], 11, 0.1), bqkv = floats([3 * D], 12, 0.1), wproj = floats([D, D], 13, 0.1), bproj = floats([D], 14, 0.1);
  const targets: NativeOperand = { shape: [B * S], data: Int32Array.from({ length: B * S }, (_, r) => (r * 37 + 11) % VOCAB) };
  const sumTo = (from: number[], to: number[]): KernelCase => ({ name: `sum_to ${JSON.stringify(from)}->${JSON.stringify(to)}`, op: "sum_to", inputs: [floats(from, 5)], attrs: {}, outputs: [f32(to)] });
  return [
    { name: `gelu ${JSON.stringify(act)}`, op: "gelu", inputs: [floats(act, 1, 3)], attrs: {}, outputs: [f32(act)] },
    { name: `gelu_grad ${JSON.stringify(act)}`, op: "gelu_grad", inputs: [floats(act, 2), floats(act, 1, 3)], attrs: {}, outputs: [f32(act)] },
    { name: `relu ${JSON.stringify(act)}`, op: "relu", inputs: [floats(act, 1, 3)], attrs: {}, outputs: [f32(act)] },
    { name: `silu ${JSON.stringify(act)}`, op: "silu", inputs: [floats(act, 1, 3)], attrs: {}, outputs: [f32(act)] },
    sumTo(act, [HIDDEN]), // the MLP's fc bias gradient
    sumTo(res, [D]), // a residual-width bias gradient
    sumTo([B, S, 3 * D], [3 * D]), // the QKV bias gradient
    sumTo(res, [B, 1, D]), // a middle dim
    sumTo(res, [B, S, 1]), // the last dim
    { name: `add ${JSON.stringify(res)}`, op: "add", inputs: [floats(res, 3), floats(res, 4)], attrs: {}, outputs: [f32(res)] },
    { name: `layer_norm ${JSON.stringify(res)}`, op: "layer_norm", inputs: [floats(res, 3), floats([D], 6), floats([D], 7)], attrs: { eps: 1e-5 }, outputs: [f32(res)] },
    { name: `layer_norm_grad_input ${JSON.stringify(res)}`, op: "layer_norm_grad_input", inputs: [floats(res, 8), floats(res, 3), floats([D], 6)], attrs: { eps: 1e-5 }, outputs: [f32(res)] },
    { name: `layer_norm_grad_weight ${JSON.stringify(res)}`, op: "layer_norm_grad_weight", inputs: [floats(res, 8), floats(res, 3)], attrs: { eps: 1e-5 }, outputs: [f32([D])] },
    { name: `cross_entropy [${B * S},${VOCAB}]`, op: "cross_entropy", inputs: [floats([B * S, VOCAB], 15, 4), targets], attrs: {}, outputs: [f32([])] },
    { name: `cross_entropy_grad [${B * S},${VOCAB}]`, op: "cross_entropy_grad", inputs: [{ shape: [], data: Float32Array.of(1) }, floats([B * S, VOCAB], 15, 4), targets], attrs: {}, outputs: [f32([B * S, VOCAB])] },
    {
      name: `adam_update [${HIDDEN},${D}]`,
      op: "adam_update",
      inputs: [floats([HIDDEN, D], 16, 0.1), floats([HIDDEN, D], 17, 0.01), floats([HIDDEN, D], 18, 0.001), { shape: [HIDDEN, D], data: (floats([HIDDEN, D], 19, 1e-5).data as Float32Array).map(Math.abs) }, { shape: [], data: Float32Array.of(5) }],
      attrs: { lr: 3e-3, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0, decoupled: false, clip: false },
      outputs: [f32([HIDDEN, D]), f32([HIDDEN, D]), f32([HIDDEN, D])],
    },
    { name: `sgd_update [${HIDDEN},${D}] momentum`, op: "sgd_update", inputs: [floats([HIDDEN, D], 16, 0.1), floats([HIDDEN, D], 17, 0.01), floats([HIDDEN, D], 18, 0.01)], attrs: { lr: 0.1, momentum: 0.9, weight_decay: 0, nesterov: false, clip: false }, outputs: [f32([HIDDEN, D]), f32([HIDDEN, D])] },
    { name: `sum_squares [${HIDDEN},${D}]`, op: "sum_squares", inputs: [floats([HIDDEN, D], 17, 0.01)], attrs: {}, outputs: [f32([])] }, // clip_grad_norm's per-gradient sum
    // The whole batch, and the micro-batches of 8 and 4 that pipeline and data-parallel plans run.
    ...[B, 8, 4].flatMap((b): KernelCase[] => {
      const x = [b, S, D];
      return [
        { name: `attention ${JSON.stringify(x)} heads ${HEADS} causal`, op: "attention", inputs: [floats(x, 3), wqkv, bqkv, wproj, bproj], attrs: attn, outputs: [f32(x)] },
        {
          name: `attention_grad_input ${JSON.stringify(x)} heads ${HEADS} causal`,
          op: "attention_grad_input",
          inputs: [floats(x, 8), floats(x, 3), wqkv, bqkv, wproj],
          attrs: attn,
          outputs: [f32(x), f32([b, S, 3 * D]), f32(x)],
        },
      ];
    }),
  ];
}

/** Child: every case's median seconds over enough repeats for ~40 ms, as ns per element of its largest operand. */
function kernelChild(): void {
  const out: Record<string, { nsPerElement: number; usPerCall: number }> = {};
  for (const c of cases()) {
    const elements = Math.max(...[...c.inputs, ...c.outputs].map((t) => t.shape.reduce((a, b) => a * b, 1)));
    const once = timeNativeKernel(c.op, c.inputs, c.attrs, c.outputs, 3);
    const repeats = Math.max(5, Math.min(2000, Math.round(0.04 / Math.max(once, 1e-7))));
    const s = timeNativeKernel(c.op, c.inputs, c.attrs, c.outputs, repeats);
    out[c.name] = { nsPerElement: Number(((s * 1e9) / elements).toFixed(3)), usPerCall: Number((s * 1e6).toFixed(1)) };
  }
  console.log(JSON.stringify(out));
}

function gptPlan() {
  const r = checkFile("bench/gpt-867k.fsm", { overrides: ["parallel.stages=1", "parallel.chunks=1", "parallel.checkpoint=never"] });
  if (!r.model) throw new Error(r.diagnostics.map((d) => d.message).join("; "));
  return compileModel(r.model, { cluster: "cpu", devices: 1, source: "gpt-867k", fsmVersion: "bench" }).plan;
}

/** Child: the GPT's median step over `steps` steps after 2 warm-up steps (wall time per step as fsm run reports). */
async function stepChild(steps: number): Promise<void> {
  const plan = gptPlan();
  const times: number[] = [];
  await runPlan(plan, { steps: steps + 2, engine: "native", onStep: (r) => times.push(r.seconds) });
  const warm = times.slice(2).sort((a, b) => a - b);
  console.log(JSON.stringify({ stepMs: Number((warm[Math.floor(warm.length / 2)]! * 1e3).toFixed(2)), minMs: Number((warm[0]! * 1e3).toFixed(2)) }));
}

// --- parent ---------------------------------------------------------------------------------------------------

const script = fileURLToPath(import.meta.url);
const hasTaskset = spawnSync("taskset", ["-c", "0", "true"]).status === 0;

/** Runs this script as a child with `args`, on core 0 alone when `oneCore` (and OpenBLAS on one thread: the
 *  kernels' calls run outside any program, which would set it), against the addon at `addon`. */
function child(args: string[], addon: string, oneCore: boolean): unknown {
  const argv = [process.execPath, script, ...args];
  const [cmd, ...rest] = oneCore && hasTaskset ? ["taskset", "-c", "0", ...argv] : argv;
  const env = { ...process.env, FSM_NATIVE_PATH: addon, ...(oneCore && { OPENBLAS_NUM_THREADS: "1" }) };
  const r = spawnSync(cmd!, rest, { encoding: "utf8", env, timeout: 600_000 });
  if (r.status !== 0) throw new Error(`${args.join(" ")} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

function torchStep(threads: number, steps: number): { torch: string; stepMs: number } | undefined {
  const python = "/usr/bin/python3";
  if (!existsSync(python) || spawnSync(python, ["-c", "import torch"]).status !== 0) return undefined;
  const plan = gptPlan();
  const attention = plan.graph.ops.find((o) => o.op === "attention")!;
  const wte = plan.graph.params.find((x) => x.name === "wte.weight")!;
  const meta = {
    config: { d: Number(plan.graph.tensors[wte.tensor]!.shape[1]), heads: attention.attrs.heads, n_layer: plan.graph.layers.filter((l) => /^layers\.\d+$/.test(l.name)).length },
    batch: [plan.settings.batch, plan.settings.seq],
    params: plan.graph.params.map((x) => ({ name: x.name, shape: plan.graph.tensors[x.tensor]!.shape.map(Number) })),
    steps: steps + 2,
    threads,
    lr: 3e-3,
  };
  const argv = ["/usr/bin/python3", "bench/pytorch_step.py", JSON.stringify(meta)];
  const [cmd, ...rest] = threads === 1 && hasTaskset ? ["taskset", "-c", "0", ...argv] : argv;
  const r = spawnSync(cmd!, rest, { encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new Error(`bench/pytorch_step.py failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { torch: string; stepMs: number };
}

const round3 = (x: number) => Number(x.toFixed(3));

async function parent(): Promise<void> {
  const argv = process.argv.slice(2);
  const opt = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const baseline = opt("--baseline");
  const rounds = Number(opt("--rounds") ?? 3);
  const steps = Number(opt("--steps") ?? 10);
  const current = nativeAddonPath();
  if (baseline && !existsSync(baseline)) throw new Error(`--baseline ${baseline} does not exist`);
  const builds: [string, string][] = baseline ? [["before", baseline], ["after", current]] : [["after", current]];

  // Kernels: rounds alternate the builds; each build's best round per kernel.
  const kernelRuns: Record<string, Record<string, { nsPerElement: number; usPerCall: number }>[]> = {};
  for (let r = 0; r < rounds; r++) {
    for (const [label, path] of r % 2 === 0 ? builds : [...builds].reverse()) (kernelRuns[label] ??= []).push(child(["--child", "kernels"], path, true) as never);
  }
  const best = (label: string, name: string) => Math.min(...kernelRuns[label]!.map((run) => run[name]!.nsPerElement));
  const kernels = cases().map((c) => {
    const after = best("after", c.name);
    if (!baseline) return { kernel: c.name, nsPerElement: after };
    const before = best("before", c.name);
    return { kernel: c.name, beforeNsPerElement: before, afterNsPerElement: after, speedup: round3(before / after) };
  });

  // Steps: 1 thread (taskset) and every core, each build and PyTorch interleaved round by round.
  const stepResults: unknown[] = [];
  if (!argv.includes("--no-step")) {
    const torchOn = !argv.includes("--no-torch");
    for (const [threads, oneCore] of [[1, true], [availableParallelism(), false]] as const) {
      const runs: Record<string, number[]> = {};
      let torchVersion: string | undefined;
      for (let r = 0; r < rounds; r++) {
        for (const [label, path] of builds) (runs[label] ??= []).push((child(["--child", "step", String(steps)], path, oneCore) as { stepMs: number }).stepMs);
        if (torchOn) {
          const t = torchStep(threads, steps);
          if (t) {
            torchVersion = t.torch;
            (runs.torch ??= []).push(t.stepMs);
          }
        }
      }
      const bestMs = Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, Math.min(...v)]));
      stepResults.push({
        threads,
        stepMs: bestMs,
        roundsMs: runs,
        ...(baseline && { speedup: round3(bestMs.before! / bestMs.after!) }),
        ...(bestMs.torch !== undefined && { torch: torchVersion, torchOverFsm: round3(bestMs.torch / bestMs.after!) }),
      });
    }
  }
  console.log(JSON.stringify({ bench: "cpu-kernels", node: process.version, taskset: hasTaskset, rounds, model: "bench/gpt-867k.fsm", kernels, steps: stepResults }, null, 1));
}

const argv = process.argv.slice(2);
if (argv[0] === "--child") {
  if (argv[1] === "kernels") kernelChild();
  else await stepChild(Number(argv[2] ?? 10));
} else {
  await parent();
}
