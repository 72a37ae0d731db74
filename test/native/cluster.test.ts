// The executor (native/src/exec) through createNativeCluster: hand-built device programs whose results are
// checked against hand-computed values or the fp32 ordered sum (bit for bit), compute/communication overlap seen
// in the trace, failures (real and injected) that reject with their root cause as structured fields instead of
// hanging, construction errors (an arena over its device's memory, malformed descriptions, worlds and ranks),
// bit-identical results run to run, and the seams: the same programs through the delay communicator and the
// mmap arena route give the same bits, and the communicator's call counts show which one carried them.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  createNativeCluster,
  nativeAddonPath,
  nativeFailure,
  type NativeAttrs,
  type NativeClusterDescription,
  type NativeClusterDevice,
  type NativeClusterHandle,
  type NativeClusterInstruction,
  type NativeFailure,
  nativeGpuKind,
} from "../../src/native/binding.js";
import { rng, spreadData } from "../support/prng.js";

type SlotSpec = { shape: number[]; dtype?: "f32" | "i32" };

// Slots laid out one after another, each 64-byte aligned.
function device(specs: readonly SlotSpec[], instructions: readonly NativeClusterInstruction[]): NativeClusterDevice {
  let offset = 0;
  const slots = specs.map((s) => {
    const slot = { shape: s.shape, dtype: s.dtype ?? ("f32" as const), offset };
    offset += Math.ceil((s.shape.reduce((a, b) => a * b, 1) * 4) / 64) * 64;
    return slot;
  });
  return { arenaBytes: offset, slots, instructions };
}

function ins(stream: 0 | 1, op: string, inputs: number[], outputs: number[], attrs: NativeAttrs = {}, waits: number[] = []): NativeClusterInstruction {
  return { stream, op, inputs, outputs, attrs, waits };
}

/** Slots: 0 ids[2] i32, 1 w[3,2], 2 e[2,2], 3 z[2,2]: an embedding on the compute stream, its all-reduce over
 *  devices 0 and 1 on the comm stream, then a copy of the result (the failure tests' program). */
function embedThenAllReduce(): NativeClusterDevice {
  return device([{ shape: [2], dtype: "i32" }, { shape: [3, 2] }, { shape: [2, 2] }, { shape: [2, 2] }], [
    ins(0, "embedding", [0, 1], [2]),
    ins(1, "comm.allReduce", [2], [2], { group: [0, 1] }, [0]),
    ins(0, "fsm_copy", [2], [3], {}, [1]),
  ]);
}

// ((x0 + x1) + x2) + ... in fp32: the communicator's reduction order.
function orderedSum(inputs: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(inputs[0]!);
  for (let j = 1; j < inputs.length; j++) for (let k = 0; k < out.length; k++) out[k] = Math.fround(out[k]! + inputs[j]![k]!);
  return out;
}

function bits(a: Float32Array | Int32Array): number[] {
  return Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
}


