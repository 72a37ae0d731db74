// A number literal denotes exactly the number it spells, or is refused (src/parse/number-literal.ts).
import { describe, expect, it } from "vitest";
import { literalValue } from "../../src/parse/number-literal.js";

describe("number literals", () => {
  it("read ints, floats and separators", () => {
    expect(literalValue("1_000")).toEqual({ value: 1000, isInt: true });
    expect(literalValue("3e-4")).toEqual({ value: 3e-4, isInt: false });
    expect(literalValue("9007199254740991")).toEqual({ value: Number.MAX_SAFE_INTEGER, isInt: true });
    expect(literalValue("0")).toEqual({ value: 0, isInt: true });
    expect(literalValue("0.0e5")).toEqual({ value: 0, isInt: false });
  });

  it("refuse integers past 2^53 - 1, overflow and underflow", () => {
    expect(literalValue("9007199254740992")).toMatchObject({ problem: expect.stringMatching(/beyond 2\^53 - 1/) });
    expect(literalValue("9007199254740993")).toMatchObject({ problem: expect.stringMatching(/'9007199254740993'/) });
    expect(literalValue("1e999")).toMatchObject({ problem: expect.stringMatching(/out of range/) });
    expect(literalValue("1e-400")).toMatchObject({ problem: expect.stringMatching(/rounds to 0/) });
    expect(literalValue("9".repeat(400))).toMatchObject({ problem: expect.stringMatching(/^number literal '9{24}…' is out of range/) });
  });
});
