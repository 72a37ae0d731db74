// The measured timeline of `fsm viz --trace`: one step of a trace as rows like the predicted ones. Small
// clusters get a row per device; large ones a row per program, drawn from its first rank (replicas run the
// same actions, and a thousand rows would hide the pipeline).
import type { Plan } from "../plan/plan.js";
import { formatSeconds, rankText } from "./format.js";
import { blockFor, lanes } from "./timeline.js";
import type { MeasuredStep } from "./trace.js";
import type { Timeline, TimelineRow } from "./view-types.js";

/** Up to this many devices, every device gets its own measured row. */
export const ROW_PER_DEVICE_LIMIT = 32;

export function measuredTimeline(plan: Plan, m: MeasuredStep): Timeline {
  const perDevice = plan.cluster.devices <= ROW_PER_DEVICE_LIMIT;
  const rows: TimelineRow[] = [];
  for (const program of plan.programs) {
    const devices = perDevice ? program.ranks : [program.ranks[0]!];
    for (const device of devices) {
      const spans = m.spans.filter((s) => s.device === device);
      const block = (s: (typeof spans)[number]) => blockFor(s.name, s.start, s.end, s.note);
      const label = perDevice || program.ranks.length === 1 ? `rank ${device}` : `rank ${device} (of ${rankText(program.ranks)})`;
      rows.push({
        program: program.id,
        device,
        label,
        stages: program.stages,
        lanes: lanes(spans.filter((s) => s.stream === "compute").map(block), spans.filter((s) => s.stream === "comm").map(block), m.stepSeconds),
      });
    }
  }
  return {
    kind: "measured",
    caption: `measured step ${m.step} (of ${rankText(m.steps)}): ${formatSeconds(m.stepSeconds)}`,
    stepSeconds: m.stepSeconds,
    rows,
  };
}
