// Hand edits of a compiled plan, as a user (or a bad merge) would make them, for the corrupt-plan cases: one
// small plan is compiled once by the real binary and each case edits a copy.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fsmBin, sample } from "./harness.js";

/** Plan JSON as the cases poke at it: any field, any value. */
export type PlanJson = Record<string, any>;

let compiled: string | undefined;

/** gpt-tiny on 4 cpu devices: 2 pipeline stages × 2 FSDP replicas, 2 micro-batches, a tied embedding, gradient
 *  clipping: p2p pairs, data, tied and world collectives, FREEs, recomputes and an OPTIMIZER per stage. */
export function compiledPlanText(): string {
  if (compiled !== undefined) return compiled;
  const dir = mkdtempSync(join(tmpdir(), "fsm-hostile-plan-"));
  try {
    const out = join(dir, "p.json");
    const args = ["compile", sample("gpt-tiny.fsm"), "--devices", "4", "--set", "parallel.stages=2", "--set", "parallel.shard=fsdp", "--set", "parallel.no_sync=false", "--set", "parallel.chunks=2", "-o", out];
    const r = spawnSync(process.execPath, [fsmBin, ...args], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`compiling the base plan failed:\n${r.stderr}`);
    compiled = readFileSync(out, "utf8");
    return compiled;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const freshPlan = (): PlanJson => JSON.parse(compiledPlanText()) as PlanJson;

/** Index of the action with this text in program p (throws when the plan has none: the base plan changed). */
export function actionIndex(plan: PlanJson, p: number, text: string): number {
  const i = (plan.programs[p].actions as PlanJson[]).findIndex((a) => a.text === text);
  if (i < 0) throw new Error(`program ${p} has no action ${text}`);
  return i;
}

/**
 * Removes program p's action `text` and renumbers the rest as compile would have numbered them: ids, deps,
 * partial and gate references, streams and the memory plan's buffers (a buffer of the removed action goes).
 */
export function removeAction(plan: PlanJson, p: number, text: string): void {
  const gone = actionIndex(plan, p, text);
  const prog = plan.programs[p];
  const renumber = (id: number): number => (id > gone ? id - 1 : id);
  prog.actions.splice(gone, 1);
  for (const a of prog.actions as PlanJson[]) {
    a.id = renumber(a.id);
    a.deps = (a.deps as number[]).filter((d) => d !== gone).map(renumber);
    if (a.partial) a.partial = (a.partial as [number, number][]).filter(([x]) => x !== gone).map(([x, l]) => [renumber(x), l]);
    if (a.gates) a.gates = (a.gates as [number, number][]).filter(([, x]) => x !== gone).map(([l, x]) => [l, renumber(x)]);
  }
  for (const s of ["compute", "comm"]) prog.streams[s] = (prog.streams[s] as number[]).filter((id) => id !== gone).map(renumber);
  const memory = plan.memory[p];
  memory.buffers = (memory.buffers as PlanJson[]).filter((b) => b.from !== gone && b.to !== gone).map((b) => ({ ...b, from: renumber(b.from), to: renumber(b.to) }));
}

// ---- the cases: each edit, and what the loader must say about it ------------------------------------------

export interface Corruption {
  readonly name: string;
  /** The plan file's text. */
  readonly text: () => string;
  readonly message: RegExp;
}

const edited = (edit: (p: PlanJson) => void) => (): string => {
  const plan = freshPlan();
  edit(plan);
  return JSON.stringify(plan);
};

const located = (path: string, reason: string): RegExp => new RegExp(`p\\.json: error: invalid plan: ${path}: .*${reason}`);

export const corruptions: readonly Corruption[] = [
  { name: "an OPTIMIZER removed (ids renumbered)", text: edited((p) => removeAction(p, 1, "1OPTIMIZER")), message: located("programs\\[1\\]", "stage 1 has no OPTIMIZER") },
  { name: "a tensor's shape changed", text: edited((p) => (p.graph.tensors[3].shape = ["B", "S", "33"])), message: located("graph\\.ops\\[0\\]", "recorded as f32\\[B, S, 33\\] but infers f32\\[B, S, 32\\]") },
  {
    name: "a stream reordered (a backward before its forward)",
    text: edited((p) => {
      const c = p.programs[0].streams.compute as number[];
      const [f, b] = [actionIndex(p, 0, "0F0"), actionIndex(p, 0, "0B0")];
      c.splice(c.indexOf(b), 1);
      c.splice(c.indexOf(f), 0, b);
    }),
    message: located("programs\\[0\\]\\.actions\\[\\d+\\]", "comes before its forward"),
  },
  {
    name: "a dependency cycle across streams",
    text: edited((p) => p.programs[0].actions[actionIndex(p, 0, "0F0")].deps.push(actionIndex(p, 0, "0SEND_F0@2"))),
    message: located("programs\\[0\\]\\.actions\\[\\d+\\]", "wait cycle: .*0F0 .*0SEND_F0@2"),
  },
  {
    name: "a dependency on a later action of the same stream",
    text: edited((p) => p.programs[0].actions[actionIndex(p, 0, "0F0")].deps.push(actionIndex(p, 0, "0B1"))),
    message: located("programs\\[0\\]\\.actions\\[\\d+\\]", "0F0: waits for 0B1, which comes later in the same stream"),
  },
  {
    name: "a SEND's peer changed",
    text: edited((p) => (p.programs[0].actions[actionIndex(p, 0, "0SEND_F1@2")].text = "0SEND_F1@0")),
    message: located("programs\\[0\\]\\.actions\\[\\d+\\]", "0SEND_F1@0: stage 1 runs on rank 2, not rank 0"),
  },
  { name: "a RECV dropped", text: edited((p) => removeAction(p, 1, "1RECV_F0@0")), message: located("programs\\[0\\]\\.actions\\[\\d+\\]", "no matching 1RECV_F0@0") },
  { name: "a REDUCE_SCATTER dropped", text: edited((p) => removeAction(p, 0, "0REDUCE_SCATTER1u0")), message: located("shard\\[0\\]\\.collectives\\[1\\]", "0REDUCE_SCATTER1u0 is missing") },
  { name: "a backward dropped", text: edited((p) => removeAction(p, 1, "1B1")), message: located("programs\\[1\\]", "stage 1 micro-batch 1 has no backward") },
  {
    name: "an old version-1 plan (no hash) with an OPTIMIZER removed",
    text: edited((p) => {
      p.version = 1;
      delete p.hash;
      removeAction(p, 0, "0OPTIMIZER");
    }),
    message: located("programs\\[0\\]", "stage 0 has no OPTIMIZER"),
  },
  { name: "a program's ranks changed", text: edited((p) => (p.programs[1].ranks = [3, 2])), message: located("programs\\[1\\]\\.ranks", "expected \\[2, 3\\]") },
  { name: "truncated JSON", text: () => compiledPlanText().slice(0, 30_000), message: /p\.json: error: invalid plan: not valid JSON/ },
  { name: "a newer plan version", text: edited((p) => (p.version = 99)), message: located("version", "newer than this fsm") },
  { name: "the content hash removed", text: edited((p) => delete p.hash), message: located("hash", "missing") },
  { name: "a consistent hand edit (the seed)", text: edited((p) => (p.run.seed = 2)), message: located("hash", "edited after compile") },
  {
    name: "a consistent hand edit (a collective's bytes)",
    text: edited((p) => (p.programs[0].actions[actionIndex(p, 0, "0REDUCE_SCATTER1u0")].collective.bytes *= 2)),
    message: located("hash", "edited after compile"),
  },
];

/** Every command that reads a plan, as a user would call it on p.json. */
export const commands: readonly (readonly string[])[] = [
  ["run", "p.json", "--steps", "1"],
  ["viz", "p.json", "-o", "p.html"],
  ["schedule", "p.json"],
  ["explain", "p.json"],
  ["calibrate", "p.json", "-o", "cal.json", "--repeats", "1"],
];
