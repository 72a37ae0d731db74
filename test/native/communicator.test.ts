// The in-process communicator (native/src/comm) through nativeCommRun: every collective and send/recv against a
// TypeScript reference summing in the same order in fp32 (bit-identical, not approximately equal), determinism
// under random thread timing, concurrent sub-groups, and failures (abort, mismatches, timeouts) that reject
// quickly with a message instead of hanging.
import { describe, expect, it } from "vitest";
import { nativeCommRun, nativeFailure, type CommScriptOp } from "../../src/native/binding.js";
import { rng, spreadData } from "../support/prng.js";

// The spec: ((x0 + x1) + x2) + ... in fp32, members in group order; avg divides the fp32 sum once.
function orderedSum(inputs: readonly Float32Array[], avg = false): Float32Array {
  const out = new Float32Array(inputs[0]!);
  for (let j = 1; j < inputs.length; j++) {
    for (let k = 0; k < out.length; k++) out[k] = Math.fround(out[k]! + inputs[j]![k]!);
  }
  if (avg) for (let k = 0; k < out.length; k++) out[k] = Math.fround(out[k]! / inputs.length);
  return out;
}

// Bit patterns (as hex, one string: quick to compare at 70k elements), so -0/+0 and every last ulp count.
function bits(a: Float32Array | null | undefined): string {
  expect(a).toBeInstanceOf(Float32Array);
  return Buffer.from(a!.buffer, a!.byteOffset, a!.byteLength).toString("hex");
}

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i);
const WORLDS = [1, 2, 3, 4, 8];

async function rejectsQuickly(run: Promise<unknown>, message: RegExp): Promise<void> {
  const t0 = performance.now();
  await expect(run).rejects.toThrow(message);
  expect(performance.now() - t0).toBeLessThan(1000);
}

// Two paths: up to 2^16 floats of scratch the last rank to arrive does the whole collective for the group;
// above, every rank computes its slice between two meeting points.
const SIZES = [
  { path: "delivered by the last to arrive", count: 1001, per: 37, rooted: 257 },
  { path: "sliced over the ranks", count: 70001, per: 17001, rooted: 70001 },
];

