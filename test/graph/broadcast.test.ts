// NumPy broadcasting over symbolic dims: right-aligned, equal dims or an exact 1 combine.
import { describe, expect, it } from "vitest";
import { dim, dimMul, shapeToString, type Dim } from "../../src/graph/dim.js";
import { broadcastShapes } from "../../src/graph/ops/shape-rules.js";
import { B, S } from "./helpers.js";

const sh = (...ds: (Dim | number)[]): Dim[] => ds.map((d) => (typeof d === "number" ? dim(d) : d));
const BS = dimMul(B, S);

describe("broadcastShapes", () => {
  const table: [Dim[], Dim[], string | undefined][] = [
    [sh(B, S, 768), sh(B, S, 768), "[B, S, 768]"],
    [sh(B, S, 768), sh(768), "[B, S, 768]"],
    [sh(768), sh(B, S, 768), "[B, S, 768]"],
    [sh(B, S, 768), sh(S, 768), "[B, S, 768]"],
    [sh(B, 1, 768), sh(S, 1), "[B, S, 768]"],
    [sh(1), sh(B, S), "[B, S]"],
    [sh(), sh(B, 3), "[B, 3]"],
    [sh(), sh(), "[]"],
    [sh(1, 1), sh(1), "[1, 1]"],
    [sh(B, 1), sh(1, S), "[B, S]"],
    [sh(BS, 4), sh(BS, 1), "[B*S, 4]"],
    [sh(B, S, 768), sh(S, 512), undefined],
    [sh(B, 4), sh(S, 4), undefined],
    [sh(3), sh(4), undefined],
    [sh(2, 3), sh(3, 3), undefined],
    [sh(BS), sh(B), undefined],
  ];
  for (const [a, b, want] of table) {
    it(`${shapeToString(a)} with ${shapeToString(b)} → ${want ?? "error"}`, () => {
      const got = broadcastShapes(a, b);
      expect(got && shapeToString(got)).toBe(want);
      // Broadcasting is symmetric.
      const rev = broadcastShapes(b, a);
      expect(rev && shapeToString(rev)).toBe(want);
    });
  }
});
