// The executable specification of the native cluster: device programs (device-program.ts) run on this
// thread, one instruction at a time, with the addon's kernels called op by op and the communication done
// here (collectives meet when every member has reached them; sends are buffered). It honours exactly the
// contract the native executor does — same-stream order, waits, group call order — so a lowering that runs
// here without deadlock and with the right numbers is one the native threads can run; a lowering that
// deadlocks is reported with every stream's next instruction instead of hanging.
import { runNativeKernel, type NativeAttrs } from "../native/binding.js";
import { BYTES, type DeviceInstruction, type DeviceProgram } from "../lower/device-program.js";

type Arena = { f32: Float32Array; i32: Int32Array; u16: Uint16Array };

export class ClusterReference {
  private readonly arenas: Arena[];

  constructor(private readonly devices: readonly DeviceProgram[]) {
    this.arenas = devices.map((d) => {
      const buf = new ArrayBuffer(d.arenaBytes + 64);
      return { f32: new Float32Array(buf), i32: new Int32Array(buf), u16: new Uint16Array(buf) };
    });
  }

  private view(device: number, slot: number): Float32Array | Int32Array | Uint16Array {
    const s = this.devices[device]!.slots[slot]!;
    const n = s.shape.reduce((a, b) => a * b, 1);
    const a = this.arenas[device]!;
    if (s.dtype === "bf16" || s.dtype === "f16") return a.u16.subarray(s.offset / 2, s.offset / 2 + n);
    return (s.dtype === "i32" ? a.i32 : a.f32).subarray(s.offset / 4, s.offset / 4 + n);
  }

  /** A slot's bytes (messages are copied as bits, whatever the slot's element type). */
  private bytes(device: number, slot: number): Uint8Array {
    const s = this.devices[device]!.slots[slot]!;
    return new Uint8Array(this.arenas[device]!.f32.buffer, s.offset, BYTES[s.dtype] * s.shape.reduce((a, b) => a * b, 1));
  }

  set(device: number, slot: number, data: Float32Array | Int32Array | Uint16Array): void {
    this.view(device, slot).set(data);
  }

  get(device: number, slot: number): Float32Array | Int32Array | Uint16Array {
    return this.view(device, slot).slice();
  }

  /** Runs one step. With `random`, streams advance in a random interleaving (one instruction per visit, in
   *  a shuffled order) instead of greedily: every interleaving the waits allow must give the same result,
   *  which is how tests check that waits and shared bytes are safe. `observe` is called after each
   *  instruction has run (tests read slots there, before later instructions reuse their bytes). */
  run(random?: () => number, observe?: (device: number, instruction: number) => void): void {
    const n = this.devices.length;
    // Per device, per stream: the indices of its instructions, and how many have run.
    const streams = this.devices.map((d) => [0, 1].map((s) => d.instructions.flatMap((ins, i) => (ins.stream === s ? [i] : []))));
    const done = this.devices.map((d) => new Array<boolean>(d.instructions.length).fill(false));
    const next = this.devices.map(() => [0, 0]);
    const mail = new Map<string, Uint8Array[]>();
    // Collectives waiting for their group: per group key, the members' posted instructions.
    const posted = new Map<string, Map<number, number>>();
    let remaining = this.devices.reduce((a, d) => a + d.instructions.length, 0);
    while (remaining > 0) {
      let progress = false;
      const visits = Array.from({ length: 2 * n }, (_, v) => v);
      if (random) {
        for (let v = visits.length - 1; v > 0; v--) {
          const w = Math.floor(random() * (v + 1));
          [visits[v], visits[w]] = [visits[w]!, visits[v]!];
        }
      }
      for (const visit of visits) {
        const d = visit >> 1;
        const s = visit & 1;
        do {
          const i = streams[d]![s]![next[d]![s]!];
          if (i === undefined) break;
          const ins = this.devices[d]!.instructions[i]!;
          if (!ins.waits.every((w) => done[d]![w])) break;
          const ran = this.step(d, ins, mail, posted, (dev, idx) => {
            done[dev]![idx] = true;
            next[dev]![this.devices[dev]!.instructions[idx]!.stream]!++;
            remaining--;
            observe?.(dev, idx);
          }, i);
          if (!ran) break;
          progress = true;
        } while (random === undefined);
      }
      if (!progress) {
        const heads = this.devices.map((dev, d) => [0, 1].map((s) => {
          const i = streams[d]![s]![next[d]![s]!];
          return i === undefined ? `device ${d} stream ${s}: done` : `device ${d} stream ${s}: #${i} ${dev.instructions[i]!.op} (${dev.instructions[i]!.action})`;
        }).join("; "));
        throw new Error(`the device programs deadlock: ${heads.join(" | ")}`);
      }
    }
  }

