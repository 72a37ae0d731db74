// Edge cases of the CUDA device's activation, layout, program, precision, optimizer and embedding kernels
// (native/src/device/cuda/kernels/), run on the SIMT emulator and compared with the CPU kernels: blocks and
// tiles left partial, multi-pass reductions and sorts, every attribute variant, operands updated in place (in
// a one-device program), 16-bit storage, special values, and the errors each kernel reports.
import { describe, expect, it } from "vitest";
import {
  createNativeCluster,
  runNativeKernel,
  type NativeAttrs,
  type NativeClusterInstruction,
  type NativeData,
  type NativeOperand,
  type NativeOutput,
} from "../../src/native/binding.js";
import { rng } from "../support/prng.js";
import { both, expectClose as closeTo, floats, SIMT } from "../support/simt-kernels.js";

const DEVICE = SIMT;
const expectClose = (cpu: NativeData[], cuda: NativeData[], rtol = 1e-5, atol = 1e-6): void => closeTo(cpu, cuda, rtol, atol);


const scalar = (v: number): NativeOperand => ({ shape: [], data: Float32Array.of(v) });
const f32Out = (shape: readonly number[]): NativeOutput => ({ shape, dtype: "f32" });


function bits(a: NativeData): number[] {
  return a instanceof Uint16Array ? Array.from(a) : Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
}

/** The same bits in every output. */
function expectSame(cpu: NativeData[], cuda: NativeData[]): void {
  expect(cuda.length).toBe(cpu.length);
  cpu.forEach((c, i) => expect(bits(cuda[i]!), `output ${i}`).toEqual(bits(c)));
}


/** What a call throws on each device: the same message. */
function expectSameError(op: string, inputs: NativeOperand[], attrs: NativeAttrs, outputs: NativeOutput[], message: string): void {
  expect(() => runNativeKernel(op, inputs, attrs, outputs)).toThrow(message);
  expect(() => runNativeKernel(op, inputs, attrs, outputs, { device: DEVICE })).toThrow(message);
}

// Values where the formulas are delicate: zeros of both signs, the tails, overflow of e^x, NaN and ±Inf.
const SPECIAL = [0, -0, 1e-30, -1e-30, 0.5, -0.5, 3, -3, 9, -9, 20, -20, 88, -88, 100, -100, 1e30, -1e30, Infinity, -Infinity, NaN];

function withSpecials(n: number, seed: number): NativeOperand {
  const x = floats([n], seed, 6);
  SPECIAL.forEach((v, i) => ((x.data as Float32Array)[i * 37] = v));
  return x;
}

describe("activations", () => {
  const n = 1000; // four blocks of 256, the last partial
  const x = withSpecials(n, 1), dy = floats([n], 2);
  dy.data[5] = -1; // a negative dy times relu_grad's 0 is -0
  for (const op of ["relu", "gelu", "silu"]) {
    it(`${op} and ${op}_grad agree with the CPU over special values`, () => {
      const fwd = both(op, [x], {}, [f32Out([n])]);
      const grad = both(`${op}_grad`, [dy, x], {}, [f32Out([n])]);
      if (op === "relu") {
        expectSame(...fwd); // exact: NaN kept, -0 to 0
        expectSame(...grad);
      } else {
        // f32 against the CPU's double: relative in the tails; the gradients cross zero (cancellation), so
        // there an absolute bound (the parity target is rtol 1e-4, atol 1e-5).
        expectClose(...fwd, 1e-5, 1e-12);
        expectClose(...grad, 1e-5, 1e-7);
      }
    });
  }

  it("16-bit operands are read and written through their storage type", () => {
    const x16 = runNativeKernel("fsm_cast", [x], {}, [{ shape: [n], dtype: "bf16" }])[0]!;
    const got = runNativeKernel("relu", [{ shape: [n], data: x16, dtype: "bf16" }], {}, [{ shape: [n], dtype: "bf16" }], { device: DEVICE })[0]!;
    const back = runNativeKernel("fsm_cast", [{ shape: [n], data: x16, dtype: "bf16" }], {}, [f32Out([n])])[0]!;
    const relu = runNativeKernel("relu", [{ shape: [n], data: back }], {}, [f32Out([n])])[0]!;
    expect(bits(got)).toEqual(bits(runNativeKernel("fsm_cast", [{ shape: [n], data: relu }], {}, [{ shape: [n], dtype: "bf16" }])[0]!));
  });
});

