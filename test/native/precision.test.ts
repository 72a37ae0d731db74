// Mixed precision in the native addon: fsm_cast between f32 and bf16/f16 (round to nearest even, NaN, ±Inf,
// overflow, f16 subnormals) against hand-computed bit patterns and an independent decoding of every 16-bit
// pattern; fsm_scale_by and fsm_nonfinite; guarded cluster instructions skipped while their guard is nonzero;
// and 16-bit slots (set/get as raw bits in a Uint16Array, casts inside multi-instruction cluster programs).
import { describe, expect, it } from "vitest";
import {
  createNativeCluster,
  nativeFailure,
  runNativeKernel,
  type NativeAttrs,
  type NativeClusterDevice,
  type NativeClusterInstruction,
  type NativeDType,
} from "../../src/native/binding.js";
import { rng } from "../support/prng.js";

const BYTES: Record<NativeDType, number> = { f32: 4, i32: 4, bf16: 2, f16: 2 };

type SlotSpec = { shape: number[]; dtype?: NativeDType };

// Slots laid out one after another, each 64-byte aligned.
function device(specs: readonly SlotSpec[], instructions: readonly NativeClusterInstruction[]): NativeClusterDevice {
  let offset = 0;
  const slots = specs.map((s) => {
    const dtype = s.dtype ?? "f32";
    const slot = { shape: s.shape, dtype, offset };
    offset += Math.ceil((s.shape.reduce((a, b) => a * b, 1) * BYTES[dtype]) / 64) * 64;
    return slot;
  });
  return { arenaBytes: offset, slots, instructions };
}

function ins(op: string, inputs: number[], outputs: number[], extra: Partial<NativeClusterInstruction> = {}, attrs: NativeAttrs = {}): NativeClusterInstruction {
  return { stream: 0, op, inputs, outputs, attrs, waits: [], ...extra };
}

/** f32 values from their bit patterns. */
function fromBits(...bits: number[]): Float32Array {
  return new Float32Array(new Uint32Array(bits).buffer);
}

function bitsOf(a: Float32Array): number[] {
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
}

function cast(data: Float32Array | Uint16Array, from: NativeDType, to: NativeDType): Float32Array | Uint16Array {
  const out = runNativeKernel("fsm_cast", [{ data, shape: [data.length], dtype: from }], {}, [{ shape: [data.length], dtype: to }])[0]!;
  return out as Float32Array | Uint16Array;
}

const hex = (xs: ArrayLike<number>): string[] => Array.from(xs, (x) => "0x" + x.toString(16).toUpperCase().padStart(4, "0"));
const allPatterns = (): Uint16Array => Uint16Array.from({ length: 65536 }, (_, i) => i);

// An f16 pattern decoded from its definition: (-1)^s · 2^(e-15) · (1 + m/1024), subnormals 2^-14 · m/1024.
function decodeF16(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0x1f) return m === 0 ? sign * Infinity : NaN;
  if (e === 0) return sign * m * 2 ** -24;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}

const isNaN16 = (exponentMask: number, h: number): boolean => (h & exponentMask) === exponentMask && (h & ~exponentMask & 0x7fff) !== 0;
const BF16_EXP = 0x7f80;
const F16_EXP = 0x7c00;

