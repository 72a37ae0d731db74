// The cluster executor (native/src/cluster) through createNativeCluster: hand-built device programs whose
// results are checked against hand-computed values or the fp32 ordered sum (bit for bit), compute/communication
// overlap seen in the trace, failures (real and injected) that reject naming the root cause instead of hanging,
// construction errors (an arena over its device's memory included), and bit-identical results run to run.
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  createNativeCluster,
  nativeAddonPath,
  type NativeAttrs,
  type NativeClusterDevice,
  type NativeClusterInstruction,
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

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const f32 = (xs: number[]): Float32Array => new Float32Array(xs);

describe("native cluster", () => {
  it("data parallel: each device multiplies, all-reduces on its comm stream, then copies on compute", async () => {
    // Slots: 0 x[2,3], 1 W[3,2], 2 y[2,2], 3 z[2,2].
    const program = (): NativeClusterDevice =>
      device([{ shape: [2, 3] }, { shape: [3, 2] }, { shape: [2, 2] }, { shape: [2, 2] }], [
        ins(0, "matmul", [0, 1], [2]),
        ins(1, "comm.allReduce", [2], [2], { group: [0, 1] }, [0]),
        ins(0, "fsm_copy", [2], [3], {}, [1]),
      ]);
    const c = createNativeCluster({ devices: [program(), program()] });
    expect(c.deviceCount()).toBe(2);
    expect(c.arenaBytes(1)).toBe(256);
    c.set(0, 0, f32([1, 2, 3, 4, 5, 6]));
    c.set(0, 1, f32([1, 0, 0, 1, 1, 1])); // y0 = [[4, 5], [10, 11]]
    c.set(1, 0, f32([1, 1, 1, 2, 0, -1]));
    c.set(1, 1, f32([2, 1, 0, 3, 1, -1])); // y1 = [[3, 3], [3, 3]]
    await c.run();
    for (const d of [0, 1]) {
      expect(Array.from(c.get(d, 2))).toEqual([7, 8, 13, 14]);
      expect(Array.from(c.get(d, 3))).toEqual([7, 8, 13, 14]);
    }
    expect(c.timings(0)).toHaveLength(0); // nothing traced yet
  });

  it("pipeline: device 0 computes and sends (tag 7), device 1 receives and computes", async () => {
    const c = createNativeCluster({
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
    });
    c.set(0, 0, f32([1, 2]));
    c.set(0, 1, f32([1, 2, 3, 4, 5, 6])); // h = [9, 12, 15]
    await c.run();
    expect(Array.from(c.get(1, 0))).toEqual([9, 12, 15]);
    expect(Array.from(c.get(1, 1))).toEqual([81, 144, 225]);
  });

  it("reduceScatter, allGather, broadcast, reduce (+ an add on the comm stream) and pair all-reduces on 4 devices", async () => {
    const world = range(4);
    // Slots: 0 a[8], 1 rs[2], 2 ag[8], 3 b[4], 4 r[4], 5 p[1].
    const program = (d: number): NativeClusterDevice =>
      device([{ shape: [8] }, { shape: [2] }, { shape: [8] }, { shape: [4] }, { shape: [4] }, { shape: [1] }], [
        ins(1, "comm.reduceScatter", [0], [1], { group: world }),
        ins(1, "comm.allGather", [1], [2], { group: world }),
        ins(1, "comm.broadcast", [3], [3], { group: world, root: 2 }),
        ins(1, "comm.reduce", [4], [4], { group: world, root: 1 }),
        ins(1, "fsm_add_inplace", [4, 3], [4]),
        ins(0, "comm.allReduce", [5], [5], { group: [d % 2, (d % 2) + 2] }), // a collective on the compute stream
      ]);
    const c = createNativeCluster({ devices: world.map(program) });
    for (const d of world) {
      c.set(d, 0, f32(range(8).map((k) => d * 10 + k)));
      c.set(d, 3, f32(range(4).map((k) => d + 1 + k)));
      c.set(d, 4, f32(range(4).map((k) => 100 * d + k)));
      c.set(d, 5, f32([d]));
    }
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
    await expect(c.run()).rejects.toThrow(/^device 1 instruction 0 \(embedding\): embedding index 5 is out of range \[0, 3\)$/);
    expect(performance.now() - t0).toBeLessThan(3000);

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
      await expect(c.run()).rejects.toThrow(/^device 1 instruction 0 \(embedding\): injected fault$/);
      expect(performance.now() - t0).toBeLessThan(3000); // woken by the abort, not the 60 s timeout
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual(sum);
    });

    it("a communication fault on device 0's all-reduce aborts device 1 inside it", async () => {
      const c = ready();
      c.injectFault(0, 1, "fail");
      const t0 = performance.now();
      await expect(c.run()).rejects.toThrow(/^device 0 instruction 1 \(comm\.allReduce\): injected fault$/);
      expect(performance.now() - t0).toBeLessThan(3000);
    });

    it("a NaN fault poisons the instruction's outputs, and so everything computed from them", async () => {
      const c = ready();
      c.injectFault(0, 0, "nan");
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3)).every(Number.isNaN)).toBe(true);
      await c.run();
      for (const d of [0, 1]) expect(Array.from(c.get(d, 3))).toEqual(sum);
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
    await expect(c.run()).rejects.toThrow(/^device 1 instruction 0 \(comm\.recv\): recv at rank 1 from rank 0 \(tag 3\): timed out/);
    expect(performance.now() - t0).toBeLessThan(3000);
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
        await expect(c.run(round === 1)).rejects.toThrow(/^device 1 instruction 0 \(embedding\): embedding index 5 is out of range \[0, 3\)$/);
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
    const cases: [string, () => unknown, RegExp][] = [
      ["no devices", () => createNativeCluster({ devices: [] }), /at least one device/],
      ["an arena over its device's memory", () => createNativeCluster({ ...two([]), memoryLimitBytes: [1 << 20, 100] }),
        /^device 1: its arena of 256 bytes exceeds its memory limit of 100 bytes$/],
      ["a memory limit per device", () => createNativeCluster({ ...two([]), memoryLimitBytes: [1 << 20] }), /^memoryLimitBytes has 1 entries for 2 devices$/],
      // 2^50 bytes: more than any x86-64 process can map, so the allocation fails whatever the overcommit policy.
      ["an arena the machine cannot allocate", () => createNativeCluster({ devices: [{ arenaBytes: 2 ** 50, slots: [], instructions: [] }] }),
        /^device 0: cannot allocate its arena of 1125899906842624 bytes: out of memory$/],
      ["a wait on a later instruction of the same stream", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [1]), ins(0, "fsm_copy", [1], [0])])),
        /^device 0 instruction 0 \(fsm_copy\) waits on instruction 1, which comes later on the same stream$/],
      ["a wait on itself", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [0])])), /device 0 instruction 0 \(fsm_copy\) waits on itself/],
      ["a wait on no instruction", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [1], {}, [4])])), /waits on instruction 4, which does not exist/],
      ["waits forming a cycle across streams", () => createNativeCluster(two([], [ins(0, "fsm_copy", [0], [1], {}, [1]), ins(1, "comm.allReduce", [0], [0], { group: [1] }, [0])])),
        /^device 1 instruction 0 \(fsm_copy\): its waits form a cycle/],
      ["a slot outside the arena", () => createNativeCluster({ devices: [{ arenaBytes: 32, slots: [{ shape: [4], dtype: "f32", offset: 0 }, { shape: [4], dtype: "f32", offset: 20 }], instructions: [] }] }),
        /^device 0 slot 1 \(bytes 20\.\.36\) lies outside the arena of 32 bytes$/],
      ["a group without the device", () => createNativeCluster(two([], [ins(1, "comm.allReduce", [0], [0], { group: [0] })])),
        /^device 1 instruction 0 \(comm\.allReduce\): the group does not contain the device$/],
      ["a group not ascending", () => createNativeCluster(two([ins(1, "comm.allReduce", [0], [0], { group: [1, 0] })])), /strictly ascending/],
      ["a reduceScatter count mismatch", () => createNativeCluster(two([ins(1, "comm.reduceScatter", [0], [1], { group: [0, 1] })])),
        /^device 0 instruction 0 \(comm\.reduceScatter\): the input has 4 elements, not group size 2 x the output's 4$/],
      ["an allGather count mismatch", () => createNativeCluster(two([ins(1, "comm.allGather", [2], [2], { group: [0, 1] })])), /allGather\): the output has 2 elements/],
      ["an all-reduce that is not in place", () => createNativeCluster(two([ins(1, "comm.allReduce", [0], [1], { group: [0] })])), /the same slot/],
      ["a broadcast root outside the group", () => createNativeCluster(two([ins(1, "comm.broadcast", [0], [0], { group: [0], root: 1 })])), /root 1 is not in the group/],
      ["a send without a tag", () => createNativeCluster(two([ins(1, "comm.send", [0], [], { peer: 1 })])), /device 0 instruction 0 \(comm\.send\): attrs\.tag must be an integer/],
      ["a recv from no device", () => createNativeCluster(two([ins(1, "comm.recv", [], [0], { peer: 2, tag: 0 })])), /peer 2 is not a device/],
      ["a comm op on an i32 slot", () => createNativeCluster(two([ins(1, "comm.allReduce", [3], [3], { group: [0] })])), /f32 slots only/],
      ["an unknown slot", () => createNativeCluster(two([ins(0, "fsm_copy", [0], [9])])), /device 0 instruction 0 \(fsm_copy\) uses unknown slot 9/],
      ["an unknown op", () => createNativeCluster(two([ins(0, "no_such_op", [0], [1])])),
        /^device 0 instruction 0 \(no_such_op\): not implemented: native kernel for op 'no_such_op'$/],
      ["a bad stream", () => createNativeCluster(two([{ ...ins(0, "fsm_copy", [0], [1]), stream: 2 as 0 }])), /stream must be 0 \(compute\) or 1 \(communication\)/],
    ];
    for (const [name, make, message] of cases) it(name, () => expect(make).toThrow(message));
  });

  it("is deterministic: the same matmul + all-reduce on 4 devices gives identical bits 3 times, the fp32 ordered sum", async () => {
    const world = range(4);
    // Slots: 0 x[16,32], 1 W[32,8], 2 y[16,8], 3 local[16,8] (this device's product, before the all-reduce).
    const program = (): NativeClusterDevice =>
      device([{ shape: [16, 32] }, { shape: [32, 8] }, { shape: [16, 8] }, { shape: [16, 8] }], [
        ins(0, "matmul", [0, 1], [2]),
        ins(0, "fsm_copy", [2], [3]),
        ins(1, "comm.allReduce", [2], [2], { group: world }, [1]),
      ]);
    const c = createNativeCluster({ devices: world.map(program) });
    const next = rng(42);
    for (const d of world) {
      c.set(d, 0, spreadData(16 * 32, next, 6));
      c.set(d, 1, spreadData(32 * 8, next, 6));
    }
    const runs: number[][][] = [];
    for (let r = 0; r < 3; r++) {
      await c.run();
      runs.push(world.map((d) => bits(c.get(d, 2) as Float32Array)));
    }
    const want = bits(orderedSum(world.map((d) => c.get(d, 3) as Float32Array)));
    for (const run of runs) for (const got of run) expect(got).toEqual(want);
  });
});
