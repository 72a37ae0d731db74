// The per-rank listing of a lowered schedule as text (`r1 compute: 1F0 1F1 1B0 …`), and back.
import { actionFromText, formatAction, type Action } from "./action.js";
import { STREAMS, type LoweredSchedule, type ScheduleShape } from "./lowered.js";
import { wire } from "./wire.js";

/**
 * One line per rank and stream; dependencies are not written, they follow from the actions (rules.ts).
 * Neither are a collective's group and bytes, nor the deps of shard actions: a listing round-trips a
 * pipeline, not the shard actions a plan adds (they come back without group, which validation reports).
 */
export function formatListing(s: LoweredSchedule): string {
  const lines: string[] = [];
  s.streams.forEach((st, rank) => {
    for (const stream of STREAMS) {
      lines.push(`r${rank} ${stream}: ${st[stream].map((id) => formatAction(s.actions[id]!.action)).join(" ")}`.trimEnd());
    }
  });
  return lines.join("\n");
}

/**
 * Reads a listing written by formatListing or by hand (tests, bug reports) and wires it; ranks or streams
 * left out are empty. Throws on lines that are not listing lines: the text is program-written, not user input.
 */
export function parseListing(shape: ScheduleShape, text: string): LoweredSchedule {
  const perRank: { compute: Action[]; comm: Action[] }[] = Array.from({ length: shape.ranks }, () => ({ compute: [], comm: [] }));
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") return;
    const m = /^r(\d+) (compute|comm):(.*)$/.exec(line);
    if (!m) throw new Error(`listing line ${i + 1}: expected "r<rank> compute|comm: <actions>", got ${JSON.stringify(line)}`);
    const rank = Number(m[1]);
    const target = perRank[rank];
    if (!target) throw new Error(`listing line ${i + 1}: rank ${rank} is outside 0..${shape.ranks - 1}`);
    target[m[2] as "compute" | "comm"].push(...m[3]!.split(/\s+/).filter((t) => t !== "").map(actionFromText));
  });
  return wire(shape, perRank);
}