describe("layout", () => {
  it("reshape copies the bits; a size mismatch is refused on the device", () => {
    const x = withSpecials(300, 3);
    expectSame(...both("reshape", [x], {}, [f32Out([10, 30])]));
    expect(() => runNativeKernel("reshape", [x], {}, [f32Out([10, 3])], { device: DEVICE })).toThrow("reshape: operands differ in size");
  });

  const cases: [number[], number, number][] = [
    [[3, 37, 45], 1, 2], // the last dim moves: tiles, partial both ways
    [[2, 33, 5, 40], 1, 3], // tiles with a dim between the swapped ones
    [[70, 65], 0, 1],
    [[2, 65, 33], -1, -2], // negative dims, in either order
    [[4, 5, 6], 0, 1], // the last dim stays: a gather
    [[3, 4, 5, 6], 0, 2],
    [[7, 1, 3], 0, 1], // a size-1 dim
    [[40, 1], 0, 1],
    [[4, 5], 1, 1], // nothing moves
  ];
  for (const [shape, a, b] of cases) {
    it(`transpose ${JSON.stringify(shape)} dims ${a}, ${b}`, () => {
      const out = [...shape];
      const [i, j] = [a < 0 ? a + shape.length : a, b < 0 ? b + shape.length : b];
      [out[i], out[j]] = [out[j]!, out[i]!];
      expectSame(...both("transpose", [floats(shape, 4)], { dim0: a, dim1: b }, [f32Out(out)]));
    });
  }

  const sums: [number[], number[]][] = [
    [[6, 40, 24], [24]], // a bias gradient: leading dims, in chunks summed twice
    [[3000, 5], [5]], // more chunks than a warp has lanes
    [[1100], [1]],
    [[2, 3, 4], []], // everything into a scalar
    [[5, 7, 3], [5, 1, 3]], // a middle dim: the general path
    [[4, 50, 3], [4, 1, 1]], // trailing dims, in chunks
    [[3, 40, 2, 30], [3, 1, 2, 1]], // interleaved
    [[2, 1, 4], [1, 1, 4]], // size-1 dims
    [[2, 3, 4], [2, 3, 4]], // nothing to sum
    [[30, 1, 4], [1, 4]], // fewer dims
  ];
  for (const [from, to] of sums) {
    it(`sum_to ${JSON.stringify(from)} -> ${JSON.stringify(to)}, the same bits every run`, () => {
      const x = floats(from, 5);
      const [cpu, cuda] = both("sum_to", [x], {}, [f32Out(to)]);
      expectClose(cpu, cuda, 1e-6, 1e-6);
      expectSame(cuda, runNativeKernel("sum_to", [x], {}, [f32Out(to)], { device: DEVICE }));
    });
  }

  it("sum_to of shapes that do not broadcast is the CPU's error", () => {
    const x = floats([3, 4], 6);
    expect(() => runNativeKernel("sum_to", [x], {}, [f32Out([5])])).toThrow();
    let cpu = "";
    try {
      runNativeKernel("sum_to", [x], {}, [f32Out([5])]);
    } catch (e) {
      cpu = (e as Error).message;
    }
    expect(() => runNativeKernel("sum_to", [x], {}, [f32Out([5])], { device: DEVICE })).toThrow(cpu);
  });
});

describe("program ops", () => {
  const n = 700;
  it("fsm_accumulate over more operands than one launch takes gives the CPU's bits", () => {
    const inputs = Array.from({ length: 21 }, (_, i) => floats([n], 10 + i));
    for (const scale of [1, 0.3, -1 / 21]) expectSame(...both("fsm_accumulate", inputs, { scale }, [f32Out([n])]));
    expectSame(...both("fsm_accumulate", inputs.slice(0, 3), { scale: 0.5 }, [f32Out([n])]));
  });

  it("fsm_scale and fsm_copy (any element type) give the CPU's bits", () => {
    const x = withSpecials(n, 7);
    expectSame(...both("fsm_scale", [x], { scale: 1 / 3 }, [f32Out([n])]));
    expectSame(...both("fsm_copy", [x], {}, [f32Out([n])]));
    const half = { shape: [n], data: Uint16Array.from({ length: n }, (_, i) => (i * 7919) & 0xffff), dtype: "f16" as const };
    expectSame(...both("fsm_copy", [half], {}, [{ shape: [n], dtype: "f16" }]));
    expectSame(...both("fsm_copy", [{ shape: [n], data: Int32Array.from({ length: n }, (_, i) => i - 5) }], {}, [{ shape: [n], dtype: "i32" }]));
  });

  it("operand mistakes are the CPU's errors", () => {
    const x = floats([n], 8), short = floats([n - 1], 9);
    expectSameError("fsm_accumulate", [x, short], { scale: 1 }, [f32Out([n])], "fsm_accumulate: operands differ in size");
    expectSameError("fsm_scale", [short], { scale: 2 }, [f32Out([n])], "fsm_scale: operands differ in size");
    expectSameError("fsm_copy", [short], {}, [f32Out([n])], "fsm_copy: operands differ in size or type");
    expectSameError("fsm_copy", [x], {}, [{ shape: [n], dtype: "i32" }], "fsm_copy: operands differ in size or type");
    // Through runKernel the output never shares the first operand's bytes.
    expectSameError("fsm_add_inplace", [x, x], {}, [f32Out([n])], "fsm_add_inplace: the output must be the first operand");
  });
});