describe("fsm_cast", () => {
  it("f32 → bf16 rounds to nearest even and keeps NaN, ±Inf and signs", () => {
    const x = new Float32Array([
      1.0, // 0x3F80
      -2.0, // 0xC000
      1 + 2 ** -8, // halfway between 1.0 (0x3F80, even) and 1.0078125: ties to even
      1 + 3 * 2 ** -9, // above halfway: rounds up
      1 + 3 * 2 ** -8, // halfway between 0x3F81 (odd) and 0x3F82: ties to even, up
      Infinity,
      -Infinity,
      3.4028234663852886e38, // the largest f32 rounds past the largest bf16: +Inf
      -0,
      2 ** -130, // an f32 subnormal (bits 0x00080000): bf16 keeps f32's exponent range, so its top bits survive
    ]);
    const y = cast(x, "f32", "bf16") as Uint16Array;
    expect(y).toBeInstanceOf(Uint16Array);
    expect(hex(y)).toEqual(hex([0x3f80, 0xc000, 0x3f80, 0x3f81, 0x3f82, 0x7f80, 0xff80, 0x7f80, 0x8000, 0x0008]));
  });

  it("f32 → bf16 turns every NaN (quiet or signaling, either sign) into a quiet NaN of the same sign", () => {
    const y = cast(fromBits(0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff), "f32", "bf16") as Uint16Array;
    for (const h of y) {
      expect(isNaN16(BF16_EXP, h), hex([h])[0]).toBe(true);
      expect(h & 0x0040, "quiet bit").toBe(0x0040);
    }
    expect(Array.from(y, (h) => h >> 15)).toEqual([0, 1, 0, 1, 0]);
  });

  it("bf16 → f32 is exact for all 65536 patterns (NaN stays NaN)", () => {
    const all = allPatterns();
    const y = cast(all, "bf16", "f32") as Float32Array;
    expect(y).toBeInstanceOf(Float32Array);
    const got = bitsOf(y);
    let nans = 0;
    for (let h = 0; h < 65536; h++) {
      if (isNaN16(BF16_EXP, h)) {
        nans++;
        expect(Number.isNaN(y[h]!)).toBe(true);
        expect(got[h]! >>> 31).toBe(h >> 15);
      } else if (got[h] !== h * 65536) {
        expect(hex([h])[0] + " → 0x" + got[h]!.toString(16)).toBe("exact");
      }
    }
    expect(nans).toBe(2 * 127);
    // And back: every non-NaN bf16 survives f32 → bf16 unchanged.
    const back = cast(y, "f32", "bf16") as Uint16Array;
    for (let h = 0; h < 65536; h++) if (!isNaN16(BF16_EXP, h) && back[h] !== h) expect(hex([h, back[h]!])).toBe("a round trip");
  });

  it("f32 → f16 rounds to nearest even, overflows to ±Inf from 65520, and has subnormals", () => {
    const x = new Float32Array([
      1.0, // 0x3C00
      65504, // the largest f16: 0x7BFF
      65519.99609375, // just below halfway to 65536: still 0x7BFF
      65520, // halfway past the largest: ties to even, 65536 overflows to Inf
      -65520,
      Infinity,
      2 ** -14, // the smallest normal: 0x0400
      2 ** -24, // the smallest subnormal: 0x0001
      2 ** -25, // halfway between 0 and 2^-24: ties to even (0)
      3 * 2 ** -26, // above halfway: 0x0001
      2 ** -26, // underflows to +0
      -(2 ** -26), // ... and to -0
      -0, // 0x8000
      1 + 2 ** -11, // halfway between 1.0 (0x3C00, even) and 1 + 2^-10: ties to even
      1 + 3 * 2 ** -12, // above halfway: 0x3C01
      1 + 3 * 2 ** -11, // halfway between 0x3C01 (odd) and 0x3C02: ties to even, up
      2 ** -14 - 2 ** -25, // halfway between the largest subnormal (0x03FF, odd) and 2^-14: rounds up to 0x0400
      3 * 2 ** -24 + 2 ** -25, // halfway between 0x0003 (odd) and 0x0004: 0x0004
      5 * 2 ** -24 + 2 ** -25, // halfway between 0x0005 (odd) and 0x0006: 0x0006
      4 * 2 ** -24 + 2 ** -25, // halfway between 0x0004 (even) and 0x0005: 0x0004
      -1.5, // 0xBE00
    ]);
    const y = cast(x, "f32", "f16") as Uint16Array;
    expect(hex(y)).toEqual(hex([
      0x3c00, 0x7bff, 0x7bff, 0x7c00, 0xfc00, 0x7c00, 0x0400, 0x0001, 0x0000, 0x0001, 0x0000, 0x8000, 0x8000,
      0x3c00, 0x3c01, 0x3c02, 0x0400, 0x0004, 0x0006, 0x0004, 0xbe00,
    ]));
  });

  it("f32 → f16 turns every NaN into a quiet NaN of the same sign", () => {
    const y = cast(fromBits(0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff), "f32", "f16") as Uint16Array;
    for (const h of y) {
      expect(isNaN16(F16_EXP, h), hex([h])[0]).toBe(true);
      expect(h & 0x0200, "quiet bit").toBe(0x0200);
    }
    expect(Array.from(y, (h) => h >> 15)).toEqual([0, 1, 0, 1, 0]);
  });

  it("f16 → f32 is exact for all 65536 patterns (against a decoding from the definition), and f32 → f16 inverts it", () => {
    const all = allPatterns();
    const y = cast(all, "f16", "f32") as Float32Array;
    let nans = 0;
    for (let h = 0; h < 65536; h++) {
      const want = decodeF16(h);
      if (Number.isNaN(want)) {
        nans++;
        expect(Number.isNaN(y[h]!)).toBe(true);
      } else if (!Object.is(y[h], want)) {
        expect(`${hex([h])[0]} → ${y[h]}`).toBe(`${want}`);
      }
    }
    expect(nans).toBe(2 * 1023);
    const back = cast(y, "f32", "f16") as Uint16Array;
    for (let h = 0; h < 65536; h++) if (!isNaN16(F16_EXP, h) && back[h] !== h) expect(hex([h, back[h]!])).toBe("a round trip");
  });

  it("f16 casts give the same bits 8 at a time (F16C where the CPU has it) as one at a time (a cast of fewer than 8), NaN payloads included", () => {
    const next = rng(11);
    // NaNs of every payload size and both signs, infinities, ties, subnormals of both widths, random values.
    const specials = [0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff, 0x7fa02001, 0xffb00000, 0x7f800000, 0xff800000, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001, 0x387fe000, 0x00000001, 0x80000000];
    const u = Uint32Array.from({ length: 4096 }, (_, i) => (i < specials.length ? specials[i]! : Math.floor(next() * 2 ** 32)) >>> 0);
    const x = new Float32Array(u.buffer);
    const wide = cast(x, "f32", "f16") as Uint16Array;
    const wideBack = new Uint32Array((cast(wide, "f16", "f32") as Float32Array).buffer);
    for (let i = 0; i < x.length; i += 7) {
      const one = cast(x.subarray(i, i + 7), "f32", "f16") as Uint16Array;
      expect(hex(one), `f32 → f16 at ${i}`).toEqual(hex(wide.subarray(i, i + 7)));
      const back = new Uint32Array((cast(one, "f16", "f32") as Float32Array).buffer);
      expect(Array.from(back), `f16 → f32 at ${i}`).toEqual(Array.from(wideBack.subarray(i, i + 7)));
    }
    // A NaN widens to sign | exponent ones | quiet bit | its 10 payload bits moved up 13.
    for (let i = 0; i < 4; i++) expect(wideBack[i]).toBe((((u[i]! & 0x80000000) | 0x7fc00000 | (u[i]! & 0x007fe000)) >>> 0));
  });

  it("random f32 values round as a reference in double arithmetic does (bf16 and f16)", () => {
    // Random bit patterns whose exponents cover f16's range and beyond on both sides, plus f32 subnormals.
    const next = rng(7);
    const n = 200_000;
    const u = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const exponent = i % 10 === 0 ? 0 : 95 + Math.floor(next() * 60); // 2^-32 .. 2^27, and subnormals
      u[i] = ((next() < 0.5 ? 0x80000000 : 0) | (exponent << 23) | Math.floor(next() * 0x800000)) >>> 0;
    }
    const x = new Float32Array(u.buffer);
    // Round |x| to a multiple of ulp, ties to even; exact in double (x has 24 significant bits).
    const roundTo = (a: number, ulp: number): number => {
      const q = a / ulp;
      const f = Math.floor(q);
      return (q - f > 0.5 || (q - f === 0.5 && f % 2 === 1) ? f + 1 : f) * ulp;
    };
    const exponentOf = (i: number): number => ((u[i]! >>> 23) & 0xff) - 127; // -127 for subnormals and zero
    const f16Pattern = new Map<number, number>();
    for (let h = 0; h < 0x7c00; h++) f16Pattern.set(decodeF16(h), h);
    const bf = cast(x, "f32", "bf16") as Uint16Array;
    const hf = cast(x, "f32", "f16") as Uint16Array;
    const sign16 = (i: number): number => (u[i]! >>> 16) & 0x8000;
    for (let i = 0; i < n; i++) {
      const a = Math.abs(x[i]!);
      const b = roundTo(a, 2 ** (Math.max(exponentOf(i), -126) - 7)); // bf16: 8 significant bits, f32's range
      const wantBf = sign16(i) | (new Uint32Array(new Float32Array([b]).buffer)[0]! >>> 16);
      const h = roundTo(a, 2 ** (Math.max(exponentOf(i), -14) - 10)); // f16: 11 significant bits, subnormals below 2^-14
      const wantHf = sign16(i) | (h >= 65536 ? 0x7c00 : f16Pattern.get(h)!);
      if (bf[i] !== wantBf || hf[i] !== wantHf) expect(`${x[i]}: bf16 ${hex([bf[i]!])}, f16 ${hex([hf[i]!])}`).toBe(`bf16 ${hex([wantBf])}, f16 ${hex([wantHf])}`);
    }
  });

  it("copies within one dtype, and refuses conversions it does not have", () => {
    const bits = new Uint16Array([0x3f80, 0xffff, 0x0001]);
    expect(Array.from(cast(bits, "bf16", "bf16"))).toEqual([0x3f80, 0xffff, 0x0001]);
    expect(Array.from(cast(new Float32Array([1.5, -0]), "f32", "f32"))).toEqual([1.5, -0]);
    expect(() => cast(bits, "bf16", "f16")).toThrow(/fsm_cast: cannot convert bf16 to f16/);
    expect(() => runNativeKernel("fsm_cast", [{ data: new Int32Array(2), shape: [2] }], {}, [{ shape: [2], dtype: "bf16" }])).toThrow(/cannot convert i32 to bf16/);
    expect(() => runNativeKernel("fsm_cast", [{ data: new Float32Array(2), shape: [2] }], {}, [{ shape: [3], dtype: "bf16" }])).toThrow(/differ in size/);
  });

  it("runKernel needs a dtype for a Uint16Array operand, and one that matches any other array", () => {
    const out = [{ shape: [1], dtype: "f32" as const }];
    expect(() => runNativeKernel("fsm_cast", [{ data: new Uint16Array(1), shape: [1] }], {}, out)).toThrow(/input 0: a Uint16Array operand needs dtype "bf16" or "f16"/);
    expect(() => runNativeKernel("fsm_cast", [{ data: new Uint16Array(1), shape: [1], dtype: "f32" }], {}, out)).toThrow(/needs dtype "bf16" or "f16"/);
    expect(() => runNativeKernel("fsm_cast", [{ data: new Float32Array(1), shape: [1], dtype: "bf16" }], {}, out)).toThrow(/input 0: dtype "bf16" does not match its data/);
    expect(() => runNativeKernel("fsm_cast", [{ data: new Float32Array(1), shape: [1] }], {}, [{ shape: [1], dtype: "f64" as "f32" }])).toThrow(/output 0: dtype must be "f32", "i32", "bf16" or "f16"/);
  });
});

