// Lowering: SEND/RECV pairs for every cross-rank result, explicit deps, comm streams that cannot deadlock.
import { describe, expect, it } from "vitest";
import { formatAction, p2pAction } from "../../src/schedule/action.js";
import type { ScheduleCosts } from "../../src/schedule/costs.js";
import { formatListing, parseListing } from "../../src/schedule/listing.js";
import { lower } from "../../src/schedule/lower.js";
import type { LoweredSchedule } from "../../src/schedule/lowered.js";
import { buildComputeOrder, type ScheduleSpec } from "../../src/schedule/orders/build.js";
import { oneFOneBOrder } from "../../src/schedule/orders/one-f-one-b.js";
import { validate } from "../../src/schedule/validate.js";
import { rng } from "../support/prng.js";

/** Action id by rank and text. */
function finder(s: LoweredSchedule): (rank: number, text: string) => number | undefined {
  const index = s.streams.map(() => new Map<string, number>());
  for (const a of s.actions) index[a.rank]!.set(formatAction(a.action), a.id);
  return (rank, text) => index[rank]!.get(text);
}

const shapes: ScheduleSpec[] = [
  { schedule: "gpipe", ranks: 4, microBatches: 6, checkpoint: "always" },
  { schedule: "1f1b", ranks: 4, microBatches: 6, checkpoint: "except_last" },
  { schedule: "zero_bubble", ranks: 4, microBatches: 6, checkpoint: "always" },
  { schedule: "interleaved", ranks: 3, microBatches: 6, virtualStages: 3 },
  { schedule: "interleaved", ranks: 1, microBatches: 2, virtualStages: 3 },
];