describe("precision ops", () => {
  it("fsm_cast in every direction gives the CPU's bits, special values included", () => {
    const n = 600;
    const x = withSpecials(n, 11);
    // f16's edges: overflow from 65520, subnormals, the tie with zero at 2^-25.
    [65504, 65519, 65520, -65520, 6e-5, 6.1e-5, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 1e-8, 3.4e38].forEach((v, i) => ((x.data as Float32Array)[i * 41 + 3] = v));
    for (const dtype of ["bf16", "f16"] as const) {
      const [cpu, cuda] = both("fsm_cast", [x], {}, [{ shape: [n], dtype }]);
      expectSame(cpu, cuda);
      const raw = { shape: [n], data: Uint16Array.from({ length: n }, (_, i) => (i * 40503) & 0xffff), dtype };
      expectSame(...both("fsm_cast", [raw], {}, [f32Out([n])])); // every kind of bit pattern back to f32
      expectSame(...both("fsm_cast", [raw], {}, [{ shape: [n], dtype }])); // same type: a copy
    }
    expectSame(...both("fsm_cast", [x], {}, [f32Out([n])]));
  });

  it("fsm_cast refuses what the CPU refuses, with its message", () => {
    const b = { shape: [4], data: new Uint16Array(4), dtype: "bf16" as const };
    expectSameError("fsm_cast", [b], {}, [{ shape: [4], dtype: "f16" }], "fsm_cast: cannot convert bf16 to f16");
    expectSameError("fsm_cast", [{ shape: [4], data: new Int32Array(4) }], {}, [f32Out([4])], "fsm_cast: cannot convert i32 to f32");
    expectSameError("fsm_cast", [floats([4], 1)], {}, [{ shape: [5], dtype: "bf16" }], "fsm_cast: operands differ in size");
    expectSameError("fsm_cast", [floats([4], 1), floats([4], 2)], {}, [f32Out([4])], "fsm_cast: takes one input and one output");
  });

  it("fsm_scale_by reads its scalar on the device, with and without a scale attribute", () => {
    const x = withSpecials(500, 12);
    expectSame(...both("fsm_scale_by", [x, scalar(1 / 1024)], {}, [f32Out([500])]));
    expectSame(...both("fsm_scale_by", [x, scalar(65536)], { scale: 1 / 3 }, [f32Out([500])]));
    expectSameError("fsm_scale_by", [x, floats([2], 1)], {}, [f32Out([500])], "fsm_scale_by: s must hold one element");
    expectSameError("fsm_scale_by", [x, scalar(1)], {}, [f32Out([499])], "fsm_scale_by: x and y differ in size");
  });

  it("fsm_nonfinite finds NaN or ±Inf in any input (more inputs than one launch takes)", () => {
    const inputs = Array.from({ length: 20 }, (_, i) => floats([50 + i * 31], 20 + i));
    (inputs[0]!.data as Float32Array)[3] = 3.4e38; // large but finite
    const flag = (ins: NativeOperand[]) => both("fsm_nonfinite", ins, {}, [f32Out([])]);
    const none = flag(inputs);
    expectSame(...none);
    expect(none[1][0]![0]).toBe(0);
    for (const [which, at, v] of [[19, 600, NaN], [17, 0, -Infinity], [2, 111, Infinity]] as const) {
      const bad = inputs.map((t) => ({ ...t, data: Float32Array.from(t.data as Float32Array) }));
      (bad[which]!.data as Float32Array)[at] = v;
      const got = flag(bad);
      expectSame(...got);
      expect(got[1][0]![0]).toBe(1);
    }
    expectSame(...flag([]));
  });
});

