// One virtual device's share of a step as the native cluster runs it: slots in the device's own arena (some
// of them views into a larger slot, e.g. a parameter inside an FSDP unit's flat buffer) and one instruction
// list whose entries run on the device's compute stream (0) or communication stream (1).
//
// The builder is given instructions in an order that is a valid sequential execution of the device's work
// (the plan's action order). From it, `finish` derives
//   - waits: an instruction waits for the latest earlier instruction of the OTHER stream that touches
//     overlapping bytes with a write on either side (same-stream order is implicit), so the two streams
//     overlap wherever the data allows and never race;
//   - lifetimes: compute instructions have positions 0..C−1; a comm instruction may run anywhere strictly
//     between the last compute instruction it (transitively) waits for and the first one that
//     (transitively) waits for it, so the bytes it touches are live over that whole window. Slots whose
//     lifetimes never meet share bytes (slot-layout.ts), which is then safe whatever the threads' timing.
import type { NativeAttrs, NativeDType } from "../native/binding.js";
import { layoutSlots } from "./slot-layout.js";

export type Stream = 0 | 1;
export const COMPUTE: Stream = 0;
export const COMM: Stream = 1;

/** Element types of slots (the addon's): 16-bit floats are storage only (kernels compute in f32 after an
 *  fsm_cast). */
export type SlotDType = NativeDType;

export const BYTES: Readonly<Record<SlotDType, number>> = { f32: 4, i32: 4, bf16: 2, f16: 2 };

export interface DeviceSlot {
  readonly shape: readonly number[];
  readonly dtype: SlotDType;
  /** Bytes from the start of the device's arena (64-byte aligned for slots that are not views). */
  readonly offset: number;
}

export interface DeviceInstruction {
  readonly stream: Stream;
  readonly op: string;
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly attrs: NativeAttrs;
  /** Instructions of this device that must have finished first. */
  readonly waits: readonly number[];
  /** The plan action it belongs to (for errors and traces). */
  readonly action: string;
  /** Outputs alias inputs (an elementwise update in place): not zeroed before the kernel. */
  readonly inPlace?: boolean;
  /** A scalar f32 slot: when nonzero the instruction is skipped (an fp16 step whose gradients overflowed). */
  readonly guard?: number;
}

export interface DeviceProgram {
  readonly slots: readonly DeviceSlot[];
  readonly instructions: readonly DeviceInstruction[];
  readonly arenaBytes: number;
  /** Most bytes of slots live at once (≤ arenaBytes; the rest is fragmentation). */
  readonly liveBytes: number;
}

interface SlotRecord {
  readonly shape: number[];
  readonly dtype: SlotDType;
  /** The slot it is a view of (a root), and its first byte there. */
  readonly root: number;
  readonly at: number;
}