describe("in-process communicator", () => {
  for (const n of WORLDS) for (const { path, count, per: perRank, rooted } of SIZES) {
    it(`allReduce (sum and avg) on a world of ${n} is the ordered fp32 sum on every rank (${path})`, async () => {
      const next = rng(100 + n);
      // count is not a multiple of n: uneven slices
      const inputs = range(n).map(() => spreadData(count, next, 8));
      const world = range(n);
      const script = range(n).map((r): CommScriptOp[] => [
        { op: "allReduce", group: world, data: inputs[r]! },
        { op: "allReduce", group: world, data: inputs[r]!, avg: true },
      ]);
      const out = await nativeCommRun(n, script);
      for (const r of world) {
        expect(bits(out[r]![0])).toEqual(bits(orderedSum(inputs)));
        expect(bits(out[r]![1])).toEqual(bits(orderedSum(inputs, true)));
      }
    });

    it(`reduceScatter and allGather on a world of ${n} (${path})`, async () => {
      const next = rng(200 + n);
      // Large: over 2^16 floats of scratch from a world of 4 on.
      const per = perRank;
      const inputs = range(n).map(() => spreadData(per * n, next, 8));
      const shards = range(n).map(() => spreadData(per, next, 8));
      const world = range(n);
      const script = range(n).map((r): CommScriptOp[] => [
        { op: "reduceScatter", group: world, data: inputs[r]! },
        { op: "allGather", group: world, data: shards[r]! },
        { op: "reduceScatter", group: world, data: inputs[r]!, avg: true },
      ]);
      const out = await nativeCommRun(n, script);
      const sum = orderedSum(inputs);
      const avg = orderedSum(inputs, true);
      const gathered = new Float32Array(per * n);
      shards.forEach((s, i) => gathered.set(s, i * per));
      for (const r of world) {
        expect(bits(out[r]![0])).toEqual(bits(sum.subarray(r * per, (r + 1) * per)));
        expect(bits(out[r]![1])).toEqual(bits(gathered));
        expect(bits(out[r]![2])).toEqual(bits(avg.subarray(r * per, (r + 1) * per)));
      }
    });

    it(`broadcast and reduce on a world of ${n} (${path})`, async () => {
      const next = rng(300 + n);
      const count = rooted;
      const inputs = range(n).map(() => spreadData(count, next, 8));
      const world = range(n);
      const bRoot = n - 1;
      const rRoot = Math.floor(n / 2);
      const script = range(n).map((r): CommScriptOp[] => [
        { op: "broadcast", group: world, root: bRoot, data: inputs[r]! },
        { op: "reduce", group: world, root: rRoot, data: inputs[r]! },
      ]);
      const out = await nativeCommRun(n, script);
      for (const r of world) {
        expect(bits(out[r]![0])).toEqual(bits(inputs[bRoot]));
        expect(bits(out[r]![1])).toEqual(bits(r === rRoot ? orderedSum(inputs) : inputs[r]));
      }
    });
  }

  it("the test data is order-sensitive: a reversed sum differs, so bit equality means the order was kept", () => {
    const next = rng(108);
    const inputs = range(8).map(() => spreadData(1001, next, 8));
    expect(bits(orderedSum([...inputs].reverse()))).not.toEqual(bits(orderedSum(inputs)));
  });

  it("is deterministic: the same all-reduce 20 times under random thread sleeps gives identical bits", async () => {
    const n = 8;
    const next = rng(7);
    const inputs = range(n).map(() => spreadData(4096, next, 8));
    const want = bits(orderedSum(inputs));
    const script = range(n).map((r): CommScriptOp[] => [{ op: "allReduce", group: range(n), data: inputs[r]! }]);
    for (let run = 0; run < 20; run++) {
      const out = await nativeCommRun(n, script, { jitterMicros: 300, seed: run });
      for (let r = 0; r < n; r++) expect(bits(out[r]![0]), `run ${run} rank ${r}`).toEqual(want);
    }
  });

  it("runs collectives on disjoint and nested sub-groups concurrently (tensor pairs, data-parallel halves, world)", async () => {
    const n = 8;
    const next = rng(11);
    const pairOf = (r: number): number[] => [r & ~1, r | 1];
    const parityOf = (r: number): number[] => range(n).filter((x) => x % 2 === r % 2);
    const a = range(n).map(() => spreadData(333, next, 8));
    const b = range(n).map(() => spreadData(333, next, 8));
    const c = range(n).map(() => spreadData(64, next, 8));
    const script = range(n).map((r): CommScriptOp[] => [
      { op: "allReduce", group: pairOf(r), data: a[r]! },
      { op: "allReduce", group: parityOf(r), data: b[r]! },
      { op: "allGather", group: parityOf(r), data: c[r]! },
      { op: "allReduce", group: range(n), data: a[r]! },
    ]);
    for (let run = 0; run < 5; run++) {
      const out = await nativeCommRun(n, script, { jitterMicros: 200, seed: run });
      for (let r = 0; r < n; r++) {
        expect(bits(out[r]![0])).toEqual(bits(orderedSum(pairOf(r).map((x) => a[x]!))));
        expect(bits(out[r]![1])).toEqual(bits(orderedSum(parityOf(r).map((x) => b[x]!))));
        const gathered = new Float32Array(64 * 4);
        parityOf(r).forEach((x, i) => gathered.set(c[x]!, i * 64));
        expect(bits(out[r]![2])).toEqual(bits(gathered));
        expect(bits(out[r]![3])).toEqual(bits(orderedSum(a)));
      }
    }
  });

  it("send/recv: a pipeline forward and backward, both neighbours sending first, messages kept in order", async () => {
    const n = 4;
    const next = rng(5);
    const fwd = range(n).map(() => spreadData(50, next, 8));
    const bwd = range(n).map(() => spreadData(50, next, 8));
    const extra = spreadData(3, next, 8);
    const script = range(n).map((r): CommScriptOp[] => {
      const ops: CommScriptOp[] = [];
      // Forward: receive activations from r - 1, send to r + 1; backward: the reverse. Every rank sends before
      // it receives, which only works because sends are buffered.
      if (r < n - 1) ops.push({ op: "send", peer: r + 1, tag: 0, data: fwd[r]! });
      if (r > 0) ops.push({ op: "send", peer: r - 1, tag: 1, data: bwd[r]! });
      if (r > 0) ops.push({ op: "recv", peer: r - 1, tag: 0, count: 50 });
      if (r < n - 1) ops.push({ op: "recv", peer: r + 1, tag: 1, count: 50 });
      return ops;
    });
    // Two messages with the same key arrive in send order.
    script[0]!.push({ op: "send", peer: 3, tag: 9, data: extra }, { op: "send", peer: 3, tag: 9, data: fwd[0]! });
    script[3]!.push({ op: "recv", peer: 0, tag: 9, count: 3 }, { op: "recv", peer: 0, tag: 9, count: 50 });
    const out = await nativeCommRun(n, script, { jitterMicros: 100 });
    expect(out[0]![0]).toBeNull(); // a send has no output
    expect(bits(out[0]![1])).toEqual(bits(bwd[1])); // rank 0: send fwd, recv bwd from 1
    expect(bits(out[1]![2])).toEqual(bits(fwd[0]));
    expect(bits(out[1]![3])).toEqual(bits(bwd[2]));
    expect(bits(out[2]![2])).toEqual(bits(fwd[1]));
    expect(bits(out[2]![3])).toEqual(bits(bwd[3]));
    expect(bits(out[3]![1])).toEqual(bits(fwd[2]));
    expect(bits(out[3]![2])).toEqual(bits(extra));
    expect(bits(out[3]![3])).toEqual(bits(fwd[0]));
  });

  describe("failures reject quickly with a message, never hang", () => {
    const data = (k: number): Float32Array => new Float32Array(k).fill(1);

    it("mismatched counts", async () => {
      const script: CommScriptOp[][] = [
        [{ op: "allReduce", group: [0, 1, 2], data: data(4) }],
        [{ op: "allReduce", group: [0, 1, 2], data: data(4) }],
        [{ op: "sleep", micros: 2000 }, { op: "allReduce", group: [0, 1, 2], data: data(3) }],
      ];
      // Whoever opened the meeting is the reference; under load rank 2 may come first despite its sleep.
      await rejectsQuickly(nativeCommRun(3, script), /rank \d passed count [34] to allReduce, rank \d passed [34]/);
    });

    it("members calling different collectives, or different roots", async () => {
      await rejectsQuickly(
        nativeCommRun(2, [
          [{ op: "allReduce", group: [0, 1], data: data(2) }],
          [{ op: "sleep", micros: 2000 }, { op: "allGather", group: [0, 1], data: data(2) }],
        ]),
        /rank [01] called all(Gather|Reduce) where rank [01] called all(Reduce|Gather) \(members must call/,
      );
      await rejectsQuickly(
        nativeCommRun(2, [
          [{ op: "broadcast", group: [0, 1], root: 0, data: data(2) }],
          [{ op: "sleep", micros: 2000 }, { op: "broadcast", group: [0, 1], root: 1, data: data(2) }],
        ]),
        /rank [01] passed root [01] to broadcast, rank [01] passed [01]/,
      );
    });

    it("a rank that aborts stops every rank, including ones waiting in collectives and recvs", async () => {
      const n = 4;
      const script = range(n).map((r): CommScriptOp[] =>
        r === 2
          ? [{ op: "sleep", micros: 20_000 }, { op: "abort", message: "rank 2: loss is NaN" }]
          : r === 3
            ? [{ op: "recv", peer: 2, tag: 0, count: 1 }]
            : [
                { op: "allReduce", group: [0, 1], data: data(8) },
                { op: "allReduce", group: range(n), data: data(8) },
              ],
      );
      await rejectsQuickly(nativeCommRun(n, script, { timeoutMs: 30_000 }), /^rank 2: loss is NaN$/);
    });

    it("a rank that never arrives: the timeout names the collective and the missing rank", async () => {
      const script: CommScriptOp[][] = [
        [{ op: "allReduce", group: [0, 1, 2], data: data(4) }],
        [{ op: "allReduce", group: [0, 1, 2], data: data(4) }],
        [],
      ];
      await rejectsQuickly(
        nativeCommRun(3, script, { timeoutMs: 100 }),
        /allReduce #0 on group \[0, 1, 2\]: timed out after 0\.1 s at rank [01]; rank\(s\) \[2\] never arrived/,
      );
    });

    it("a recv whose send never comes times out naming the peer; a recv of the wrong size aborts", async () => {
      await rejectsQuickly(
        nativeCommRun(2, [[{ op: "recv", peer: 1, tag: 3, count: 2 }], []], { timeoutMs: 100 }),
        /recv at rank 0 from rank 1 \(tag 3\): timed out after 0\.1 s; rank 1 never sent/,
      );
      await rejectsQuickly(
        nativeCommRun(2, [[{ op: "recv", peer: 1, tag: 3, count: 2 }], [{ op: "send", peer: 0, tag: 3, data: data(5) }]]),
        /recv at rank 0 from rank 1 \(tag 3\): expects 2 elements, the send had 5/,
      );
    });

    it("failures carry their kind (timeout with the missing peers, comm, aborted) as fields", async () => {
      const failureOf = async (run: Promise<unknown>) => {
        try {
          await run;
        } catch (e) {
          return nativeFailure(e);
        }
        throw new Error("expected the run to reject");
      };
      const never: CommScriptOp[][] = [[{ op: "allReduce", group: [0, 1, 2], data: data(4) }], [{ op: "allReduce", group: [0, 1, 2], data: data(4) }], []];
      const timeout = await failureOf(nativeCommRun(3, never, { timeoutMs: 100 }));
      expect(timeout).toMatchObject({ kind: "timeout", peers: [2] });
      expect(timeout!.message).toMatch(/^allReduce #0 on group \[0, 1, 2\]: timed out after 0\.1 s at rank [01]; rank\(s\) \[2\] never arrived$/);
      const recv = await failureOf(nativeCommRun(2, [[{ op: "recv", peer: 1, tag: 3, count: 2 }], []], { timeoutMs: 100 }));
      expect(recv).toMatchObject({ kind: "timeout", device: 0, peers: [1] });
      expect(await failureOf(nativeCommRun(2, [[{ op: "recv", peer: 1, tag: 3, count: 2 }], [{ op: "send", peer: 0, tag: 3, data: data(5) }]]))).toMatchObject({
        kind: "comm", device: 0, message: "recv at rank 0 from rank 1 (tag 3): expects 2 elements, the send had 5",
      });
      expect(await failureOf(nativeCommRun(2, [[{ op: "abort", message: "stop" }], [{ op: "allReduce", group: [0, 1], data: data(1) }]]))).toMatchObject({
        kind: "aborted", device: 0, message: "stop",
      });
      expect(await failureOf(nativeCommRun(2, [[{ op: "allReduce", group: [1, 0], data: data(1) }], []]))).toMatchObject({ kind: "comm" });
    });

    it("bad groups and roots abort with a message; a malformed script throws", async () => {
      await rejectsQuickly(
        nativeCommRun(2, [[{ op: "allReduce", group: [1], data: data(1) }], []]),
        /allReduce at rank 0 on group \[1\]: the group does not contain the calling rank/,
      );
      await rejectsQuickly(
        nativeCommRun(2, [[{ op: "allReduce", group: [1, 0], data: data(1) }], []]),
        /strictly ascending/,
      );
      await rejectsQuickly(
        nativeCommRun(2, [[{ op: "reduce", group: [0], root: 1, data: data(1) }], []]),
        /root 1 is not in the group/,
      );
      await expect(nativeCommRun(2, [[]])).rejects.toThrow(TypeError);
      await expect(nativeCommRun(1, [[{ op: "allReduce", group: [0] } as unknown as CommScriptOp]])).rejects.toThrow(
        /script\[0\]\[0\]\.data must be a Float32Array/,
      );
    });
  });
});