describe("fsm_scale_by", () => {
  const scaleBy = (x: number[], s: number, attrs: NativeAttrs = {}): number[] =>
    Array.from(runNativeKernel("fsm_scale_by", [{ data: new Float32Array(x), shape: [x.length] }, { data: new Float32Array([s]), shape: [] }], attrs, [{ shape: [x.length], dtype: "f32" }])[0]!);

  it("multiplies by the scalar and attrs.scale (default 1), rounding once to f32", () => {
    expect(scaleBy([1, 2, -3], 0.5)).toEqual([0.5, 1, -1.5]);
    expect(scaleBy([1, 2, -3], 0.5, { scale: 4 })).toEqual([2, 4, -6]);
    const third = Math.fround(1 / 3);
    expect(scaleBy([third], 3)).toEqual([Math.fround(third * 3)]); // 1.0000000298 in double, 1 in f32
    expect(scaleBy([65504, 1], 1 / 65536)).toEqual([65504 / 65536, 2 ** -16]); // a loss scale undone exactly
    expect(scaleBy([1], Infinity)).toEqual([Infinity]);
  });

  it("checks its operands", () => {
    expect(() => runNativeKernel("fsm_scale_by", [{ data: new Float32Array(2), shape: [2] }, { data: new Float32Array(2), shape: [2] }], {}, [{ shape: [2], dtype: "f32" }])).toThrow(/s must hold one element/);
    expect(() => runNativeKernel("fsm_scale_by", [{ data: new Float32Array(2), shape: [2] }, { data: new Float32Array(1), shape: [1] }], {}, [{ shape: [3], dtype: "f32" }])).toThrow(/x and y differ in size/);
  });

  it("works in place inside a cluster (x is y, inPlace), twice", async () => {
    // Slots: 0 x[4], 1 s (scalar).
    const c = createNativeCluster({ devices: [device([{ shape: [4] }, { shape: [] }], [ins("fsm_scale_by", [0, 1], [0], { inPlace: true }, { scale: 2 })])] });
    c.set(0, 0, new Float32Array([1, -2, 3, 0.25]));
    c.set(0, 1, new Float32Array([0.25]));
    await c.run();
    expect(Array.from(c.get(0, 0))).toEqual([0.5, -1, 1.5, 0.125]);
    await c.run();
    expect(Array.from(c.get(0, 0))).toEqual([0.25, -0.5, 0.75, 0.0625]);
  });
});