const numelOf = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** A bound on the slots a lowering may create (over all its devices), for callers that lower only when it is
 *  cheap (compile's arena layout): exceeding it throws SlotBudgetExceeded before any layout is done. */
export class SlotBudget {
  private used = 0;
  constructor(readonly max: number) {}

  take(): void {
    if (++this.used > this.max) throw new SlotBudgetExceeded(this.max);
  }
}

export class SlotBudgetExceeded extends Error {
  constructor(readonly max: number) {
    super(`lowering needs more than ${max} slots`);
  }
}

export class DeviceBuilder {
  constructor(private readonly budget?: SlotBudget) {}

  private readonly slots: SlotRecord[] = [];
  private readonly list: Omit<DeviceInstruction, "waits">[] = [];
  private readonly pinned = new Set<number>();
  /** Waits asked for explicitly (beyond the data's), by instruction. */
  private readonly extra = new Map<number, number[]>();

  /** A new slot of its own bytes. */
  slot(shape: readonly number[], dtype: SlotDType = "f32"): number {
    this.budget?.take();
    this.slots.push({ shape: [...shape], dtype, root: this.slots.length, at: 0 });
    return this.slots.length - 1;
  }

  /** A view of `of` from its element `at` (in `of`'s elements), with the given shape and element type
   *  (default `of`'s: an f32 view of an i32 or 16-bit slot moves its bits through the f32-only communicator). */
  view(of: number, at: number, shape: readonly number[], dtype?: SlotDType): number {
    const base = this.slots[of]!;
    const type = dtype ?? base.dtype;
    const start = base.at + at * BYTES[base.dtype];
    const root = this.slots[base.root]!;
    if (at < 0 || start + numelOf(shape) * BYTES[type] > numelOf(root.shape) * BYTES[root.dtype]) {
      throw new Error(`internal: a view of ${numelOf(shape)} ${type} elements at ${at} does not fit its slot`);
    }
    this.budget?.take();
    this.slots.push({ shape: [...shape], dtype: type, root: base.root, at: start });
    return this.slots.length - 1;
  }

  dtype(slot: number): SlotDType {
    return this.slots[slot]!.dtype;
  }

  /** Where a slot's bytes lie: the root slot it views (itself for a root), its first byte there, its bytes. */
  placement(slot: number): { readonly root: number; readonly at: number; readonly bytes: number } {
    const s = this.slots[slot]!;
    return { root: s.root, at: s.at, bytes: numelOf(s.shape) * BYTES[s.dtype] };
  }

  /** Read or written from outside a run (parameters, state, inputs, losses): alive throughout. */
  pin(slot: number): number {
    this.pinned.add(this.slots[slot]!.root);
    return slot;
  }

  shape(slot: number): readonly number[] {
    return this.slots[slot]!.shape;
  }

  emit(stream: Stream, op: string, inputs: readonly number[], outputs: readonly number[], attrs: NativeAttrs, action: string, options: { inPlace?: boolean; guard?: number } = {}): number {
    this.list.push({ stream, op, inputs: [...inputs], outputs: [...outputs], attrs, action, ...(options.inPlace && { inPlace: true }), ...(options.guard !== undefined && { guard: options.guard }) });
    return this.list.length - 1;
  }

  /** Makes instruction `i` also wait for `on` (an earlier instruction of the other stream): a release point,
   *  so bytes `on` touches can be reused from `i` on instead of only after the step's last wait on it. */
  waitAlso(i: number, on: number): void {
    if (on >= i || this.list[on]!.stream === this.list[i]!.stream) throw new Error(`internal: instruction ${i} cannot wait for ${on}`);
    this.extra.set(i, [...(this.extra.get(i) ?? []), on]);
  }

  get length(): number {
    return this.list.length;
  }

  /** The stream instruction `i` runs on. */
  streamOf(i: number): Stream {
    return this.list[i]!.stream;
  }

  finish(): DeviceProgram {
    const waits = this.waits();
    const { offsets, arenaBytes, liveBytes } = this.layout(waits);
    const slots: DeviceSlot[] = this.slots.map((s) => ({ shape: s.shape, dtype: s.dtype, offset: offsets[s.root]! + s.at }));
    const instructions = this.list.map((ins, i) => ({ ...ins, waits: waits[i]! }));
    return { slots, instructions, arenaBytes, liveBytes };
  }

  /** Per instruction: the latest conflicting instruction of the other stream, if any. */
  private waits(): number[][] {
    // Accesses so far, per root slot and stream, in instruction order: all of them, and the writes alone. An
    // access conflicts with the other stream's overlapping writes (a read) or accesses (a write); the latest
    // is found scanning back from the newest, so a value read by thousands of instructions (a deep model's
    // learning rate, step count, clip coefficient) costs one look per access instead of one per earlier one.
    type Access = { readonly i: number; readonly from: number; readonly to: number };
    const accesses = new Map<number, [{ all: Access[]; writes: Access[] }, { all: Access[]; writes: Access[] }]>();
    // Each slot's byte range in its root, found once (slots are touched by instruction after instruction).
    const from = new Float64Array(this.slots.length);
    const to = new Float64Array(this.slots.length);
    this.slots.forEach((s, k) => {
      from[k] = s.at;
      to[k] = s.at + numelOf(s.shape) * BYTES[s.dtype];
    });
    // The instruction being visited, its stream and the latest wait found for it so far (one `touch` for all).
    let i = 0;
    let stream: Stream = COMPUTE;
    let latest = -1;
    const touch = (slot: number, write: boolean): void => {
      const root = this.slots[slot]!.root;
      const a0 = from[slot]!;
      const a1 = to[slot]!;
      let byStream = accesses.get(root);
      if (!byStream) accesses.set(root, (byStream = [{ all: [], writes: [] }, { all: [], writes: [] }]));
      const other = byStream[1 - stream]!;
      const pool = write ? other.all : other.writes;
      for (let k = pool.length - 1; k >= 0 && pool[k]!.i > latest; k--) {
        const a = pool[k]!;
        if (a.from < a1 && a0 < a.to) {
          latest = a.i;
          break;
        }
      }
      const own = byStream[stream]!;
      const access = { i, from: a0, to: a1 };
      own.all.push(access);
      if (write) own.writes.push(access);
    };
    const out = new Array<number[]>(this.list.length);
    for (; i < this.list.length; i++) {
      const ins = this.list[i]!;
      stream = ins.stream;
      latest = -1;
      for (const s of ins.inputs) touch(s, false);
      if (ins.guard !== undefined) touch(ins.guard, false);
      for (const s of ins.outputs) touch(s, true);
      const extra = this.extra.get(i);
      if (extra) for (const w of extra) latest = Math.max(latest, w);
      out[i] = latest >= 0 ? [latest] : [];
    }
    return out;
  }

  private layout(waits: readonly number[][]): { offsets: number[]; arenaBytes: number; liveBytes: number } {
    const n = this.list.length;
    // Compute positions, and for each comm instruction the window of compute positions it may run in.
    const position = new Array<number>(n).fill(-1);
    let computeCount = 0;
    for (let i = 0; i < n; i++) if (this.list[i]!.stream === COMPUTE) position[i] = computeCount++;
    const lo = new Array<number>(n).fill(-1);
    const hi = new Array<number>(n).fill(computeCount);
    let prev = -1;
    for (let i = 0; i < n; i++) {
      if (this.list[i]!.stream !== COMM) continue;
      let l = prev >= 0 ? lo[prev]! : -1;
      for (const w of waits[i]!) l = Math.max(l, this.list[w]!.stream === COMPUTE ? position[w]! : lo[w]!);
      lo[i] = l;
      prev = i;
    }
    for (let i = 0; i < n; i++) {
      if (this.list[i]!.stream !== COMPUTE) continue;
      for (const w of waits[i]!) if (this.list[w]!.stream === COMM) hi[w] = Math.min(hi[w]!, position[i]!);
    }
    let next = -1;
    for (let i = n - 1; i >= 0; i--) {
      if (this.list[i]!.stream !== COMM) continue;
      if (next >= 0) hi[i] = Math.min(hi[i]!, hi[next]!);
      next = i;
    }
    const from = this.slots.map(() => Infinity);
    const to = this.slots.map(() => -Infinity);
    this.list.forEach((ins, i) => {
      const a = ins.stream === COMPUTE ? position[i]! : lo[i]! + 0.5;
      const b = ins.stream === COMPUTE ? position[i]! : hi[i]! - 0.5;
      const use = (s: number): void => {
        const r = this.slots[s]!.root;
        from[r] = Math.min(from[r]!, a);
        to[r] = Math.max(to[r]!, b);
      };
      for (const s of ins.inputs) use(s);
      for (const s of ins.outputs) use(s);
      if (ins.guard !== undefined) use(ins.guard);
    });
    const roots = this.slots.map((s, i) => s.root === i);
    const needs = this.slots.map((s, i) => {
      if (!roots[i]) return { bytes: 0, from: 0, to: 0 };
      const bytes = BYTES[s.dtype] * numelOf(s.shape);
      if (this.pinned.has(i)) return { bytes, from: -2, to: Infinity };
      if (from[i] === Infinity) return { bytes, from: 0, to: 0 };
      return { bytes, from: from[i]!, to: Math.max(to[i]!, from[i]!) };
    });
    const { offsets, arenaBytes } = layoutSlots(needs);
    return { offsets, arenaBytes, liveBytes: peakLive(needs) };
  }
}

/** The most bytes live at one time (lifetimes are inclusive: a slot ending where another starts overlaps it). */
function peakLive(needs: readonly { bytes: number; from: number; to: number }[]): number {
  const events: [number, number][] = [];
  for (const n of needs) if (n.bytes > 0) events.push([n.from, n.bytes], [n.to, -n.bytes]);
  events.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let live = 0;
  let peak = 0;
  for (const [, d] of events) {
    live += d;
    peak = Math.max(peak, live);
  }
  return peak;
}
