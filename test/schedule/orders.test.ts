// Schedule orders: exact small listings, every forward/backward exactly once, warm-up depths, checkpoint modes.
import { describe, expect, it } from "vitest";
import { SCHEDULES, CHECKPOINT_MODES as SETTING_CHECKPOINT_MODES } from "../../src/check/settings-types.js";
import { formatAction } from "../../src/schedule/action.js";
import { buildComputeOrder } from "../../src/schedule/orders/build.js";
import { checkpointStop, withCheckpointing } from "../../src/schedule/orders/checkpoint.js";
import { clockCycles, gpipeOrder } from "../../src/schedule/orders/gpipe.js";
import { interleavedOrder } from "../../src/schedule/orders/interleaved.js";
import { oneFOneBOrder } from "../../src/schedule/orders/one-f-one-b.js";
import { CHECKPOINT_MODES, SCHEDULE_NAMES } from "../../src/schedule/orders/order.js";
import { zeroBubbleOrder } from "../../src/schedule/orders/zero-bubble.js";
import { census, orderLines, scheduleGrid } from "./helpers.js";

describe("order listings", () => {
  it("GPipe: all forwards in clock order, then the backwards in reverse", () => {
    expect(orderLines(gpipeOrder({ ranks: 2, microBatches: 3 }))).toEqual([
      "r0: 0F0 0F1 0F2 0B2 0B1 0B0",
      "r1: 1F0 1F1 1F2 1B2 1B1 1B0",
    ]);
  });

  it("FairScale's clock cycles: partition j runs micro-batch k − j at clock k", () => {
    expect(clockCycles(3, 2)).toEqual([[[0, 0]], [[1, 0], [0, 1]], [[2, 0], [1, 1]], [[2, 1]]]);
    expect(clockCycles(1, 3)).toEqual([[[0, 0]], [[0, 1]], [[0, 2]]]);
    expect(clockCycles(5, 4)).toHaveLength(5 + 4 - 1);
  });

  it("1F1B: p − s − 1 warm-up forwards, then alternate, then drain", () => {
    expect(orderLines(oneFOneBOrder({ ranks: 3, microBatches: 4 }))).toEqual([
      "r0: 0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3",
      "r1: 1F0 1F1 1B0 1F2 1B1 1F3 1B2 1B3",
      "r2: 2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3",
    ]);
  });

  it("ZB-H1: 1F1B's F/I alternation, W deferred by s on rank s", () => {
    expect(orderLines(zeroBubbleOrder({ ranks: 3, microBatches: 4 }))).toEqual([
      "r0: 0F0 0F1 0F2 0I0 0W0 0F3 0I1 0W1 0I2 0W2 0I3 0W3",
      "r1: 1F0 1F1 1I0 1F2 1I1 1W0 1F3 1I2 1W1 1I3 1W2 1W3",
      "r2: 2F0 2I0 2F1 2I1 2F2 2I2 2W0 2F3 2I3 2W1 2W2 2W3",
    ]);
  });

  it("interleaved: Megatron's groups of p micro-batches, chunks reversed for the backward", () => {
    const order = interleavedOrder({ ranks: 2, microBatches: 4, virtualStages: 2 });
    expect(order.stageRank).toEqual([0, 1, 0, 1]);
    expect(orderLines(order)).toEqual([
      "r0: 0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
      "r1: 1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3",
    ]);
  });

  it("interleaved with m = p keeps the warm-up formula (Megatron runs every forward first there)", () => {
    const order = interleavedOrder({ ranks: 2, microBatches: 2, virtualStages: 2 });
    expect(orderLines(order)).toEqual(["r0: 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1", "r1: 1F0 1F1 3F0 3B0 3F1 3B1 1B0 1B1"]);
  });
});

