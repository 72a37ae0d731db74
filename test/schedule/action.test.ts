// The action text form: documented examples, rejections, and exact round-trips over random actions.
import { describe, expect, it } from "vitest";
import { ActionIndex } from "../../src/schedule/action-index.js";
import {
  COMPUTE_KINDS,
  P2P_KINDS,
  SHARD_KINDS,
  actionFromText,
  computeAction,
  formatAction,
  makeAction,
  p2pAction,
  parseAction,
  shardAction,
  type Action,
  type ActionKind,
} from "../../src/schedule/action.js";
import { rng } from "../support/prng.js";

describe("action text", () => {
  const examples: [string, Action][] = [
    ["1F3", { kind: "F", stage: 1, mb: 3 }],
    ["1B3", { kind: "B", stage: 1, mb: 3 }],
    ["1I3", { kind: "I", stage: 1, mb: 3 }],
    ["1W3", { kind: "W", stage: 1, mb: 3 }],
    ["1R3", { kind: "R", stage: 1, mb: 3 }],
    ["2SEND_F3@3", { kind: "SEND_F", stage: 2, mb: 3, peer: 3 }],
    ["3RECV_F3@2", { kind: "RECV_F", stage: 3, mb: 3, peer: 2 }],
    ["3SEND_B0@2", { kind: "SEND_B", stage: 3, mb: 0, peer: 2 }],
    ["2RECV_B0@3", { kind: "RECV_B", stage: 2, mb: 0, peer: 3 }],
    ["0ALL_GATHER2u1", { kind: "ALL_GATHER", stage: 0, mb: 2, unit: 1 }],
    ["0REDUCE_SCATTERu7", { kind: "REDUCE_SCATTER", stage: 0, unit: 7 }],
    ["5OPTIMIZER", { kind: "OPTIMIZER", stage: 5 }],
    ["0BROADCASTu4@2", { kind: "BROADCAST", stage: 0, unit: 4, peer: 2 }],
    ["12F1024", { kind: "F", stage: 12, mb: 1024 }],
  ];
  for (const [text, action] of examples) {
    it(`${text} ⇄ ${JSON.stringify(action)}`, () => {
      expect(formatAction(makeAction(action))).toBe(text);
      expect(actionFromText(text)).toStrictEqual(action);
    });
  }

  const rejected: [string, RegExp][] = [
    ["", /not an action/],
    ["F3", /not an action/],
    ["01F3", /not an action/],
    ["1F03", /not an action/],
    ["1X3", /unknown action kind X/],
    ["1F", /F needs mb/],
    ["1F3@2", /F takes no peer/],
    ["1F3u1", /F takes no unit/],
    ["2SEND_F3", /SEND_F needs peer/],
    ["0ALL_GATHER@1", /ALL_GATHER takes no peer/],
    ["0REDUCE", /REDUCE needs peer/],
    ["1f3", /not an action/],
    [" 1F3", /not an action/],
    ["1F99999999999999999", /non-negative integer/],
  ];
  for (const [text, why] of rejected) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      const r = parseAction(text);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.message).toMatch(why);
    });
  }

  it("constructors check their fields and freeze", () => {
    expect(() => computeAction("F", -1, 0)).toThrow(/stage must be a non-negative integer/);
    expect(() => p2pAction("SEND_F", 0, 1.5, 1)).toThrow(/mb must be a non-negative integer/);
    expect(() => makeAction({ kind: "F", stage: 0 })).toThrow(/F needs mb/);
    expect(Object.isFrozen(computeAction("F", 0, 0))).toBe(true);
    expect(shardAction("REDUCE", 1, { unit: 2, peer: 0 })).toStrictEqual({ kind: "REDUCE", stage: 1, unit: 2, peer: 0 });
  });

  /** A random well-formed action of any kind, with fields drawn as the grammar allows. */
  function randomAction(next: () => number): Action {
    const kinds: readonly ActionKind[] = [...COMPUTE_KINDS, ...P2P_KINDS, ...SHARD_KINDS];
    const kind = kinds[Math.floor(next() * kinds.length)]!;
    // Mostly small numbers, sometimes large ones (digit-count edge cases).
    const n = (): number => (next() < 0.8 ? Math.floor(next() * 12) : Math.floor(next() * 2 ** 40));
    const stage = n();
    if ((COMPUTE_KINDS as readonly string[]).includes(kind)) return computeAction(kind as (typeof COMPUTE_KINDS)[number], stage, n());
    if ((P2P_KINDS as readonly string[]).includes(kind)) return p2pAction(kind as (typeof P2P_KINDS)[number], stage, n(), n());
    const fields: { mb?: number; unit?: number; peer?: number } = {};
    if (next() < 0.5) fields.mb = n();
    if (next() < 0.5) fields.unit = n();
    if (kind === "BROADCAST" || kind === "REDUCE") fields.peer = n();
    return shardAction(kind as (typeof SHARD_KINDS)[number], stage, fields);
  }

  it("parse(format(a)) equals a for 20,000 random actions", () => {
    const next = rng(1234);
    const failures: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const a = randomAction(next);
      const text = formatAction(a);
      const back = parseAction(text);
      if (!back.ok) failures.push(`${text}: ${back.message}`);
      else if (JSON.stringify(back.action) !== JSON.stringify(a) || !Object.isFrozen(back.action)) failures.push(`${text} came back as ${JSON.stringify(back.action)}`);
    }
    expect(failures).toEqual([]);
  });

  it("format(parse(t)) equals t for every accepted random string (the text form is canonical)", () => {
    const next = rng(99);
    const alphabet = ["0", "1", "2", "9", "F", "B", "I", "W", "R", "SEND_F", "RECV_B", "ALL_REDUCE", "BROADCAST", "u", "@", "_", "X"];
    let accepted = 0;
    const failures: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const len = 1 + Math.floor(next() * 6);
      let t = "";
      for (let k = 0; k < len; k++) t += alphabet[Math.floor(next() * alphabet.length)]!;
      const r = parseAction(t);
      if (r.ok) {
        accepted++;
        if (formatAction(r.action) !== t) failures.push(`${t} → ${formatAction(r.action)}`);
      }
    }
    expect(failures).toEqual([]);
    expect(accepted).toBeGreaterThan(100);
  });
});