describe("fsm_nonfinite", () => {
  const flag = (...inputs: number[][]): number =>
    runNativeKernel("fsm_nonfinite", inputs.map((x) => ({ data: new Float32Array(x), shape: [x.length] })), {}, [{ shape: [], dtype: "f32" }])[0]![0]!;

  it("is 1 when any element of any input is NaN or ±Inf, else 0", () => {
    expect(flag([1, -2, 3.4e38], [0, -0, 1e-45])).toBe(0);
    expect(flag([1, NaN, 3], [4, 5])).toBe(1);
    expect(flag([1, 2, 3], [4, Infinity])).toBe(1);
    expect(flag([1, 2, 3], [-Infinity, 5])).toBe(1);
    expect(flag()).toBe(0);
    expect(flag([], [7])).toBe(0);
  });
});

describe("guarded instructions", () => {
  // Slots: 0 src[3], 1 dst[3], 2 guard (f32 scalar).
  const guarded = () => createNativeCluster({ devices: [device([{ shape: [3] }, { shape: [3] }, { shape: [1] }], [ins("fsm_copy", [0], [1], { guard: 2 })])] });

  it("runs while the guard is 0 and is skipped (destination unchanged) while it is nonzero, across runs", async () => {
    const c = guarded();
    c.set(0, 0, new Float32Array([1, 2, 3]));
    c.set(0, 1, new Float32Array([9, 9, 9]));
    c.set(0, 2, new Float32Array([0]));
    await c.run();
    expect(Array.from(c.get(0, 1))).toEqual([1, 2, 3]);
    c.set(0, 0, new Float32Array([4, 5, 6]));
    c.set(0, 2, new Float32Array([1]));
    await c.run(true);
    expect(Array.from(c.get(0, 1))).toEqual([1, 2, 3]); // skipped: not even zeroed
    const t = c.timings(0);
    expect(t[0]).toBe(t[1]); // traced with start = end
    c.set(0, 2, new Float32Array([NaN])); // NaN is nonzero
    await c.run();
    expect(Array.from(c.get(0, 1))).toEqual([1, 2, 3]);
    c.set(0, 2, new Float32Array([-0])); // -0 is zero
    await c.run();
    expect(Array.from(c.get(0, 1))).toEqual([4, 5, 6]);
  });

  it("reads a guard an earlier instruction wrote: an update skipped when its gradient is not finite", async () => {
    // Slots: 0 grad[2], 1 param[2], 2 found (scalar); 0: found = nonfinite(grad); 1: param += grad unless found.
    const c = createNativeCluster({
      devices: [device([{ shape: [2] }, { shape: [2] }, { shape: [] }], [
        ins("fsm_nonfinite", [0], [2]),
        ins("fsm_add_inplace", [1, 0], [1], { guard: 2, waits: [0] }),
      ])],
    });
    c.set(0, 1, new Float32Array([10, 20]));
    c.set(0, 0, new Float32Array([1, 2]));
    await c.run();
    expect(Array.from(c.get(0, 1))).toEqual([11, 22]);
    c.set(0, 0, new Float32Array([1, Infinity]));
    await c.run();
    expect(Array.from(c.get(0, 1))).toEqual([11, 22]);
    expect(Array.from(c.get(0, 2))).toEqual([1]);
    c.set(0, 0, new Float32Array([-1, -2]));
    await c.run();
    expect(Array.from(c.get(0, 1))).toEqual([10, 20]);
  });

  describe("construction errors", () => {
    const make = (guard: number, specs: SlotSpec[] = [{ shape: [3] }, { shape: [3] }, { shape: [2] }, { shape: [], dtype: "i32" }, { shape: [1], dtype: "bf16" }]) =>
      () => createNativeCluster({ devices: [device(specs, [ins("fsm_copy", [0], [1]), ins("fsm_copy", [0], [1], { guard })])] });
    const at = (instruction: number, op: string) => ({ kind: "description", device: 0, localDevice: 0, instruction, op });
    // [name, build, where, the root cause (the failure's message, without the location)]
    const cases: [string, () => unknown, object, RegExp][] = [
      ["an f32 slot of two elements", make(2), at(1, "fsm_copy"), /^guard slot 2 must be an f32 scalar \(one element\), not f32 with 2 elements$/],
      ["an i32 scalar", make(3), at(1, "fsm_copy"), /^guard slot 3 must be an f32 scalar \(one element\), not i32 with 1 elements$/],
      ["a bf16 scalar", make(4), at(1, "fsm_copy"), /^guard slot 4 must be an f32 scalar/],
      ["a slot that does not exist", make(5), at(1, "fsm_copy"), /^guard slot 5 does not exist$/],
      ["a slot id that is not an integer", make(0.5), at(1, "fsm_copy"), /^guard must be a non-negative integer$/],
      ["a slot the instruction writes", () => createNativeCluster({ devices: [device([{ shape: [1] }, { shape: [1] }], [ins("fsm_copy", [0], [1], { guard: 1 })])] }),
        at(0, "fsm_copy"), /^guard slot 1 shares bytes with output 0 \(slot 1\): the guard is only read$/],
      ["a slot whose bytes an output's view covers", () => createNativeCluster({
        devices: [{ arenaBytes: 64, slots: [{ shape: [4], dtype: "f32", offset: 0 }, { shape: [1], dtype: "f32", offset: 8 }, { shape: [4], dtype: "f32", offset: 16 }], instructions: [ins("fsm_copy", [2], [0], { guard: 1 })] }],
      }), at(0, "fsm_copy"), /^guard slot 1 shares bytes with output 0 \(slot 0\)/],
      ["a communication op", () => createNativeCluster({ devices: [device([{ shape: [2] }, { shape: [] }], [{ ...ins("comm.allReduce", [0], [0], { guard: 1 }, { group: [0] }), stream: 1 }])] }),
        at(0, "comm.allReduce"), /^only kernel instructions can have a guard$/],
    ];
    for (const [name, build, where, message] of cases) {
      it(name, () => {
        let failure;
        try {
          build();
        } catch (e) {
          failure = nativeFailure(e);
        }
        expect(failure).toMatchObject(where);
        expect(failure!.message).toMatch(message);
      });
    }
    it("keeps the human line", () => {
      expect(make(2)).toThrow(/^device 0 instruction 1 \(fsm_copy\): guard slot 2 must be an f32 scalar \(one element\), not f32 with 2 elements$/);
    });
  });
});