describe("every order over the grid", () => {
  const grid = scheduleGrid().filter((s) => s.ranks <= 8);
  it(`runs each (stage, micro-batch) F and B once (I and W for ZB) on its stage's rank — ${grid.length} shapes`, () => {
    const bad: string[] = [];
    for (const spec of grid) {
      const order = buildComputeOrder({ ...spec, checkpoint: "never" });
      const seen = census(order);
      const backward = spec.schedule === "zero_bubble" ? ["I", "W"] : ["B"];
      let expected = 0;
      for (let s = 0; s < order.stages; s++) {
        for (let mb = 0; mb < order.microBatches; mb++) {
          for (const kind of ["F", ...backward]) {
            expected++;
            const e = seen.get(`${s}${kind}${mb}`);
            if (!e || e.count !== 1 || !e.ranks.has(order.stageRank[s]!)) bad.push(`${JSON.stringify(spec)}: ${s}${kind}${mb} ${e ? `×${e.count} on ${[...e.ranks]}` : "missing"}`);
          }
        }
      }
      const total = order.perRank.reduce((n, l) => n + l.length, 0);
      if (total !== expected) bad.push(`${JSON.stringify(spec)}: ${total} actions, expected ${expected}`);
    }
    expect(bad).toEqual([]);
  });

  it("1F1B and ZB-H1 start rank s with min(p − s − 1, m) warm-up forwards, then one forward before the first backward", () => {
    for (const order of [oneFOneBOrder({ ranks: 6, microBatches: 9 }), zeroBubbleOrder({ ranks: 6, microBatches: 9 }), oneFOneBOrder({ ranks: 6, microBatches: 3 })]) {
      order.perRank.forEach((list, s) => {
        const firstBackward = list.findIndex((a) => a.kind !== "F");
        expect(firstBackward).toBe(Math.min(order.ranks - s, order.microBatches));
      });
    }
  });
});

describe("checkpoint modes (FairScale's checkpoint_stop)", () => {
  it("always = m, except_last = m − 1, never = 0", () => {
    expect(checkpointStop("always", 8)).toBe(8);
    expect(checkpointStop("except_last", 8)).toBe(7);
    expect(checkpointStop("except_last", 1)).toBe(0);
    expect(checkpointStop("never", 8)).toBe(0);
  });

  for (const schedule of SCHEDULE_NAMES) {
    for (const mode of CHECKPOINT_MODES) {
      it(`${schedule}, ${mode}: R(s, mb) right before the backward of exactly the checkpointed micro-batches`, () => {
        const m = 4;
        const order = buildComputeOrder({ schedule, ranks: 2, microBatches: m, checkpoint: mode, ...(schedule === "interleaved" ? { virtualStages: 2 } : {}) });
        const stop = mode === "always" ? m : mode === "except_last" ? m - 1 : 0;
        let rs = 0;
        for (const list of order.perRank) {
          list.forEach((a, i) => {
            if (a.kind === "R") {
              rs++;
              const next = list[i + 1]!;
              expect(["B", "I"]).toContain(next.kind);
              expect([next.stage, next.mb]).toEqual([a.stage, a.mb]);
              expect(a.mb!).toBeLessThan(stop);
            }
            if ((a.kind === "B" || a.kind === "I") && a.mb! < stop) expect(formatAction(list[i - 1]!)).toBe(`${a.stage}R${a.mb}`);
          });
        }
        expect(rs).toBe(order.stages * stop);
      });
    }
  }

  it("except_last on one micro-batch checkpoints nothing, like FairScale", () => {
    const order = oneFOneBOrder({ ranks: 3, microBatches: 1 });
    expect(withCheckpointing(order, "except_last")).toBe(order);
  });
});

describe("option checks", () => {
  it("interleaved needs m to be a multiple of p", () => {
    expect(() => interleavedOrder({ ranks: 4, microBatches: 6, virtualStages: 2 })).toThrow(/multiple of the pipeline ranks.*m=6, p=4/);
  });
  it("only interleaved takes virtual stages", () => {
    expect(() => buildComputeOrder({ schedule: "1f1b", ranks: 4, microBatches: 8, virtualStages: 2 })).toThrow(/needs the interleaved schedule/);
  });
  it("counts are positive integers", () => {
    expect(() => gpipeOrder({ ranks: 0, microBatches: 4 })).toThrow(/ranks must be a positive integer/);
    expect(() => oneFOneBOrder({ ranks: 2, microBatches: 2.5 })).toThrow(/microBatches must be a positive integer/);
  });
  it("names match the .fsm parallel settings", () => {
    expect([...SCHEDULE_NAMES]).toEqual([...SCHEDULES]);
    expect([...CHECKPOINT_MODES]).toEqual([...SETTING_CHECKPOINT_MODES]);
  });
});
