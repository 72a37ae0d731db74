// The measured timeline of `fsm viz --trace`: one step of a trace as rows like the predicted ones. Small
// clusters get a row per device (every rank of a tensor-parallel group too); large ones a row per program,
// drawn from its first rank (replicas run the same actions, and a thousand rows would hide the pipeline).
import type { Plan, PlanProgram } from "../plan/plan.js";
import { formatSeconds, rankText } from "./format.js";
import { tensorDevices } from "./tensor-map.js";
import { blockFor, lanes } from "./timeline.js";
import type { MeasuredStep } from "./trace.js";
import type { Block, Timeline, TimelineRow } from "./view-types.js";

/** Up to this many devices, every device gets its own measured row. */
const ROW_PER_DEVICE_LIMIT = 32;

export function measuredTimeline(plan: Plan, m: MeasuredStep): Timeline {
  const perDevice = plan.cluster.devices <= ROW_PER_DEVICE_LIMIT;
  const devicesOf = (p: PlanProgram) => tensorDevices(p.ranks, plan.settings.tensorParallel);
  const drawnRanks = (p: PlanProgram) => (perDevice ? devicesOf(p) : p.ranks.slice(0, 1));
  // The drawn devices' blocks per stream, in trace order, from one pass over the step's spans.
  const drawn = new Map<number, { compute: (Block | undefined)[]; comm: (Block | undefined)[] }>();
  for (const program of plan.programs) for (const device of drawnRanks(program)) drawn.set(device, { compute: [], comm: [] });
  for (const s of m.spans) drawn.get(s.device)?.[s.stream].push(blockFor(s.name, s.start, s.end, s.note));
  const rows: TimelineRow[] = [];
  for (const program of plan.programs) {
    for (const device of drawnRanks(program)) {
      const { compute, comm } = drawn.get(device)!;
      const label = perDevice || devicesOf(program).length === 1 ? `rank ${device}` : `rank ${device} (of ${rankText(devicesOf(program))})`;
      rows.push({ program: program.id, device, label, stages: program.stages, lanes: lanes(compute, comm, m.stepSeconds) });
    }
  }
  return {
    kind: "measured",
    caption: `measured step ${m.step} (of ${rankText(m.steps)}): ${formatSeconds(m.stepSeconds)}`,
    stepSeconds: m.stepSeconds,
    rows,
  };
}