describe("optimizer", () => {
  for (const n of [1, 300, 5000, 70000]) {
    it(`sum_squares of ${n} elements (${n > 4096 ? "partials in the workspace" : "one block"}), the same bits every run`, () => {
      const x = floats([n], 30 + n);
      const [cpu, cuda] = both("sum_squares", [x], {}, [f32Out([])]);
      expectClose(cpu, cuda, 1e-6, 0);
      expectSame(cuda, runNativeKernel("sum_squares", [x], {}, [f32Out([])], { device: DEVICE }));
    });
  }

  it("global_norm adds its scalars in order, in and past one launch", () => {
    for (const count of [1, 3, 32, 33, 70]) {
      const ins = Array.from({ length: count }, (_, i) => scalar(rng(i)() * 10 ** ((i % 7) - 3)));
      expectSame(...both("global_norm", ins, {}, [f32Out([])]));
    }
  });

  it("clip_coef and step_increment read their operand on the device", () => {
    for (const norm of [0, 0.3, 0.5, 7, 1e30, NaN]) expectSame(...both("clip_coef", [scalar(norm)], { max_norm: 0.5 }, [f32Out([])]));
    for (const t of [0, 1, 41, 16777216]) expectSame(...both("step_increment", [scalar(t)], {}, [f32Out([])]));
  });

  const n = 1000;
  const p = floats([n], 40), g = floats([n], 41), buf = floats([n], 42), m = floats([n], 43);
  const v = { shape: [n], data: (floats([n], 44).data as Float32Array).map((x) => x * x) };
  for (const momentum of [0, 0.9]) {
    for (const nesterov of [false, true]) {
      for (const clip of [false, true]) {
        it(`sgd_update momentum ${momentum}${nesterov ? " nesterov" : ""}${clip ? " clipped" : ""}`, () => {
          const ins = [p, g, ...(momentum !== 0 ? [buf] : []), ...(clip ? [scalar(0.37)] : [])];
          const outs = momentum !== 0 ? [f32Out([n]), f32Out([n])] : [f32Out([n])];
          expectClose(...both("sgd_update", ins, { lr: 0.05, momentum, weight_decay: 0.01, nesterov, clip }, outs), 1e-6, 1e-7);
        });
      }
    }
  }
  for (const decoupled of [false, true]) {
    for (const clip of [false, true]) {
      for (const t of [1, 7]) {
        it(`adam_update${decoupled ? " (AdamW)" : ""}${clip ? " clipped" : ""} at step ${t}`, () => {
          const ins = [p, g, m, v, scalar(t), ...(clip ? [scalar(0.25)] : [])];
          const attrs = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1, decoupled, clip };
          expectClose(...both("adam_update", ins, attrs, [f32Out([n]), f32Out([n]), f32Out([n])]), 1e-6, 1e-7);
        });
      }
    }
  }
});