  /** Runs instruction i of device d if it can run now (true), calling finish for every instruction done. */
  private step(d: number, ins: DeviceInstruction, mail: Map<string, Uint8Array[]>, posted: Map<string, Map<number, number>>, finish: (d: number, i: number) => void, i: number): boolean {
    const a = ins.attrs;
    if (ins.op === "comm.send") {
      const key = `${d}>${num(a, "peer")}#${num(a, "tag")}`;
      mail.set(key, [...(mail.get(key) ?? []), this.bytes(d, ins.inputs[0]!).slice()]);
      finish(d, i);
      return true;
    }
    if (ins.op === "comm.recv") {
      const key = `${num(a, "peer")}>${d}#${num(a, "tag")}`;
      const queue = mail.get(key);
      if (!queue || queue.length === 0) return false;
      const msg = queue.shift()!;
      const out = this.bytes(d, ins.outputs[0]!);
      if (msg.length !== out.length) throw new Error(`device ${d}: ${ins.action}: received ${msg.length / 4} elements, expected ${out.length / 4}`);
      out.set(msg);
      finish(d, i);
      return true;
    }
    if (ins.op.startsWith("comm.")) {
      const group = a.group as readonly number[];
      const key = group.join(",");
      const waiting = posted.get(key) ?? new Map<number, number>();
      posted.set(key, waiting);
      waiting.set(d, i);
      if (waiting.size < group.length) return false;
      posted.delete(key);
      const members = group.map((r) => ({ d: r, ins: this.devices[r]!.instructions[waiting.get(r)!]!, i: waiting.get(r)! }));
      for (const m of members) if (m.ins.op !== ins.op) throw new Error(`device ${m.d}: ${m.ins.action} (${m.ins.op}) meets ${ins.op} of device ${d} (${ins.action}) on group [${key}]`);
      this.collective(ins.op, members.map((m) => ({ d: m.d, ins: m.ins })), a);
      for (const m of members) if (m.d !== d) finish(m.d, m.i);
      finish(d, i);
      return true;
    }
    if (ins.guard === undefined || this.view(d, ins.guard)[0] === 0) this.kernel(d, ins);
    finish(d, i);
    return true;
  }

  private collective(op: string, members: { d: number; ins: DeviceInstruction }[], a: NativeAttrs): void {
    const inputs = members.map((m) => this.view(m.d, m.ins.inputs[0]!).slice() as Float32Array);
    const sum = (list: Float32Array[]): Float32Array => {
      const out = new Float32Array(list[0]!.length);
      for (const x of list) for (let k = 0; k < out.length; k++) out[k] = out[k]! + x[k]!;
      return out;
    };
    members.forEach((m, g) => {
      const out = this.view(m.d, m.ins.outputs[0]!) as Float32Array;
      if (op === "comm.allReduce") out.set(sum(inputs));
      else if (op === "comm.reduceScatter") out.set(sum(inputs).subarray(g * out.length, (g + 1) * out.length));
      else if (op === "comm.allGather") inputs.forEach((x, h) => out.set(x, h * x.length));
      else if (op === "comm.broadcast") out.set(inputs[members.findIndex((x) => x.d === num(a, "root"))]!);
      else if (op === "comm.reduce") {
        if (m.d === num(a, "root")) out.set(sum(inputs));
      } else throw new Error(`unknown communication op ${op}`);
    });
  }

  private kernel(d: number, ins: DeviceInstruction): void {
    const slots = this.devices[d]!.slots;
    const operands = ins.inputs.map((s) => ({ data: this.view(d, s), shape: slots[s]!.shape, dtype: slots[s]!.dtype }));
    if (ins.op === "fsm_add_inplace") {
      const [y, x] = [this.view(d, ins.inputs[0]!), this.view(d, ins.inputs[1]!)];
      for (let k = 0; k < y.length; k++) y[k] = y[k]! + x[k]!;
      return;
    }
    const outs = runNativeKernel(ins.op, operands, ins.attrs, ins.outputs.map((s) => ({ shape: slots[s]!.shape, dtype: slots[s]!.dtype })));
    outs.forEach((data, k) => this.view(d, ins.outputs[k]!).set(data));
  }
}

function num(a: NativeAttrs, key: string): number {
  const v = a[key];
  if (typeof v !== "number") throw new Error(`communication attribute '${key}' must be a number`);
  return v;
}
