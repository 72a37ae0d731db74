// Models too large for the JavaScript heap are refused up front with the heap they need, not left to run
// V8 out of memory.
import { describe, expect, it } from "vitest";
import { CompileError } from "../../src/compile/errors.js";
import { checkHeapRoom } from "../../src/compile/heap-room.js";

describe("checkHeapRoom", () => {
  it("lets a model through when the heap holds its estimate", () => {
    expect(() => checkHeapRoom("gpt_tiny", 40_000, 4 * 2 ** 30)).not.toThrow();
  });

  it("refuses one that cannot fit, saying what it needs and how to give it", () => {
    const refuse = () => checkHeapRoom("gpt_tiny", 800_000, 4 * 2 ** 30);
    expect(refuse).toThrow(CompileError);
    expect(refuse).toThrow(/model gpt_tiny has 800,000 forward ops: compiling it needs about 16\.8 GiB of JavaScript heap and this process has 4\.0 GiB; give node more \(NODE_OPTIONS=--max-old-space-size=21504\)/);
  });
});
