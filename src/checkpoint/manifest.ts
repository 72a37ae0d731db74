// A checkpoint's manifest, DIR/latest.json: written last, so a checkpoint is complete exactly when the
// manifest names it. It records what a resume must restore besides the rank files' tensors (the step, the
// data position and what orders the data, the fp16 loss scaler) and what a reader needs to interpret the
// rank files without the plan (every parameter's shape, the optimizer state's roles).
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Plan } from "../plan/plan.js";
import { wholeShape } from "../graph/param-split.js";

export const CHECKPOINT_FORMAT = "fsm-checkpoint";
export const CHECKPOINT_VERSION = 1;

export class CheckpointError extends Error {}

/** Everything random in a run after initialisation is the data order: a permutation per epoch drawn from the
 *  seed. With the global batch (and sequence length) it fixes which samples every later step reads, so
 *  (seed, batch, seq, position) is the run's whole RNG and data state. */
export interface DataState {
  readonly seed: number;
  readonly batch: number;
  readonly seq: number | null;
  /** The next batch index (= steps completed). */
  readonly position: number;
}

export interface Manifest {
  readonly format: typeof CHECKPOINT_FORMAT;
  readonly version: number;
  readonly model: string;
  readonly fingerprint: string;
  /** Steps completed; the next run's first batch is this index. */
  readonly step: number;
  readonly devices: number;
  readonly dir: string;
  readonly lossScaler?: { readonly scale: number; readonly clean: number };
  /** Every parameter's full shape (rank files hold 1-D pieces of them). */
  readonly params?: Readonly<Record<string, readonly number[]>>;
  /** Optimizer state roles saved per parameter (`exp_avg`, ...). */
  readonly roles?: readonly string[];
  readonly data?: DataState;
}

/** What identifies a plan's persistent state: the training graph, the settings and how state is laid out. */
export function planFingerprint(plan: Plan): string {
  const layout = { graph: plan.graph, settings: plan.settings, devices: plan.cluster.devices, stages: plan.stages.map((s) => [s.layers, s.ranks]), shard: plan.shard.map((s) => [s.strategy, s.units, s.owners, s.broadcastBuckets]) };
  return createHash("sha256").update(JSON.stringify(layout)).digest("hex").slice(0, 32);
}

export function dataState(plan: Plan, position: number): DataState {
  return { seed: plan.run?.seed ?? 0, batch: plan.settings.batch, seq: plan.settings.seq, position };
}

export const stepName = (step: number): string => `step-${String(step).padStart(6, "0")}`;
export const stepDir = (dir: string, step: number): string => join(dir, stepName(step));
export const rankFile = (device: number): string => `rank-${String(device).padStart(5, "0")}.safetensors`;

export function readManifest(dir: string): Manifest {
  const path = join(dir, "latest.json");
  if (!existsSync(path)) throw new CheckpointError(`${dir} holds no complete checkpoint (no latest.json: a save that never finished leaves none)`);
  if (!statSync(path).isFile()) throw new CheckpointError(`${path} is not a file`);
  let m: Manifest;
  try {
    m = JSON.parse(readFileSync(path, "utf8")) as Manifest;
  } catch (e) {
    throw new CheckpointError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof m !== "object" || m === null || m.format !== CHECKPOINT_FORMAT) throw new CheckpointError(`${path} is not an fsm checkpoint manifest`);
  if (m.version > CHECKPOINT_VERSION) throw new CheckpointError(`${path} was written by a newer fsm (checkpoint version ${m.version}; this fsm reads ${CHECKPOINT_VERSION})`);
  if (!Number.isInteger(m.step) || m.step < 0 || typeof m.dir !== "string" || !Number.isInteger(m.devices) || m.devices < 1 || typeof m.fingerprint !== "string") throw new CheckpointError(`${path}: malformed manifest`);
  // The step is what a resume believes (the data position, the step count): it must be the step whose
  // directory the manifest names, and whose rank files say so (rank-file.ts).
  if (m.dir !== stepName(m.step)) throw new CheckpointError(`${path} says step ${m.step} but names directory ${m.dir} (a save writes ${stepName(m.step)}): the manifest was edited or is corrupt`);
  if (m.data && m.data.position !== m.step) throw new CheckpointError(`${path} says step ${m.step} but data position ${m.data.position}: the manifest was edited or is corrupt`);
  return m;
}

/** Resuming must read the same samples the uninterrupted run would: the same seed, global batch and length. */
export function checkDataState(dir: string, m: Manifest, plan: Plan): void {
  if (!m.data) return;
  const here = dataState(plan, m.step);
  const differs = (["seed", "batch", "seq"] as const).filter((k) => m.data![k] !== here[k]);
  if (differs.length > 0) {
    throw new CheckpointError(
      `${dir} was trained with ${differs.map((k) => `${k} ${m.data![k]}`).join(", ")}; this plan has ${differs.map((k) => `${k} ${here[k]}`).join(", ")}: resuming would read different samples than the interrupted run (start from its weights with 'fsm consolidate' and --init instead)`,
    );
  }
}

/** Every parameter's full shape, by path, as the plan's graph has it. */
export function planParams(plan: Plan): Record<string, number[]> {
  // A tensor-parallel plan's graph has a rank's slice of a split parameter: the model's is the whole.
  return Object.fromEntries(plan.graph.params.map((p) => {
    const shape = plan.graph.tensors[p.tensor]!.shape.map(Number);
    return [p.name, p.split ? wholeShape(shape, p.split) : shape];
  }));
}
