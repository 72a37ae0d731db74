// Step 9 of compile: every program's arena must fit one device; the first that does not is reported with
// what it needs, what a device has, and (compile.ts) which changed settings were verified to fit.
import type { Cluster } from "../cost/cluster.js";
import type { BufferKind } from "../plan/plan.js";
import { CompileError } from "./errors.js";
import type { ProgramMemory } from "./memory.js";
import type { Program } from "./program.js";

export interface MemoryShortfall {
  readonly program: number;
  readonly stages: readonly number[];
  readonly ranks: readonly number[];
  readonly neededBytes: number;
  readonly availableBytes: number;
  /** What is live at the program's peak, by buffer kind. */
  readonly peakByKind: Readonly<Partial<Record<BufferKind, number>>>;
}

const KIND_NAMES: Readonly<Record<BufferKind, string>> = {
  param: "weights",
  grad: "gradients",
  optimizer: "optimizer state",
  activation: "activations",
  gathered: "gathered FSDP units",
  comm: "pipeline transfer buffers",
  workspace: "backward workspace (recomputed layers, activation gradients)",
};

export class MemoryError extends CompileError {
  constructor(
    readonly shortfall: MemoryShortfall,
    readonly profile: string,
    /** Changes verified to fit, each with its largest arena; filled in by compile.ts. */
    readonly fits: readonly { readonly change: string; readonly set: readonly string[]; readonly peakBytes: number }[] = [],
  ) {
    super(memoryMessage(shortfall, profile, fits));
  }
}

function gib(n: number): string {
  return `${(n / 2 ** 30).toFixed(2)} GiB`;
}

function rankRange(ranks: readonly number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`;
  const contiguous = ranks.every((r, i) => i === 0 || r === ranks[i - 1]! + 1);
  return contiguous ? `ranks ${ranks[0]}..${ranks[ranks.length - 1]}` : `ranks ${ranks.join(", ")}`;
}

function breakdown(byKind: MemoryShortfall["peakByKind"]): string {
  return (Object.entries(byKind) as [BufferKind, number][])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, n]) => `${KIND_NAMES[k]} ${gib(n)}`)
    .join(", ");
}

function memoryMessage(s: MemoryShortfall, profile: string, fits: MemoryError["fits"]): string {
  const head =
    `the plan does not fit in device memory: program ${s.program} (stage${s.stages.length > 1 ? "s" : ""} ${s.stages.join(", ")} on ${rankRange(s.ranks)}) ` +
    `needs ${gib(s.neededBytes)} (${s.neededBytes} bytes) but each ${profile} device has ${gib(s.availableBytes)} (${s.availableBytes} bytes); ` +
    `at its peak it holds ${breakdown(s.peakByKind)}`;
  if (fits.length === 0) return `${head}; none of checkpointing, a stronger shard strategy, more micro-batches or more stages fits alone or together: use more devices or a smaller batch`;
  return `${head}; these fit (checked by planning them): ${fits.map((f) => `${f.change} (peak ${gib(f.peakBytes)}: ${f.set.map((x) => `--set ${x}`).join(" ")})`).join("; ")}`;
}

export function shortfall(programs: readonly Program[], memory: readonly ProgramMemory[], cluster: Cluster): MemoryShortfall | undefined {
  const available = cluster.profile.memory.capacity;
  let worst: MemoryShortfall | undefined;
  memory.forEach((m, p) => {
    if (m.arenaBytes <= available || (worst && worst.neededBytes >= m.arenaBytes)) return;
    const prog = programs[p]!;
    worst = { program: p, stages: prog.stages, ranks: prog.ranks, neededBytes: m.arenaBytes, availableBytes: available, peakByKind: m.peakByKind };
  });
  return worst;
}
