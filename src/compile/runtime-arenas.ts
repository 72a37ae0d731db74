// Step 11 of compile: the arenas `fsm run` allocates. Lowering (src/lower) — the code `fsm run` runs before
// its first step — lays out every device's slots here once, and the plan carries each device's arena (and the
// most bytes its layout holds at once), which it then predicts as the device's memory. So the figure
// `fsm compile` prints, and checks against the device's capacity, is the arena the runtime allocates, not a
// second estimate; `fsm run` refuses a plan whose recorded arenas its own lowering does not reproduce. The
// memory plan (buffers.ts, memory.ts) stays the model that the search, the fit check and viz reason with, held
// within 5% of these layouts by the tests.
// Lowering costs some 15-40 µs a slot on these machines (gpt2-124m on 4 CPU devices, 51k slots: 1.3 s;
// gpt3-175b on 1,024 H100s, 32 programs of 22k: 11 s), so by default ("auto") a plan is laid out only while
// lowering it creates at most ARENA_BUDGET_SLOTS slots (counted as they are made, so an over-budget plan
// costs at most that much building and no layout); plans whose op count alone is far above it are not tried.
// "always" lays out any plan and "never" none. A plan is laid out as its profile's devices run it: a GPU
// profile's as the CUDA device does (kernels read 16-bit operands directly), the CPU's with widened copies.
import type { DeviceProfile } from "../cost/profile.js";
import type { Graph } from "../graph/graph.js";
import { SlotBudget, SlotBudgetExceeded } from "../lower/device-program.js";
import { lower } from "../lower/lower.js";
import { gpuReservedBytes } from "../lower/device-reserve.js";
import { stageOpCounts } from "../lower/stage-ops.js";
import type { Plan, PlanMemory } from "../plan/plan.js";
import { actionFromText } from "../schedule/action.js";

export type ArenaMode = "auto" | "always" | "never";
export const ARENA_MODES: readonly ArenaMode[] = ["auto", "always", "never"];

/** The default's bound on lowering work: about 1.5-2 s here. */
export const ARENA_BUDGET_SLOTS = 60_000;

export interface LaidOut {
  /** The plan, with `memory[p].runtime` and `predicted.peakMemoryBytes` from the lowered arenas when laid out. */
  readonly plan: Plan;
  /** Why the arenas were not laid out (the plan then predicts its memory plan's arenas). */
  readonly skipped?: string;
  /** What the laid-out prediction leaves out, when something (a GPU's reservations without the addon). */
  readonly note?: string;
}

/** Ops the lowered devices run: each compute action runs its stage's forward or backward ops, for every
 *  device lowered. Lowering makes at least about one slot per op run (mostly two to three: outputs, scratch,
 *  views, gradient buffers), so this bounds a plan's slots from below. */
export function opsRun(plan: Plan, g: Graph): number {
  const ops = stageOpCounts(g, plan.stages);
  let total = 0;
  for (const p of plan.programs) {
    let run = 0;
    for (const a of p.actions) {
      if (a.stream !== "compute") continue;
      const act = actionFromText(a.text);
      const stage = ops[act.stage];
      if (!stage) continue;
      const kind = act.kind;
      run += kind === "F" || kind === "R" ? stage.forward : kind === "B" ? stage.backward : kind === "I" ? stage.backwardInput : kind === "W" ? stage.backwardWeight : 0;
    }
    total += run * replicasLowered(plan, p.id);
  }
  return total;
}

/** Replicas whose layouts may differ: all of them when a stage of the program gives state owners. */
function replicasLowered(plan: Plan, program: number): number {
  const p = plan.programs[program]!;
  return p.stages.some((k) => Object.keys(plan.shard[k]!.owners).length > 0) ? p.ranks.length : 1;
}

export function layOutArenas(plan: Plan, g: Graph, mode: ArenaMode, profile: DeviceProfile, budget = ARENA_BUDGET_SLOTS): LaidOut {
  if (mode === "never") return { plan, skipped: "--arenas never" };
  // The runtime refuses these (src/runtime/engines.ts): it holds and reduces gradients in fp32.
  if (plan.settings.reduceDtype !== undefined && plan.settings.reduceDtype !== "fp32") {
    return { plan, skipped: `fsm run cannot run this plan yet: it reduces gradients in ${plan.settings.reduceDtype} (train.reduce_dtype), the runtime in fp32` };
  }
  const over = `the default's budget is ${budget / 1000}k slots; --arenas always lays them out`;
  // Far over the budget by its ops alone (a plan lowers to at least 0.75 slots an op): not tried.
  const ops = opsRun(plan, g);
  if (mode === "auto" && 0.75 * ops > budget) return { plan, skipped: `${Math.round(ops / 1000)}k ops to lower; ${over}` };
  const ranks = plan.programs.flatMap((p) => p.ranks.slice(0, replicasLowered(plan, p.id))).sort((a, b) => a - b);
  let lowered: ReturnType<typeof lower>;
  try {
    // Laid out as the profile's devices run it: CUDA kernels read 16-bit operands directly, the CPU's widen them.
    lowered = lower(plan, g, ranks, mode === "auto" ? new SlotBudget(budget) : undefined, { kernels16: !profile.widens16BitOperands });
  } catch (e) {
    if (e instanceof SlotBudgetExceeded) return { plan, skipped: `more than ${e.max / 1000}k slots to lay out; ${over}` };
    // A plan fsm run cannot run yet compiles all the same; it says why.
    if (e instanceof Error && e.message.startsWith("not implemented:")) return { plan, skipped: `fsm run cannot run this plan: ${e.message.slice("not implemented: ".length)}` };
    throw e;
  }
  const device = new Map(lowered.ranks.map((r, i) => [r, lowered.devices[i]!]));
  // A GPU also holds its kernels' scratch and cuBLAS's workspace (the addon's formulas: without the addon,
  // the plan says it did not price them).
  // Once per lowered device (replicas not lowered share their first replica's program).
  let reserved: Map<(typeof lowered.devices)[number], number> | undefined;
  let note: string | undefined;
  if (profile.kind === "cuda") {
    try {
      reserved = new Map(lowered.devices.map((d) => [d, gpuReservedBytes(d)]));
    } catch (e) {
      note = `a GPU's kernel scratch and cuBLAS workspace are not priced: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`;
    }
  }
  const peak = [...plan.predicted.peakMemoryBytes];
  const memory: PlanMemory[] = plan.memory.map((m, p) => {
    const prog = plan.programs[p]!;
    // Replicas not lowered lay out as the first does.
    const of = (replica: number) => device.get(prog.ranks[replica]!) ?? device.get(prog.ranks[0]!)!;
    const reservedBytes = reserved && prog.ranks.map((_, r) => reserved!.get(of(r))!);
    const runtime = { arenaBytes: prog.ranks.map((_, r) => of(r).arenaBytes), liveBytes: prog.ranks.map((_, r) => of(r).liveBytes), ...(reservedBytes && { reservedBytes }) };
    // A tensor-parallel group's ranks run one program on equal slices: rank 0's layout is each one's.
    prog.ranks.forEach((rank, r) => {
      for (let t = 0; t < plan.settings.tensorParallel; t++) peak[rank + t] = runtime.arenaBytes[r]! + (reservedBytes?.[r] ?? 0);
    });
    return { ...m, runtime };
  });
  return { plan: { ...plan, memory, predicted: { ...plan.predicted, peakMemoryBytes: peak } }, ...(note && { note }) };
}