// What `make` throws.
function thrownBy(make: () => unknown): Error {
  try {
    make();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected the call to throw");
}

// The failure fields of what `make` throws (it must throw an addon error carrying them).
function refusal(make: () => unknown): NativeFailure {
  try {
    make();
  } catch (e) {
    const f = nativeFailure(e);
    expect(f, String(e)).toBeDefined();
    return f!;
  }
  throw new Error("expected the call to throw");
}

// The failure fields of a rejected run, and the Error's message (the human line).
async function rejection(run: Promise<unknown>): Promise<NativeFailure & { text: string }> {
  try {
    await run;
  } catch (e) {
    const f = nativeFailure(e);
    expect(f, String(e)).toBeDefined();
    return { ...f!, text: (e as Error).message };
  }
  throw new Error("expected the run to reject");
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const f32 = (xs: number[]): Float32Array => new Float32Array(xs);

// A well-formed one-device program: the base of the malformed descriptions below.
const good: NativeClusterDevice = {
  arenaBytes: 128,
  slots: [{ shape: [2], dtype: "f32", offset: 0 }, { shape: [2], dtype: "f32", offset: 64 }],
  instructions: [{ stream: 0, op: "fsm_copy", inputs: [0], outputs: [1], attrs: {}, waits: [] }],
};

/** The multi-device programs below, each with its inputs: run through every communicator and arena route. */
interface Scenario {
  readonly name: string;
  readonly devices: readonly NativeClusterDevice[];
  feed(c: NativeClusterHandle): void;
}

// Data parallel: each device multiplies, all-reduces on its comm stream, then copies on compute.
// Slots: 0 x[2,3], 1 W[3,2], 2 y[2,2], 3 z[2,2].
const dataParallel: Scenario = {
  name: "data parallel",
  devices: [0, 1].map(() =>
    device([{ shape: [2, 3] }, { shape: [3, 2] }, { shape: [2, 2] }, { shape: [2, 2] }], [
      ins(0, "matmul", [0, 1], [2]),
      ins(1, "comm.allReduce", [2], [2], { group: [0, 1] }, [0]),
      ins(0, "fsm_copy", [2], [3], {}, [1]),
    ]),
  ),
  feed(c) {
    c.set(0, 0, f32([1, 2, 3, 4, 5, 6]));
    c.set(0, 1, f32([1, 0, 0, 1, 1, 1])); // y0 = [[4, 5], [10, 11]]
    c.set(1, 0, f32([1, 1, 1, 2, 0, -1]));
    c.set(1, 1, f32([2, 1, 0, 3, 1, -1])); // y1 = [[3, 3], [3, 3]]
  },
};

// Pipeline: device 0 computes and sends (tag 7), device 1 receives and computes.
const pipeline: Scenario = {
  name: "pipeline",
  devices: [
    // 0 x[1,2], 1 W[2,3], 2 h[1,3]
    device([{ shape: [1, 2] }, { shape: [2, 3] }, { shape: [1, 3] }], [
      ins(0, "matmul", [0, 1], [2]),
      ins(1, "comm.send", [2], [], { peer: 1, tag: 7 }, [0]),
    ]),
    // 0 h[1,3], 1 out[1,3]
    device([{ shape: [1, 3] }, { shape: [1, 3] }], [
      ins(1, "comm.recv", [], [0], { peer: 0, tag: 7 }),
      ins(0, "mul", [0, 0], [1], {}, [0]),
    ]),
  ],
  feed(c) {
    c.set(0, 0, f32([1, 2]));
    c.set(0, 1, f32([1, 2, 3, 4, 5, 6])); // h = [9, 12, 15]
  },
};

// reduceScatter, allGather, broadcast, reduce (+ an add on the comm stream) and pair all-reduces on 4 devices.
// Slots: 0 a[8], 1 rs[2], 2 ag[8], 3 b[4], 4 r[4], 5 p[1].
const collectives: Scenario = {
  name: "every collective on 4 devices",
  devices: range(4).map((d) =>
    device([{ shape: [8] }, { shape: [2] }, { shape: [8] }, { shape: [4] }, { shape: [4] }, { shape: [1] }], [
      ins(1, "comm.reduceScatter", [0], [1], { group: range(4) }),
      ins(1, "comm.allGather", [1], [2], { group: range(4) }),
      ins(1, "comm.broadcast", [3], [3], { group: range(4), root: 2 }),
      ins(1, "comm.reduce", [4], [4], { group: range(4), root: 1 }),
      ins(1, "fsm_add_inplace", [4, 3], [4]),
      ins(0, "comm.allReduce", [5], [5], { group: [d % 2, (d % 2) + 2] }), // a collective on the compute stream
    ]),
  ),
  feed(c) {
    for (const d of range(4)) {
      c.set(d, 0, f32(range(8).map((k) => d * 10 + k)));
      c.set(d, 3, f32(range(4).map((k) => d + 1 + k)));
      c.set(d, 4, f32(range(4).map((k) => 100 * d + k)));
      c.set(d, 5, f32([d]));
    }
  },
};

// A matmul + all-reduce on 4 devices from spread-out data, so every ulp of the ordered sum shows.
// Slots: 0 x[16,32], 1 W[32,8], 2 y[16,8], 3 local[16,8] (this device's product, before the all-reduce).
const matmulAllReduce: Scenario = {
  name: "matmul + all-reduce on 4 devices",
  devices: range(4).map(() =>
    device([{ shape: [16, 32] }, { shape: [32, 8] }, { shape: [16, 8] }, { shape: [16, 8] }], [
      ins(0, "matmul", [0, 1], [2]),
      ins(0, "fsm_copy", [2], [3]),
      ins(1, "comm.allReduce", [2], [2], { group: range(4) }, [1]),
    ]),
  ),
  feed(c) {
    const next = rng(42);
    for (const d of range(4)) {
      c.set(d, 0, spreadData(16 * 32, next, 6));
      c.set(d, 1, spreadData(32 * 8, next, 6));
    }
  },
};

const SCENARIOS = [dataParallel, pipeline, collectives, matmulAllReduce];

/** Builds a scenario with extra description fields, feeds it and runs it `runs` times; every slot's bits. */
async function runScenario(s: Scenario, extra: Partial<NativeClusterDescription> = {}, runs = 3): Promise<{ slots: number[][][]; calls: Record<string, number> }> {
  const c = createNativeCluster({ devices: s.devices, ...extra });
  s.feed(c);
  for (let r = 0; r < runs; r++) await c.run();
  const slots = s.devices.map((d, i) => d.slots.map((_, k) => bits(c.get(i, k) as Float32Array)));
  return { slots, calls: c.communicatorCalls() };
}

describe("native cluster", () => {
  it("data parallel: each device multiplies, all-reduces on its comm stream, then copies on compute", async () => {
    const c = createNativeCluster({ devices: dataParallel.devices });
    expect(c.deviceCount()).toBe(2);
    expect(c.arenaBytes(1)).toBe(256);
    dataParallel.feed(c);
    await c.run();
    for (const d of [0, 1]) {
      expect(Array.from(c.get(d, 2))).toEqual([7, 8, 13, 14]);
      expect(Array.from(c.get(d, 3))).toEqual([7, 8, 13, 14]);
    }
    expect(c.timings(0)).toHaveLength(0); // nothing traced yet
    // One all-reduce per device per run, through the in-process communicator.
    expect(c.communicatorCalls()).toEqual({ allReduce: 2, reduceScatter: 0, allGather: 0, broadcast: 0, reduce: 0, send: 0, recv: 0 });
  });

  it("pipeline: device 0 computes and sends (tag 7), device 1 receives and computes", async () => {
    const c = createNativeCluster({ devices: pipeline.devices });
    pipeline.feed(c);
    await c.run();
    expect(Array.from(c.get(1, 0))).toEqual([9, 12, 15]);
    expect(Array.from(c.get(1, 1))).toEqual([81, 144, 225]);
    expect(c.communicatorCalls()).toMatchObject({ send: 1, recv: 1, allReduce: 0 });
  });

  it("reduceScatter, allGather, broadcast, reduce (+ an add on the comm stream) and pair all-reduces on 4 devices", async () => {
    const world = range(4);
    const c = createNativeCluster({ devices: collectives.devices });
    collectives.feed(c);
    await c.run();
    // Σ_d (10d + k) = 60 + 4k; broadcast from 2: [3, 4, 5, 6]; reduce to 1: Σ_d (100d + k) = 600 + 4k.
    const sum = range(8).map((k) => 60 + 4 * k);
    for (const d of world) {
      expect(Array.from(c.get(d, 1))).toEqual(sum.slice(2 * d, 2 * d + 2));
      expect(Array.from(c.get(d, 2))).toEqual(sum);
      expect(Array.from(c.get(d, 3))).toEqual([3, 4, 5, 6]);
      const reduced = d === 1 ? range(4).map((k) => 600 + 4 * k) : range(4).map((k) => 100 * d + k);
      expect(Array.from(c.get(d, 4))).toEqual(reduced.map((x, k) => x + 3 + k));
      expect(Array.from(c.get(d, 5))).toEqual([d % 2 === 0 ? 0 + 2 : 1 + 3]);
    }
  });

  it("overlaps communication with compute on the same device, and its timings are ordered within the run", async () => {
    const n = 384;
    const count = 1 << 20;
    // Slots: 0 A, 1 B, 2 C (n×n), 3 buf[count]. No waits: the two streams are independent.
    const program = (): NativeClusterDevice =>
      device([{ shape: [n, n] }, { shape: [n, n] }, { shape: [n, n] }, { shape: [count] }], [
        ...range(6).map(() => ins(0, "matmul", [0, 1], [2])),
        ...range(6).map(() => ins(1, "comm.allReduce", [3], [3], { group: [0, 1] })),
      ]);
    const c = createNativeCluster({ devices: [program(), program()] });
    const next = rng(3);
    for (const d of [0, 1]) {
      c.set(d, 0, spreadData(n * n, next, 6));
      c.set(d, 1, spreadData(n * n, next, 6));
    }
    let overlapped = false;
    for (let attempt = 0; attempt < 3 && !overlapped; attempt++) {
      const t0 = performance.now();
      await c.run(true);
      const wall = (performance.now() - t0) / 1000;
      for (const d of [0, 1]) {
        const t = c.timings(d);
        expect(t).toHaveLength(24);
        const spans = range(12).map((i) => [t[2 * i]!, t[2 * i + 1]!] as const);
        for (const [s, e] of spans) {
          expect(s).toBeGreaterThanOrEqual(0);
          expect(e).toBeGreaterThanOrEqual(s);
          expect(e).toBeLessThanOrEqual(wall);
        }
        // Each stream in list order: instruction i + 1 starts after i ends.
        for (const stream of [spans.slice(0, 6), spans.slice(6)]) {
          for (let i = 1; i < stream.length; i++) expect(stream[i]![0]).toBeGreaterThanOrEqual(stream[i - 1]![1]);
        }
        const compute = spans.slice(0, 6);
        const comm = spans.slice(6);
        if (comm.some(([s, e]) => compute.some(([cs, ce]) => s < ce && cs < e))) overlapped = true;
      }
    }
    expect(overlapped).toBe(true);
  });

  it("a kernel error on device 1 stops device 0 waiting in a collective; the next run works", async () => {
    // Device 1's compute thread fails, so its comm thread must see the failure while waiting on the event,
    // and device 0 is woken inside the all-reduce.
    const c = createNativeCluster({ devices: [embedThenAllReduce(), embedThenAllReduce()] });
    for (const d of [0, 1]) c.set(d, 1, f32([1, 2, 3, 4, 5, 6]));
    c.set(0, 0, new Int32Array([0, 2]));
    c.set(1, 0, new Int32Array([1, 5]));
    const t0 = performance.now();
    const f = await rejection(c.run());
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(f).toMatchObject({ kind: "kernel", device: 1, localDevice: 1, instruction: 0, op: "embedding", message: "embedding index 5 is out of range [0, 3)" });
    // The human line keeps its form: where, then the root cause.
    expect(f.text).toBe("device 1 instruction 0 (embedding): embedding index 5 is out of range [0, 3)");

    c.set(1, 0, new Int32Array([1, 1])); // rows [3, 4], [3, 4]
    await c.run();
    for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual([1 + 3, 2 + 4, 5 + 3, 6 + 4]);
  });

  describe("injected faults (armed for the next run only)", () => {
    // Device 0: x = embedding rows [0, 2] = [[1, 2], [5, 6]]; device 1: rows [1, 1] = [[3, 4], [3, 4]].
    const ready = () => {
      const c = createNativeCluster({ devices: [embedThenAllReduce(), embedThenAllReduce()] });
      for (const d of [0, 1]) c.set(d, 1, f32([1, 2, 3, 4, 5, 6]));
      c.set(0, 0, new Int32Array([0, 2]));
      c.set(1, 0, new Int32Array([1, 1]));
      return c;
    };
    const sum = [1 + 3, 2 + 4, 5 + 3, 6 + 4];

    it("a kernel fault on device 1 aborts device 0 inside the all-reduce; the next run is clean", async () => {
      const c = ready();
      c.injectFault(1, 0, "fail");
      const t0 = performance.now();
      const f = await rejection(c.run());
      expect(performance.now() - t0).toBeLessThan(3000); // woken by the abort, not the 60 s timeout
      expect(f).toMatchObject({ kind: "kernel", device: 1, localDevice: 1, instruction: 0, op: "embedding", message: "injected fault" });
      expect(f.text).toBe("device 1 instruction 0 (embedding): injected fault");
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual(sum);
    });

    it("a communication fault on device 0's all-reduce aborts device 1 inside it", async () => {
      const c = ready();
      c.injectFault(0, 1, "fail");
      const t0 = performance.now();
      const f = await rejection(c.run());
      expect(performance.now() - t0).toBeLessThan(3000);
      expect(f).toMatchObject({ kind: "comm", device: 0, localDevice: 0, instruction: 1, op: "comm.allReduce", message: "injected fault" });
      expect(f.peers).toBeUndefined(); // not a timeout: nobody is missing
    });

    it("a NaN fault poisons the instruction's outputs, and so everything computed from them", async () => {
      const c = ready();
      c.injectFault(0, 0, "nan");
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3)).every(Number.isNaN)).toBe(true);
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual(sum);
    });

    it("a hang on device 1 makes device 0 time out in the all-reduce: the timeout names the missing rank and the busy one", async () => {
      const c = createNativeCluster({ timeoutSeconds: 0.5, devices: [embedThenAllReduce(), embedThenAllReduce()] });
      for (const d of [0, 1]) c.set(d, 1, f32([1, 2, 3, 4, 5, 6]));
      c.set(0, 0, new Int32Array([0, 2]));
      c.set(1, 0, new Int32Array([1, 1]));
      c.injectFault(1, 0, "hang");
      const t0 = performance.now();
      const f = await rejection(c.run());
      expect(performance.now() - t0).toBeLessThan(1400); // the peer's timeout, not the hang's own (3 × 0.5 s)
      expect(f).toMatchObject({ kind: "timeout", device: 0, localDevice: 0, instruction: 1, op: "comm.allReduce", peers: [1] });
      expect(f.message).toBe("allReduce #0 on group [0, 1]: timed out after 0.5 s at rank 0; rank(s) [1] never arrived");
      // Device 1 never left its kernel: busy computing, not waiting — the likelier cause.
      expect(f.busy).toHaveLength(1);
      expect(f.busy![0]).toMatchObject({ device: 1, instruction: 0, op: "embedding" });
      expect(f.busy![0]!.seconds).toBeGreaterThan(0.25);
      expect(f.text).toMatch(/^device 0 instruction 1 \(comm\.allReduce\): allReduce #0 .* never arrived; busy computing, not waiting: device 1 instruction 0 \(embedding\) for \d+\.\d s$/);
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual(sum);
    });

    it("with two ranks waiting, the one that timed out is the root cause, not the one woken by its abort", async () => {
      // Device 2 hangs in its fill; devices 0 and 1 wait for it in the all-reduce. Whichever times out first
      // aborts the other, whose echo may reach the executor first: the timeout must still be what is reported.
      const program = (): NativeClusterDevice => device([{ shape: [4] }], [ins(0, "fill", [], [0], { value: 1 }), ins(1, "comm.allReduce", [0], [0], { group: [0, 1, 2] }, [0])]);
      const c = createNativeCluster({ timeoutSeconds: 0.3, devices: [program(), program(), program()] });
      for (let round = 0; round < 5; round++) {
        c.injectFault(2, 0, "hang");
        const f = await rejection(c.run());
        expect(f).toMatchObject({ kind: "timeout", instruction: 1, op: "comm.allReduce", peers: [2] });
        expect([0, 1]).toContain(f.device);
        expect(f.busy!.map((b) => [b.device, b.instruction, b.op])).toEqual([[2, 0, "fill"]]);
      }
      await c.run();
      for (const d of [0, 1, 2]) expect(Array.from(c.get(d, 0))).toEqual([3, 3, 3, 3]);
    });

    it("a hang nothing waits on fails by itself after three timeouts (kind hang), on the one-device path too", async () => {
      const c = createNativeCluster({ timeoutSeconds: 0.1, devices: [device([{ shape: [4] }], [ins(0, "fill", [], [0], { value: 1 })])] });
      c.injectFault(0, 0, "hang");
      expect(await rejection(c.run())).toMatchObject({
        kind: "hang", device: 0, localDevice: 0, instruction: 0, op: "fill", message: "injected hang: stopped responding for 0.3 s and nothing waited on it",
      });
      await c.run();
      expect(Array.from(c.get(0, 0))).toEqual([1, 1, 1, 1]);
    });

    it("refuses an instruction or kind that does not exist", () => {
      const c = ready();
      expect(() => c.injectFault(0, 3, "fail")).toThrow(/^device 0 has no instruction 3 \(it has 3\)$/);
      expect(() => c.injectFault(2, 0, "fail")).toThrow(/unknown device 2/);
      expect(() => c.injectFault(0, 0, "boom" as "fail")).toThrow(/the fault kind must be 'fail', 'nan' or 'hang'/);
    });
  });

  it("a recv whose send never comes times out naming the recv, and the compute thread waiting on it exits", async () => {
    const c = createNativeCluster({
      timeoutSeconds: 0.5,
      devices: [
        device([{ shape: [4] }], [ins(0, "fill", [], [0], { value: 1 })]),
        device([{ shape: [4] }, { shape: [4] }], [
          ins(1, "comm.recv", [], [0], { peer: 0, tag: 3 }),
          ins(0, "fsm_copy", [0], [1], {}, [0]),
        ]),
      ],
    });
    const t0 = performance.now();
    const f = await rejection(c.run());
    expect(performance.now() - t0).toBeLessThan(3000);
    expect(f).toMatchObject({ kind: "timeout", device: 1, localDevice: 1, instruction: 0, op: "comm.recv", peers: [0], busy: [] });
    expect(f.message).toMatch(/^recv at rank 1 from rank 0 \(tag 3\): timed out after 0\.5 s; rank 0 never sent$/);
  });

  it("refuses run, set and get while a step runs", async () => {
    const c = createNativeCluster({ devices: [device([{ shape: [1 << 16] }], [ins(0, "fill", [], [0], { value: 2 })])] });
    const step = c.run();
    expect(() => c.run()).toThrow(/the cluster is running a step: wait for run\(\) to settle/);
    expect(() => c.get(0, 0)).toThrow(/running a step/);
    expect(() => c.set(0, 0, new Float32Array(1 << 16))).toThrow(/running a step/);
    await step;
    expect(c.get(0, 0)[0]).toBe(2);
  });

  it("a one-device program (its compute stream run on the worker's thread) runs, again and again", async () => {
    const c = createNativeCluster({ devices: [good] });
    c.set(0, 0, Float32Array.of(1.5, -2));
    for (let r = 0; r < 3; r++) {
      await c.run(r === 1);
      expect(Array.from(c.get(0, 1))).toEqual([1.5, -2]);
    }
    expect(c.timings(0)).toHaveLength(2);
    expect(c.communicatorCalls()).toEqual({ allReduce: 0, reduceScatter: 0, allGather: 0, broadcast: 0, reduce: 0, send: 0, recv: 0 });
  });

  describe("persistent device threads", () => {
    // Slots: 0 x[16], 1 y[16]. Compute copies x to y, then the comm stream all-reduces y over `world`.
    const copyAllReduce = (world: number[]): NativeClusterDevice =>
      device([{ shape: [16] }, { shape: [16] }], [
        ins(0, "fsm_copy", [0], [1]),
        ins(1, "comm.allReduce", [1], [1], { group: world }, [0]),
      ]);

    it("200 consecutive runs of a 2-device all-reduce give the same bits, the fp32 ordered sum, every time", async () => {
      const world = [0, 1];
      const c = createNativeCluster({ devices: world.map(() => copyAllReduce(world)) });
      const next = rng(7);
      const inputs = world.map(() => spreadData(16, next, 6));
      for (const d of world) c.set(d, 0, inputs[d]!);
      const want = bits(orderedSum(inputs));
      for (let r = 0; r < 200; r++) {
        await c.run(r % 50 === 0); // traced now and then: timings on reused threads
        for (const d of world) expect(bits(c.get(d, 1) as Float32Array)).toEqual(want);
      }
      expect(c.timings(0)).toHaveLength(4);
    });

    it("runs after a failed run work, again and again (the aborted communicator is not reused)", async () => {
      // Device 1's bad index fails while device 0 waits in the all-reduce, which must be aborted; the next run
      // must meet in a fresh communicator.
      const c = createNativeCluster({ devices: [embedThenAllReduce(), embedThenAllReduce()] });
      for (const d of [0, 1]) c.set(d, 1, f32([1, 2, 3, 4, 5, 6]));
      c.set(0, 0, new Int32Array([0, 2])); // rows [1, 2], [5, 6]
      for (let round = 0; round < 3; round++) {
        c.set(1, 0, new Int32Array([1, 5]));
        expect(await rejection(c.run(round === 1))).toMatchObject({ kind: "kernel", device: 1, instruction: 0, message: "embedding index 5 is out of range [0, 3)" });
        c.set(1, 0, new Int32Array([1, 1])); // rows [3, 4], [3, 4]
        for (let r = 0; r < 10; r++) {
          for (const d of [0, 1]) c.set(d, 3, f32([0, 0, 0, 0]));
          await c.run();
          for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual([1 + 3, 2 + 4, 5 + 3, 6 + 4]);
        }
      }
    });

    it("300 runs of a tiny 4-device program complete, and two clusters run at once", async () => {
      const world = range(4);
      const a = createNativeCluster({ devices: world.map(() => copyAllReduce(world)) });
      const b = createNativeCluster({ devices: world.slice(0, 2).map(() => copyAllReduce([0, 1])) });
      for (const d of world) a.set(d, 0, f32(range(16).map((k) => d + k)));
      for (const d of [0, 1]) b.set(d, 0, f32(range(16).map((k) => 10 * d - k)));
      for (let r = 0; r < 300; r++) {
        await (r % 3 === 0 ? Promise.all([a.run(), b.run()]) : a.run());
      }
      for (const d of world) expect(Array.from(a.get(d, 1))).toEqual(range(16).map((k) => 6 + 4 * k));
      for (const d of [0, 1]) expect(Array.from(b.get(d, 1))).toEqual(range(16).map((k) => 10 - 2 * k));
    });

    it("a process with idle clusters (one garbage-collected) exits promptly with code 0", () => {
      const script = `
        const addon = require(${JSON.stringify(nativeAddonPath())});
        const program = (world) => ({
          arenaBytes: 128,
          slots: [{ shape: [16], dtype: "f32", offset: 0 }, { shape: [16], dtype: "f32", offset: 64 }],
          instructions: [
            { stream: 0, op: "fsm_copy", inputs: [0], outputs: [1], attrs: {}, waits: [] },
            { stream: 1, op: "comm.allReduce", inputs: [1], outputs: [1], attrs: { group: world }, waits: [0] },
          ],
        });
        const make = () => new addon.NativeCluster({ devices: [0, 1, 2].map(() => program([0, 1, 2])) });
        (async () => {
          let dropped = make();
          await dropped.run();
          dropped = undefined;
          for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((r) => setImmediate(r)); }
          const kept = make();
          kept.set(0, 0, new Float32Array(16).fill(1));
          await kept.run();
          if (kept.get(2, 1)[0] !== 1) throw new Error("wrong result");
          console.log("ran");
        })().catch((e) => { console.error(e); process.exitCode = 1; });
      `;
      const child = spawnSync(process.execPath, ["--expose-gc", "-e", script], { encoding: "utf8", timeout: 20_000 });
      expect(child.error).toBeUndefined();
      expect(child.signal).toBeNull();
      expect(child.stderr).toBe("");
      expect(child.stdout.trim()).toBe("ran");
      expect(child.status).toBe(0);
    });
  });

  describe("construction errors", () => {
    const two = (a: NativeClusterInstruction[], b: NativeClusterInstruction[] = []) => ({
      devices: [device([{ shape: [4] }, { shape: [4] }, { shape: [2] }, { shape: [4], dtype: "i32" }], a),
        device([{ shape: [4] }, { shape: [4] }, { shape: [2] }, { shape: [4], dtype: "i32" }], b)],
    });
    const at = (device: number, instruction?: number, op?: string): Partial<NativeFailure> => ({
      device, localDevice: device, ...(instruction !== undefined && { instruction }), ...(op !== undefined && { op }),
    });
    // [name, make, where it happened, the root cause (the failure's message, without the location)]
    const cases: [string, () => unknown, Partial<NativeFailure>, RegExp][] = [
      ["no devices", () => createNativeCluster({ devices: [] }), {}, /^a cluster needs at least one device$/],
      ["a memory limit per device", () => createNativeCluster({ ...two([]), memoryLimitBytes: [1 << 20] }), {}, /^memoryLimitBytes has 1 entries for 2 devices$/],
      ["a wait on a later instruction of the same stream", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [1]), ins(0, "fsm_copy", [1], [0])])),
        at(0, 0, "fsm_copy"), /^waits on instruction 1, which comes later on the same stream$/],
      ["a wait on itself", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [0])])), at(0, 0, "fsm_copy"), /^waits on itself$/],
      ["a wait on no instruction", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [4])])), at(0, 0, "fsm_copy"), /^waits on instruction 4, which does not exist$/],
      ["waits forming a cycle across streams", () => createNativeCluster(two([], [ins(0, "fsm_copy", [0], [1], {}, [1]), ins(1, "comm.allReduce", [0], [0], { group: [1] }, [0])])),
        at(1, 0, "fsm_copy"), /^its waits form a cycle with the other stream/],
      ["a slot outside the arena", () => createNativeCluster({ devices: [{ arenaBytes: 32, slots: [{ shape: [4], dtype: "f32", offset: 0 }, { shape: [4], dtype: "f32", offset: 20 }], instructions: [] }] }),
        at(0), /^slot 1 \(bytes 20\.\.36\) lies outside the arena of 32 bytes$/],
      ["a group without the device", () => createNativeCluster(two([], [ins(1, "comm.allReduce", [0], [0], { group: [0] })])),
        at(1, 0, "comm.allReduce"), /^the group does not contain the device$/],
      ["a group not ascending", () => createNativeCluster(two([ins(1, "comm.allReduce", [0], [0], { group: [1, 0] })])), at(0, 0, "comm.allReduce"), /strictly ascending/],
      ["a reduceScatter count mismatch", () => createNativeCluster(two([ins(1, "comm.reduceScatter", [0], [1], { group: [0, 1] })])),
        at(0, 0, "comm.reduceScatter"), /^the input has 4 elements, not group size 2 x the output's 4$/],
      ["an allGather count mismatch", () => createNativeCluster(two([ins(1, "comm.allGather", [2], [2], { group: [0, 1] })])), at(0, 0, "comm.allGather"), /^the output has 2 elements/],
      ["an all-reduce that is not in place", () => createNativeCluster(two([ins(1, "comm.allReduce", [0], [1], { group: [0] })])), at(0, 0, "comm.allReduce"), /the same slot/],
      ["a broadcast root outside the group", () => createNativeCluster(two([ins(1, "comm.broadcast", [0], [0], { group: [0], root: 1 })])), at(0, 0, "comm.broadcast"), /^root 1 is not in the group$/],
      ["a send without a tag", () => createNativeCluster(two([ins(1, "comm.send", [0], [], { peer: 1 })])), at(0, 0, "comm.send"), /^attrs\.tag must be an integer$/],
      ["a recv from no device", () => createNativeCluster(two([ins(1, "comm.recv", [], [0], { peer: 2, tag: 0 })])), at(0, 0, "comm.recv"), /^peer 2 is not a device of the 2$/],
      ["a comm op on an i32 slot", () => createNativeCluster(two([ins(1, "comm.allReduce", [3], [3], { group: [0] })])), at(0, 0, "comm.allReduce"), /f32 slots only/],
      ["an unknown slot", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [9])])), at(0, 0, "fsm_copy"), /^uses unknown slot 9$/],
      ["an op the device kind has no kernel for", () => createNativeCluster(two([], [ins(0, "no_such_op", [0], [1])])),
        at(1, 0, "no_such_op"), /^not implemented: native kernel for op 'no_such_op' on device kind cpu$/],
      ["a bad stream", () => createNativeCluster(two([{ ...ins(0, "fsm_copy", [0], [1]), stream: 2 as 0 }])), at(0, 0, "fsm_copy"), /^stream must be 0 \(compute\) or 1 \(communication\)$/],
      // A malformed description anywhere (these were the step program's checks, the same parser's now).
      ["a negative arena size", () => createNativeCluster({ devices: [{ ...good, arenaBytes: -1 }] }), at(0), /^arenaBytes must be a non-negative integer$/],
      ["slots that are not an array", () => createNativeCluster({ devices: [{ ...good, slots: 3 as never }] }), at(0), /^slots must be an array$/],
      ["a slot that is not an object", () => createNativeCluster({ devices: [{ ...good, slots: [7 as never] }] }), at(0), /^slot 0 must be an object$/],
      ["a misaligned offset", () => createNativeCluster({ devices: [{ ...good, slots: [good.slots[0]!, { shape: [2], dtype: "f32", offset: 66 }] }] }), at(0),
        /^slot 1: offset 66 is not a multiple of 4/],
      ["a fractional offset", () => createNativeCluster({ devices: [{ ...good, slots: [good.slots[0]!, { shape: [2], dtype: "f32", offset: 1.5 }] }] }), at(0),
        /^slot 1: offset must be a non-negative integer$/],
      ["a slot past the arena", () => createNativeCluster({ devices: [{ ...good, slots: [good.slots[0]!, { shape: [40], dtype: "f32", offset: 64 }] }] }), at(0),
        /^slot 1 \(bytes 64\.\.224\) lies outside the arena of 128 bytes$/],
      ["instructions that are not an array", () => createNativeCluster({ devices: [{ ...good, instructions: {} as never }] }), at(0), /^instructions must be an array$/],
      ["an instruction that is not an object", () => createNativeCluster({ devices: [{ ...good, instructions: [5 as never] }] }), at(0, 0), /^must be an object$/],
      ["an op that is not a string", () => createNativeCluster({ devices: [{ ...good, instructions: [{ ...good.instructions[0]!, op: 5 as never }] }] }), at(0, 0), /^op must be a string$/],
      ["inputs that are not an array", () => createNativeCluster({ devices: [{ ...good, instructions: [{ ...good.instructions[0]!, inputs: 0 as never }] }] }), at(0, 0, "fsm_copy"),
        /^inputs must be an array$/],
      ["a negative slot id", () => createNativeCluster({ devices: [{ ...good, instructions: [{ ...good.instructions[0]!, inputs: [-1] }] }] }), at(0, 0, "fsm_copy"),
        /^inputs\[0\] must be a non-negative integer$/],
      ["attrs that are not an object", () => createNativeCluster({ devices: [{ ...good, instructions: [{ ...good.instructions[0]!, attrs: 3 as never }] }] }), at(0, 0, "fsm_copy"),
        /^attrs must be an object$/],
    ];
    for (const [name, make, where, message] of cases) {
      it(name, () => {
        const f = refusal(make);
        expect(f).toMatchObject({ kind: "description", ...where });
        if (where.device === undefined) expect(f.device).toBeUndefined();
        expect(f.message).toMatch(message);
      });
    }

    it("keeps the human line: the location, then the cause; TypeError and RangeError as before", () => {
      const later = thrownBy(() => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [1]), ins(0, "fsm_copy", [1], [0])])));
      expect(later).toBeInstanceOf(RangeError);
      expect(later.message).toBe("device 0 instruction 0 (fsm_copy) waits on instruction 1, which comes later on the same stream");
      expect(thrownBy(() => createNativeCluster(two([ins(0, "fsm_copy", [0], [9])])))).toBeInstanceOf(RangeError);
      const negative = thrownBy(() => createNativeCluster({ devices: [{ ...good, arenaBytes: -1 }] }));
      expect(negative).toBeInstanceOf(TypeError);
      expect(negative.message).toBe("device 0: arenaBytes must be a non-negative integer");
      expect(() => createNativeCluster(two([ins(0, "no_such_op", [0], [1])]))).toThrow(
        "device 0 instruction 0 (no_such_op): not implemented: native kernel for op 'no_such_op' on device kind cpu",
      );
      expect(() => createNativeCluster({ devices: [{ ...good, slots: [good.slots[0]!, { shape: [40], dtype: "f32", offset: 64 }] }] })).toThrow(
        /^device 0 slot 1 \(bytes 64\.\.224\) lies outside the arena of 128 bytes$/,
      );
      expect(refusal(() => createNativeCluster(null as never))).toMatchObject({ kind: "description" });
    });

    it("an arena over its device's memory: kind oom, with the arena's size and the limit", () => {
      const make = () => createNativeCluster({ ...two([]), memoryLimitBytes: [1 << 20, 100] });
      expect(thrownBy(make)).toBeInstanceOf(RangeError);
      expect(thrownBy(make).message).toBe("device 1: its arena of 256 bytes exceeds its memory limit of 100 bytes");
      expect(refusal(make)).toEqual({ kind: "oom", device: 1, localDevice: 1, arenaBytes: 256, limitBytes: 100, message: "its arena of 256 bytes exceeds its memory limit of 100 bytes" });
    });

    for (const arena of ["heap", "mmap"] as const) {
      it(`an arena the machine cannot allocate (${arena}): kind oom, with the arena's size and no limit`, () => {
        // 2^50 bytes: more than any x86-64 process can map, so the allocation fails whatever the overcommit policy.
        const make = () => createNativeCluster({ device: { kind: "cpu", arena }, devices: [{ arenaBytes: 2 ** 50, slots: [], instructions: [] }] });
        expect(make).toThrow(/^device 0: cannot allocate its arena of 1125899906842624 bytes: out of memory$/);
        expect(refusal(make)).toEqual({ kind: "oom", device: 0, localDevice: 0, arenaBytes: 2 ** 50, message: "cannot allocate its arena of 1125899906842624 bytes: out of memory" });
      });
    }
  });

  describe("the world: worldSize and ranks", () => {
    const one = (rank: number): NativeClusterDevice => device([{ shape: [4] }], [ins(1, "comm.allReduce", [0], [0], { group: [rank] })]);

    it("a world larger than this process's devices needs a communicator between processes, which the in-process one is not", () => {
      for (const communicator of [{ kind: "inprocess" } as const, { kind: "delay", seed: 1, maxMicros: 10 } as const]) {
        const f = refusal(() => createNativeCluster({ devices: [one(0), one(1)], worldSize: 4, communicator }));
        expect(f.kind).toBe("description");
        expect(f.message).toMatch(/^worldSize 4 but this process runs 2 device\(s\): ranks outside this process need a communicator between processes \(MPI\), which is not built yet$/);
      }
      // Groups and peers are checked against the world, not the local devices.
      expect(refusal(() => createNativeCluster({ devices: [device([{ shape: [4] }], [ins(1, "comm.allReduce", [0], [0], { group: [0, 5] })])], worldSize: 4 })).message)
        .toMatch(/^the group must be strictly ascending ranks in \[0, 4\)$/);
    });

    it("the default world is the local devices, ranks 0..n-1; spelling them out changes nothing", async () => {
      const a = await runScenario(collectives);
      const b = await runScenario(collectives, { worldSize: 4, ranks: [0, 1, 2, 3] });
      expect(b).toEqual(a);
    });

    const cases: [string, Partial<NativeClusterDescription>, RegExp][] = [
      ["a worldSize below the devices", { worldSize: 1 }, /^worldSize 1 is smaller than this process's 2 devices$/],
      ["a worldSize that is not an integer", { worldSize: 2.5 }, /^worldSize must be a non-negative integer$/],
      ["ranks not one per device", { ranks: [0] }, /^ranks has 1 entries for 2 devices$/],
      ["ranks not ascending", { ranks: [1, 0] }, /^ranks must be strictly ascending global ranks in \[0, 2\): ranks\[1\] is 0$/],
      ["a repeated rank", { worldSize: 4, ranks: [1, 1] }, /^ranks must be strictly ascending global ranks in \[0, 4\): ranks\[1\] is 1$/],
      ["a rank outside the world", { ranks: [0, 2] }, /^ranks must be strictly ascending global ranks in \[0, 2\): ranks\[1\] is 2$/],
      ["a rank that is not an integer", { ranks: [0, -1] }, /^ranks\[1\] must be a non-negative integer$/],
      ["an unknown device kind", { device: { kind: "tpu" } as never }, /^device\.kind must be "cpu", "cuda" or "simt", got "tpu"$/],
      // Built where nvcc was found (then this machine's missing GPU is the refusal), else refused as not built.
      ...((nativeGpuKind("cuda")?.devices ?? 0) === 0
        ? [["the cuda kind without a GPU", { device: { kind: "cuda" } }, /^no CUDA device \(|^device\.kind "cuda": this fsm was built without CUDA/] as [string, Partial<NativeClusterDescription>, RegExp]]
        : []),
      ["an option the cuda kind lacks", { device: { kind: "simt", arena: "heap" } as never }, /^device: device kind simt has no option 'arena'$/],
      ["an unknown arena route", { device: { kind: "cpu", arena: "disk" } as never }, /^device\.arena must be "heap" or "mmap"$/],
      ["an option the device kind lacks", { device: { kind: "cpu", arenas: "mmap" } as never }, /^device: device kind cpu has no option 'arenas'$/],
      ["an unknown communicator kind", { communicator: { kind: "tcp" } as never }, /^communicator\.kind must be "inprocess", "delay", "mpi" or "nccl", got "tcp"$/],
      // Outside mpirun (a world of one process), an mpi communicator cannot be given a world of 2 in one process.
      ["mpi for ranks the processes cannot hold", { communicator: { kind: "mpi" }, worldSize: 4, ranks: [0, 1] }, /^communicator: the mpi communicator runs contiguous blocks of ranks|^communicator\.kind "mpi": this fsm was built without MPI/],
      ["a delay without a seed", { communicator: { kind: "delay", maxMicros: 5 } as never }, /^communicator\.seed must be an integer in \[0, /],
      ["a negative delay", { communicator: { kind: "delay", seed: 1, maxMicros: -1 } }, /^communicator\.maxMicros must be an integer in \[0, 1e\+06\]$/],
    ];
    for (const [name, extra, message] of cases) {
      it(`refuses ${name}`, () => {
        const f = refusal(() => createNativeCluster({ devices: [one(0), device([{ shape: [4] }], [])], ...extra }));
        expect(f.kind).toBe("description");
        expect(f.message).toMatch(message);
      });
    }
  });

  describe("the seams: other communicators and arena routes give the same bits", () => {
    for (const s of SCENARIOS) {
      it(`${s.name}: the delay communicator and the mmap arena route compute what the in-process one on the heap does`, async () => {
        const reference = await runScenario(s);
        const calls = Object.values(reference.calls).reduce((a, b) => a + b, 0);
        expect(calls).toBeGreaterThan(0);
        for (const seed of [1, 2]) {
          const delayed = await runScenario(s, { communicator: { kind: "delay", seed, maxMicros: 300 } });
          expect(delayed.slots).toEqual(reference.slots);
          expect(delayed.calls).toEqual(reference.calls); // the same calls, made through the decorator
        }
        const mapped = await runScenario(s, { device: { kind: "cpu", arena: "mmap" } });
        expect(mapped.slots).toEqual(reference.slots);
        const both = await runScenario(s, { device: { kind: "cpu", arena: "mmap" }, communicator: { kind: "delay", seed: 3, maxMicros: 100 } });
        expect(both.slots).toEqual(reference.slots);
      });
    }

    it("the delay communicator really sleeps around every call (seeded 0..maxMicros µs before and after)", async () => {
      // Each device of `collectives` makes 5 communicator calls a run, so 10 sleeps of up to 20 ms each: the run
      // takes at least the longest device's sum of them (over 20 ms unless ten uniform draws sum below two).
      const c = createNativeCluster({ devices: collectives.devices, communicator: { kind: "delay", seed: 9, maxMicros: 20_000 } });
      collectives.feed(c);
      const t0 = performance.now();
      await c.run();
      expect(performance.now() - t0).toBeGreaterThan(20);
      expect(c.communicatorCalls()).toEqual({ allReduce: 4, reduceScatter: 4, allGather: 4, broadcast: 4, reduce: 4, send: 0, recv: 0 });
    });

    it("a failure through the delay communicator is reported as through the in-process one", async () => {
      const c = createNativeCluster({ devices: [embedThenAllReduce(), embedThenAllReduce()], communicator: { kind: "delay", seed: 5, maxMicros: 200 } });
      for (const d of [0, 1]) c.set(d, 1, f32([1, 2, 3, 4, 5, 6]));
      c.set(0, 0, new Int32Array([0, 2]));
      c.set(1, 0, new Int32Array([1, 5]));
      expect(await rejection(c.run())).toMatchObject({ kind: "kernel", device: 1, instruction: 0, op: "embedding" });
      c.set(1, 0, new Int32Array([1, 1]));
      await c.run(); // an aborted communicator starts fresh for the next step
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual([1 + 3, 2 + 4, 5 + 3, 6 + 4]);
    });
  });

  describe("zeroing outputs (the kernel contract)", () => {
    it("an output is zeroed first unless it shares bytes with an input or the instruction is in place", async () => {
      // Slots: 0 a[3], 1 b[3], 2 ids[2] i32, 3 table[4,1] (embedding_grad_weight writes only the rows its ids
      // name: the others must read 0, not what was there), 4 dy[2,1].
      const c = createNativeCluster({
        devices: [device([{ shape: [3] }, { shape: [3] }, { shape: [2], dtype: "i32" }, { shape: [4, 1] }, { shape: [2, 1] }], [
          ins(0, "add", [0, 1], [0]), // a = a + b with the output its own first input: not zeroed (else a = b)
          ins(0, "embedding_grad_weight", [4, 2], [3], { num: 4 }),
        ])],
      });
      c.set(0, 0, f32([1, 2, 3]));
      c.set(0, 1, f32([10, 20, 30]));
      c.set(0, 2, new Int32Array([2, 0]));
      c.set(0, 3, f32([7, 7, 7, 7]));
      c.set(0, 4, f32([0.5, -1]));
      await c.run();
      expect(Array.from(c.get(0, 0))).toEqual([11, 22, 33]);
      expect(Array.from(c.get(0, 3))).toEqual([-1, 0, 0.5, 0]);
      await c.run();
      expect(Array.from(c.get(0, 0))).toEqual([21, 42, 63]);
    });
  });

  it("is deterministic: the same matmul + all-reduce on 4 devices gives identical bits 3 times, the fp32 ordered sum", async () => {
    const world = range(4);
    const c = createNativeCluster({ devices: matmulAllReduce.devices });
    matmulAllReduce.feed(c);
    const runs: number[][][] = [];
    for (let r = 0; r < 3; r++) {
      await c.run();
      runs.push(world.map((d) => bits(c.get(d, 2) as Float32Array)));
    }
    const want = bits(orderedSum(world.map((d) => c.get(d, 3) as Float32Array)));
    for (const run of runs) for (const got of run) expect(got).toEqual(want);
  });
});
