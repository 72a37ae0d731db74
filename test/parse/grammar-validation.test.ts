// The grammar passes chevrotain's own validations (no ambiguous alternatives, left recursion, duplicate or
// unreachable rules), which every fsm run skips (src/parse/parser.ts): they are checked here, once.
import { describe, expect, it } from "vitest";
import { FsmParser } from "../../src/parse/parser.js";

describe("the parser's grammar", () => {
  it("passes chevrotain's validations", () => {
    expect(() => new FsmParser({ validate: true })).not.toThrow();
  });
});