describe("embedding", () => {
  it("positions", () => {
    expectSame(...both("positions", [], { n: 700 }, [{ shape: [700], dtype: "i32" }]));
  });

  it("embedding copies table rows, any width", () => {
    const ids = { shape: [3, 50], data: Int32Array.from({ length: 150 }, (_, i) => (i * 7) % 11) };
    for (const dim of [1, 70, 300]) expectSame(...both("embedding", [ids, floats([11, dim], dim)], {}, [f32Out([3, 50, dim])]));
  });

  it("an id out of range is the CPU's error, found on the device (a table with no columns included)", () => {
    for (const bad of [-1, 11, 2 ** 31 - 1]) {
      const ids = { shape: [300], data: Int32Array.from({ length: 300 }, (_, i) => (i === 257 ? bad : i % 11)) };
      const message = `embedding index ${bad} is out of range [0, 11)`;
      expectSameError("embedding", [ids, floats([11, 4], 1)], {}, [f32Out([300, 4])], message);
      expectSameError("embedding", [ids, { shape: [11, 0], data: new Float32Array(0) }], {}, [f32Out([300, 0])], message);
      expectSameError("embedding_grad_weight", [floats([300, 4], 2), ids], { num: 11 }, [f32Out([11, 4])], message);
    }
  });

  // Ids with heavy repeats (a run longer than a tile), over tables needing 1, 2 and 3 radix passes.
  const cases: [number, number, number][] = [
    [700, 1, 37],
    [700, 300, 37],
    [600, 100000, 3],
    [1, 5, 40],
    [1300, 60, 1],
  ];
  for (const [rows, num, dim] of cases) {
    it(`embedding_grad_weight: ${rows} rows into ${num} x ${dim}, the CPU's bits every run`, () => {
      const rand = rng(rows + num);
      const ids = { shape: [rows], data: Int32Array.from({ length: rows }, () => (rand() < 0.4 ? num >> 1 : Math.floor(rand() * num))) };
      const dy = floats([rows, dim], num, 3);
      const [cpu, cuda] = both("embedding_grad_weight", [dy, ids], { num }, [f32Out([num, dim])]);
      expectSame(cpu, cuda); // rows summed in row order, in double, as the CPU does
      expectSame([cuda[0]!], runNativeKernel("embedding_grad_weight", [dy, ids], { num }, [f32Out([num, dim])], { device: DEVICE }));
    });
  }

  it("embedding_grad_weight with no rows leaves the table zero", () => {
    expectSame(...both("embedding_grad_weight", [{ shape: [0, 4], data: new Float32Array(0) }, { shape: [0], data: new Int32Array(0) }], { num: 3 }, [f32Out([3, 4])]));
  });
});

describe("in place, inside a program (outputs sharing operands' bytes are not zeroed)", () => {
  type Slot = { shape: number[]; dtype?: "f32" | "bf16" };
  function program(kind: "cpu" | "simt", slots: Slot[], instructions: NativeClusterInstruction[], values: Float32Array[]) {
    let offset = 0;
    const laid = slots.map((s) => {
      const slot = { shape: s.shape, dtype: s.dtype ?? ("f32" as const), offset };
      offset += Math.ceil((s.shape.reduce((a, b) => a * b, 1) * 4) / 256) * 256;
      return slot;
    });
    const c = createNativeCluster({ device: { kind }, devices: [{ arenaBytes: offset, slots: laid, instructions }] });
    values.forEach((v, i) => c.set(0, i, v));
    return c;
  }
  const ins = (op: string, inputs: number[], outputs: number[], attrs: NativeAttrs = {}, inPlace = false): NativeClusterInstruction => ({
    stream: 0,
    op,
    inputs,
    outputs,
    attrs,
    waits: [],
    ...(inPlace && { inPlace }),
  });

  it("accumulate into an operand, add in place, scale, cast and scale_by in place, and both updates, as the CPU", async () => {
    const n = 500;
    const slots: Slot[] = [{ shape: [n] }, { shape: [n] }, { shape: [n] }, { shape: [] }, { shape: [n] }, { shape: [n] }, { shape: [n] }, { shape: [n] }, { shape: [] }];
    const values = [0, 1, 2].map((s) => floats([n], 50 + s).data as Float32Array);
    values.push(Float32Array.of(0.5));
    values.push(...[4, 5, 6].map((s) => floats([n], 50 + s).data as Float32Array));
    values.push((floats([n], 57).data as Float32Array).map((x) => x * x), Float32Array.of(3));
    const program_ = [
      ins("fsm_add_inplace", [0, 1], [0]),
      ins("fsm_accumulate", [2, 0, 2, 1], [2], { scale: 0.75 }), // the output is operands 0 and 2
      ins("fsm_scale", [1], [1], { scale: -1.5 }),
      ins("fsm_cast", [0], [0]),
      ins("fsm_scale_by", [1, 3], [1], { scale: 2 }),
      ins("sgd_update", [4, 0, 5], [4, 5], { lr: 0.1, momentum: 0.9, weight_decay: 0.01, nesterov: true, clip: false }, true),
      ins("adam_update", [6, 1, 5, 7, 8, 3], [6, 5, 7], { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1, decoupled: true, clip: true }, true),
    ];
    const results = [];
    for (const kind of ["cpu", "simt"] as const) {
      const c = program(kind, slots, program_, values);
      await c.run();
      results.push(slots.map((_, i) => c.get(0, i)));
    }
    const [cpu, simt] = results;
    expectSame(cpu!.slice(0, 4), simt!.slice(0, 4)); // the f32 sums and products: the same bits
    expectClose(cpu!, simt!, 1e-6, 1e-7);
  });
});
