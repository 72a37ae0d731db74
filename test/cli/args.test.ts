// Whole-number flags: plain decimal digits, at least the minimum, and exact in a JavaScript number; anything
// else is a usage error that names the flag.
import { describe, expect, it } from "vitest";
import { integerFlag, parseArgs, UsageError } from "../../src/cli/args.js";

const value = (text: string | undefined, min: 0 | 1 = 1): number | undefined =>
  integerFlag(parseArgs(text === undefined ? [] : ["--steps", text], [{ name: "steps", value: true }]), "steps", min);

describe("integerFlag", () => {
  it("reads plain whole numbers up to 2^53 − 1, and nothing when the flag is absent", () => {
    expect(value("7")).toBe(7);
    expect(value("9007199254740991")).toBe(Number.MAX_SAFE_INTEGER);
    expect(value("0", 0)).toBe(0);
    expect(value(undefined)).toBeUndefined();
  });

  it("refuses fractions, signs, exponents, zero below the minimum, and values a number cannot hold exactly", () => {
    for (const bad of ["1.5", "-1", "+3", "1e3", "1e400", "0x10", "", " 4", "Infinity"]) {
      expect(() => value(bad), bad).toThrow(UsageError);
      expect(() => value(bad), bad).toThrow(`--steps must be a positive integer, got '${bad}'`);
    }
    expect(() => value("0")).toThrow("--steps must be a positive integer, got '0'");
    expect(() => value("9007199254740992")).toThrow("--steps must be a positive integer of at most 9007199254740991, got '9007199254740992'");
    expect(() => value("99999999999999999999")).toThrow(/of at most 9007199254740991, got '99999999999999999999'/);
  });
});