describe("16-bit slots", () => {
  it("set and get a bf16 and an f16 slot as raw bits in a Uint16Array", () => {
    // Slots: 0 bf16[5], 1 f16[3] at offset 64, 2 f16[2] at offset 74 (a multiple of 2 is enough for 16-bit).
    const c = createNativeCluster({
      devices: [{ arenaBytes: 128, slots: [{ shape: [5], dtype: "bf16", offset: 0 }, { shape: [3], dtype: "f16", offset: 64 }, { shape: [2], dtype: "f16", offset: 74 }], instructions: [] }],
    });
    const a = new Uint16Array([0x3f80, 0xc000, 0x7fc0, 0xffff, 0x0001]);
    const b = new Uint16Array([0x3c00, 0x7bff, 0x8001]);
    const d = new Uint16Array([0xabcd, 0x1234]);
    c.set(0, 0, a);
    c.set(0, 1, b);
    c.set(0, 2, d);
    const [ga, gb, gd] = [c.get(0, 0), c.get(0, 1), c.get(0, 2)];
    expect(ga).toBeInstanceOf(Uint16Array);
    expect(Array.from(ga)).toEqual(Array.from(a));
    expect(Array.from(gb)).toEqual(Array.from(b));
    expect(Array.from(gd)).toEqual(Array.from(d));
    expect(() => c.set(0, 0, new Float32Array(5))).toThrow(/set\(device, slot, data\): the data's element type does not match the slot's \(bf16, a Uint16Array\)/);
    expect(() => c.set(0, 1, new Uint16Array(4))).toThrow(/the data's length does not match the slot's/);
  });

  it("checks 16-bit slots' dtype, alignment and extent", () => {
    const one = (slot: { shape: number[]; dtype: NativeDType; offset: number }, arenaBytes = 64) => () => createNativeCluster({ devices: [{ arenaBytes, slots: [slot], instructions: [] }] });
    expect(one({ shape: [2], dtype: "bf16", offset: 1 })).toThrow(/^device 0 slot 0: offset 1 is not a multiple of 2 \(the size of a bf16 element\)$/);
    expect(one({ shape: [2], dtype: "f32", offset: 2 })).toThrow(/offset 2 is not a multiple of 4/);
    expect(one({ shape: [3], dtype: "f16", offset: 58 })).not.toThrow(); // bytes 58..64: exactly fits
    expect(one({ shape: [3], dtype: "f16", offset: 60 })).toThrow(/^device 0 slot 0 \(bytes 60\.\.66\) lies outside the arena of 64 bytes$/);
    expect(one({ shape: [1], dtype: "f64" as "f32", offset: 0 })).toThrow(/^device 0 slot 0: dtype must be "f32", "i32", "bf16" or "f16"$/);
    // Communication stays f32-only: 16-bit data moves through an f32 view of half the count.
    expect(() => createNativeCluster({ devices: [device([{ shape: [4], dtype: "bf16" }], [{ ...ins("comm.allReduce", [0], [0], {}, { group: [0] }), stream: 1 }])] }))
      .toThrow(/communication ops take f32 slots only/);
  });

  it("a cluster program casts f32 → bf16 → f32 and f32 → f16 → f32 with the expected rounding", async () => {
    // Slots: 0 x f32[6], 1 bf16[6], 2 f32[6], 3 f16[6], 4 f32[6].
    const c = createNativeCluster({
      devices: [device([{ shape: [6] }, { shape: [6], dtype: "bf16" }, { shape: [6] }, { shape: [6], dtype: "f16" }, { shape: [6] }], [
        ins("fsm_cast", [0], [1]),
        ins("fsm_cast", [1], [2]),
        ins("fsm_cast", [0], [3]),
        ins("fsm_cast", [3], [4]),
      ])],
    });
    c.set(0, 0, new Float32Array([1, 1 + 2 ** -8, 1 + 3 * 2 ** -9, -2.5, 100000, 2 ** -26]));
    await c.run();
    expect(hex(c.get(0, 1))).toEqual(hex([0x3f80, 0x3f80, 0x3f81, 0xc020, 0x47c3, 0x3280]));
    expect(Array.from(c.get(0, 2))).toEqual([1, 1, 1.0078125, -2.5, 99840, 2 ** -26]); // 100000 → 99840 in bf16
    // f16 has 10 mantissa bits: 1 + 2^-8 and 1 + 3·2^-9 are exact there; 100000 overflows, 2^-26 underflows.
    expect(hex(c.get(0, 3))).toEqual(hex([0x3c00, 0x3c04, 0x3c06, 0xc100, 0x7c00, 0x0000]));
    expect(Array.from(c.get(0, 4))).toEqual([1, 1 + 2 ** -8, 1 + 3 * 2 ** -9, -2.5, Infinity, 0]);
  });

  it("a one-device program holds 16-bit slots too, at offsets of its own layout", async () => {
    // Slots: 0 x f32[2], 1 bf16[2] at 64, 2 f32[2] at 128; the bf16 cast waits on nothing (same stream order).
    const c = createNativeCluster({
      devices: [{
        arenaBytes: 192,
        slots: [{ shape: [2], dtype: "f32", offset: 0 }, { shape: [2], dtype: "bf16", offset: 64 }, { shape: [2], dtype: "f32", offset: 128 }],
        instructions: [ins("fsm_cast", [0], [1]), ins("fsm_cast", [1], [2])],
      }],
    });
    c.set(0, 0, new Float32Array([3, 1 + 3 * 2 ** -9]));
    await c.run();
    expect(hex(c.get(0, 1))).toEqual(hex([0x4040, 0x3f81]));
    expect(Array.from(c.get(0, 2))).toEqual([3, 1.0078125]);
    c.set(0, 1, new Uint16Array([0xbf80, 0x7f80]));
    expect(Array.from(c.get(0, 1))).toEqual([0xbf80, 0x7f80]);
  });
});