describe("lowering", () => {
  it("1F1B on 3 ranks: the exact streams", () => {
    expect(formatListing(lower(oneFOneBOrder({ ranks: 3, microBatches: 4 })))).toBe(
      [
        "r0 compute: 0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3",
        "r0 comm: 0SEND_F0@1 0SEND_F1@1 0SEND_F2@1 0RECV_B0@1 0SEND_F3@1 0RECV_B1@1 0RECV_B2@1 0RECV_B3@1",
        "r1 compute: 1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
        "r1 comm: 1RECV_F0@0 1RECV_F1@0 1SEND_F0@2 1RECV_F2@0 1SEND_F1@2 1RECV_B0@2 1SEND_B0@0 1SEND_F2@2 1RECV_B1@2 1RECV_F3@0 1SEND_B1@0 1SEND_F3@2 1RECV_B2@2 1SEND_B2@0 1RECV_B3@2 1SEND_B3@0",
        "r2 compute: 2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3",
        "r2 comm: 2RECV_F0@1 2RECV_F1@1 2SEND_B0@1 2RECV_F2@1 2SEND_B1@1 2RECV_F3@1 2SEND_B2@1 2SEND_B3@1",
      ].join("\n"),
    );
  });

  for (const spec of shapes) {
    it(`${JSON.stringify(spec)}: every dependency is an explicit edge that data flow requires`, () => {
      const s = lower(buildComputeOrder(spec));
      const find = finder(s);
      const expectDep = (rank: number, from: string, to: string): void => {
        const a = find(rank, from);
        const b = find(rank, to);
        expect(a, `${from} on rank ${rank}`).toBeDefined();
        expect(b, `${to} on rank ${rank}`).toBeDefined();
        expect(s.actions[a!]!.deps, `${from} → ${to}`).toContain(b);
      };
      const S = s.stages;
      let transfers = 0;
      for (let st = 0; st < S; st++) {
        const r = s.stageRank[st]!;
        const split = find(r, `${st}I0`) !== undefined;
        const back = split ? "I" : "B";
        for (let mb = 0; mb < s.microBatches; mb++) {
          const ckpt = find(r, `${st}R${mb}`) !== undefined;
          expectDep(r, `${st}${back}${mb}`, `${st}${ckpt ? "R" : "F"}${mb}`);
          if (ckpt) expectDep(r, `${st}R${mb}`, `${st}F${mb}`);
          if (split) expectDep(r, `${st}W${mb}`, `${st}I${mb}`);
          if (st > 0) {
            const q = s.stageRank[st - 1]!;
            if (q === r) expectDep(r, `${st}F${mb}`, `${st - 1}F${mb}`);
            else {
              // Forward: the previous stage's SEND_F after its F, our RECV_F before our F, paired.
              expectDep(r, `${st}F${mb}`, formatAction(p2pAction("RECV_F", st, mb, q)));
              expectDep(q, formatAction(p2pAction("SEND_F", st - 1, mb, r)), `${st - 1}F${mb}`);
              const recv = find(r, formatAction(p2pAction("RECV_F", st, mb, q)))!;
              const send = find(q, formatAction(p2pAction("SEND_F", st - 1, mb, r)))!;
              expect([s.actions[recv]!.match, s.actions[send]!.match]).toEqual([send, recv]);
              // Backward, symmetric: our SEND_B after our backward, their RECV_B before theirs.
              expectDep(r, formatAction(p2pAction("SEND_B", st, mb, q)), `${st}${back}${mb}`);
              expectDep(q, `${st - 1}${back}${mb}`, formatAction(p2pAction("RECV_B", st - 1, mb, r)));
              transfers += 2;
            }
          }
        }
      }
      const p2p = s.actions.filter((a) => a.stream === "comm");
      expect(p2p.length).toBe(2 * transfers);
      expect(p2p.every((a) => a.action.kind.includes("_"))).toBe(true);
      expect(s.actions.filter((a) => a.stream === "compute").every((a) => !a.action.kind.includes("_"))).toBe(true);
      expect(validate(s).ok).toBe(true);
    });
  }

  it("stages on the same rank pass data directly, without transfers", () => {
    const s = lower(buildComputeOrder({ schedule: "interleaved", ranks: 1, microBatches: 2, virtualStages: 3 }));
    expect(s.streams[0]!.comm).toEqual([]);
    const find = finder(s);
    expect(s.actions[find(0, "1F0")!]!.deps).toEqual([find(0, "0F0")]);
    expect(s.actions[find(0, "1B0")!]!.deps).toEqual([find(0, "1F0"), find(0, "2B0")]);
  });

  it("the listing is a faithful text form: parsing it rebuilds the same schedule", () => {
    for (const spec of shapes) {
      const s = lower(buildComputeOrder(spec));
      expect(parseListing(s, formatListing(s))).toEqual(s);
    }
  });

  it("with random costs (zeros included) the comm order still never deadlocks", () => {
    const next = rng(7);
    const bad: string[] = [];
    for (let trial = 0; trial < 60; trial++) {
      const schedule = (["gpipe", "1f1b", "zero_bubble", "interleaved"] as const)[trial % 4]!;
      const ranks = 1 + Math.floor(next() * 6);
      const spec: ScheduleSpec = {
        schedule,
        ranks,
        microBatches: ranks * (1 + Math.floor(next() * 3)),
        checkpoint: (["never", "always", "except_last"] as const)[trial % 3]!,
        ...(schedule === "interleaved" ? { virtualStages: 1 + Math.floor(next() * 3) } : {}),
      };
      const s = lower(buildComputeOrder(spec), { costs: randomCosts(next) });
      // Lowering builds the schedule itself; wiring its listing must give the same one.
      expect(parseListing(s, formatListing(s))).toEqual(s);
      const v = validate(s);
      if (!v.ok) bad.push(`${JSON.stringify(spec)}: ${v.problems[0]!.message}`);
    }
    expect(bad).toEqual([]);
  });

  it("refuses a negative cost", () => {
    const costs = randomCosts(rng(1));
    expect(() => lower(oneFOneBOrder({ ranks: 2, microBatches: 2 }), { costs: { ...costs, forward: () => -1 } })).toThrow(/cost of 0F0 is -1/);
  });
});

/** Per-(kind, stage, mb) durations drawn at random once, a fifth of them zero. */
function randomCosts(next: () => number): ScheduleCosts {
  const memo = new Map<string, number>();
  const pick = (key: string): number => {
    if (!memo.has(key)) memo.set(key, next() < 0.2 ? 0 : next() * 3);
    return memo.get(key)!;
  };
  const t = (kind: string) => (stage: number, mb: number) => pick(`${kind}${stage}:${mb}`);
  return {
    forward: t("F"),
    backward: t("B"),
    backwardInput: t("I"),
    backwardWeight: t("W"),
    recompute: t("R"),
    boundaryBytes: () => 1,
    transfer: (from, to) => pick(`T${from}:${to}`),
    activationBytes: () => 1,
    inputBytes: () => 0,
    weightGradBytes: () => 0.5,
  };
}