describe("ActionIndex", () => {
  // A small shape uses the dense table; one with absurd counts (a damaged schedule's) only the maps.
  for (const shape of [{ ranks: 4, stages: 4, microBatches: 4 }, { ranks: 4, stages: 4, microBatches: 2 ** 40 }]) {
    it(`keeps the first of equal actions per rank and tells ranks and peers apart (m = ${shape.microBatches})`, () => {
      const index = new ActionIndex(shape);
      expect(index.add(1, actionFromText("1F2"), 10)).toBe(true);
      expect(index.add(1, actionFromText("1F2"), 11)).toBe(false);
      expect(index.add(2, actionFromText("1F2"), 12)).toBe(true);
      expect(index.add(2, actionFromText("1F2"), 13)).toBe(false);
      expect(index.add(1, actionFromText("1SEND_F2@2"), 14)).toBe(true);
      expect(index.add(1, actionFromText("1SEND_F2@3"), 15)).toBe(true);
      expect(index.add(0, actionFromText("1SEND_F2@3"), 16)).toBe(true);
      expect(index.add(9, actionFromText("1F3"), 17)).toBe(false);
      expect(index.add(1, actionFromText("1SEND_F3@9"), 18)).toBe(false);
      expect(index.add(1, actionFromText("1ALL_REDUCE"), 19)).toBe(false);
      expect([index.find(1, "F", 1, 2), index.find(2, "F", 1, 2), index.find(3, "F", 1, 2)]).toEqual([10, 12, undefined]);
      expect([index.find(1, "SEND_F", 1, 2, 2), index.find(1, "SEND_F", 1, 2, 3), index.find(0, "SEND_F", 1, 2, 3), index.find(1, "SEND_F", 1, 2)]).toEqual([14, 15, 16, undefined]);
      expect([index.has(1, "F", 1, 2), index.has(1, "B", 1, 2), index.find(1, "F", 7, 2)]).toEqual([true, false, undefined]);
    });
  }
});
