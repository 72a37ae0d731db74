// The native step program (one arena, one instruction list: the native-fused engine) refuses a malformed
// description with an error naming what is wrong — never a crash of the process — with the same slot checks
// as the cluster's devices (js_values.cc: slotOf).
import { describe, expect, it } from "vitest";
import { createNativeProgram } from "../../src/native/binding.js";

const good = {
  arenaBytes: 128,
  slots: [{ shape: [2], dtype: "f32", offset: 0 }, { shape: [2], dtype: "f32", offset: 64 }],
  instructions: [{ op: "fsm_copy", inputs: [0], outputs: [1], attrs: {} }],
};

describe("NativeProgram descriptions", () => {
  it("a well-formed program runs", async () => {
    const p = createNativeProgram(good as never);
    p.set(0, Float32Array.of(1.5, -2));
    await p.run();
    expect(Array.from(p.get(1))).toEqual([1.5, -2]);
  });

  const cases: [string, unknown, RegExp][] = [
    ["a negative arena size", { ...good, arenaBytes: -1 }, /^arenaBytes must be a non-negative integer$/],
    ["slots that are not an array", { ...good, slots: 3 }, /^slots must be an array$/],
    ["a slot that is not an object", { ...good, slots: [7] }, /^slot 0 must be an object$/],
    ["a misaligned offset", { ...good, slots: [good.slots[0], { shape: [2], dtype: "f32", offset: 66 }] }, /^slot 1: offset 66 is not a multiple of 4/],
    ["a fractional offset", { ...good, slots: [good.slots[0], { shape: [2], dtype: "f32", offset: 1.5 }] }, /^slot 1: offset must be a non-negative integer$/],
    ["a slot past the arena", { ...good, slots: [good.slots[0], { shape: [40], dtype: "f32", offset: 64 }] }, /^slot 1 \(bytes 64\.\.224\) lies outside the arena of 128 bytes$/],
    ["instructions that are not an array", { ...good, instructions: {} }, /^instructions must be an array$/],
    ["an op that is not a string", { ...good, instructions: [{ op: 5, inputs: [], outputs: [], attrs: {} }] }, /^instruction 0: op must be a string$/],
    ["inputs that are not an array", { ...good, instructions: [{ op: "fsm_copy", inputs: 0, outputs: [1], attrs: {} }] }, /^instruction 0: inputs must be an array$/],
    ["a negative slot id", { ...good, instructions: [{ op: "fsm_copy", inputs: [-1], outputs: [1], attrs: {} }] }, /^instruction 0: inputs\[0\] must be a non-negative integer$/],
    ["an unknown slot", { ...good, instructions: [{ op: "fsm_copy", inputs: [0], outputs: [9], attrs: {} }] }, /^instruction 0 uses unknown slot 9$/],
  ];
  for (const [name, description, message] of cases) {
    it(`${name}: a clear error`, () => {
      expect(() => createNativeProgram(description as never)).toThrow(message);
    });
  }
});
