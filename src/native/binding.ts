// The one typed binding to the native addon (native/ → fsm_native.node): loads it once and types its exports.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** How the addon was built, and the host's hardware thread count (0 when the platform cannot tell). */
export interface NativeBuildInfo {
  blas: "openblas" | "fallback";
  napiVersion: number;
  compiler: string;
  threads: number;
  /** The MPI library the mpi communicator runs on, or null when the addon was built without MPI. */
  mpi: string | null;
  /** The cuda device kind's build ("nvcc 13.0.88, sm_75, sm_90"), or null when nvcc was not found. */
  cuda: string | null;
}

/** What a CUDA device kind finds on this machine: "cuda" (GPUs through the driver) or "simt" (the same code on
 *  the SIMT emulator, which always has one device). */
export interface NativeGpuKind {
  devices: number;
  /** Why there is none ("no CUDA device (driver: not loaded)"); "" when there are some. */
  none: string;
  driverVersion: number;
  runtimeVersion: number;
  gpus: { name: string; memoryBytes: number; multiprocessors: number; major: number; minor: number }[];
}

/** A kernel call by its operands' shapes and types alone (no data): what its scratch depends on. */
export interface NativeKernelShape {
  readonly op: string;
  readonly inputs: readonly { readonly shape: readonly number[]; readonly dtype: NativeDType }[];
  readonly outputs: readonly { readonly shape: readonly number[]; readonly dtype: NativeDType }[];
  readonly attrs: NativeAttrs;
  /** The stream it runs on (0 compute, default; 1 communication): each stream has its own scratch. */
  readonly stream?: 0 | 1;
}

/** A device kind kernels can run on outside a program (runNativeKernel). */
export type NativeKernelDevice = "cpu" | "simt" | "cuda";

/** A log line's destination; the addon calls it on the main thread, in the order native threads logged. */
export type NativeLogger = (level: string, message: string) => void;

interface Addon {
  buildInfo(): NativeBuildInfo;
  sgemm(...args: SgemmArgs): void;
  sgemmAsync(...args: [...SgemmArgs, repeats: number]): Promise<number>;
  setLogger(fn: NativeLogger | null): void;
  logTest(n: number): Promise<void>;
  runKernel(op: string, inputs: readonly NativeOperand[], attrs: NativeAttrs, outputs: readonly NativeOutput[], options?: { device?: NativeKernelDevice }): NativeData[];
  kernelNames(kind?: NativeKernelDevice): string[];
  gpuKind(kind: "simt" | "cuda"): NativeGpuKind | null;
  gpuMemory(kind: "simt" | "cuda", ordinal: number): { freeBytes: number; totalBytes: number };
  deviceReservedBytes(kind: "simt" | "cuda", calls: readonly NativeKernelShape[]): number;
  timeKernel(op: string, inputs: readonly NativeOperand[], attrs: NativeAttrs, outputs: readonly NativeOutput[], repeats: number): number;
}

/** A slot's or operand's element type. bf16 and f16 are storage only (kernels compute in f32; fsm_cast converts),
 *  2 bytes per element, passed to and from JS as their raw bits in a Uint16Array. */
export type NativeDType = "f32" | "i32" | "bf16" | "f16";

/** Element data as JS holds it: f32 in a Float32Array, i32 in an Int32Array, bf16/f16 bits in a Uint16Array. */
export type NativeData = Float32Array | Int32Array | Uint16Array;

/** An operand of a native kernel: data in row-major order. */
export interface NativeOperand {
  readonly data: NativeData;
  readonly shape: readonly number[];
  /** Required for a Uint16Array ("bf16" or "f16": the array alone cannot tell which); optional otherwise, and
   *  then it must match the array ("f32" for a Float32Array, "i32" for an Int32Array). */
  readonly dtype?: NativeDType;
}

export interface NativeOutput {
  readonly shape: readonly number[];
  /** The output comes back as a Float32Array (f32), an Int32Array (i32) or a Uint16Array of raw bits (bf16, f16). */
  readonly dtype: NativeDType;
}

/** Concrete attributes: numbers, booleans, strings and shapes. */
export type NativeAttrs = Readonly<Record<string, number | boolean | string | readonly number[]>>;

type SgemmArgs = [
  transA: boolean,
  transB: boolean,
  m: number,
  n: number,
  k: number,
  alpha: number,
  a: Float32Array,
  b: Float32Array,
  beta: number,
  c: Float32Array,
];

/**
 * Where the addon is loaded from: `$FSM_NATIVE_PATH` when set (another build of it, e.g. one configured with
 * `--CDFSM_BLAS=fallback`), else `native/build/Release/fsm_native.node` under the package root.
 */
export function nativeAddonPath(): string {
  const override = process.env.FSM_NATIVE_PATH;
  if (override) return resolve(override);
  return join(packageRoot(), "native", "build", "Release", "fsm_native.node");
}

// The directory of fsm's package.json, found by walking up from this file (src/ in tests, dist/src/ when built).
function packageRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dir !== dirname(dir); dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string };
      if (pkg.name === "fsm") return dir;
    } catch {
      // not here: keep walking up
    }
  }
  throw new Error(`cannot find fsm's package.json above ${fileURLToPath(import.meta.url)}`);
}

let loaded: Addon | undefined;

function addon(): Addon {
  if (loaded) return loaded;
  const path = nativeAddonPath();
  if (!existsSync(path)) {
    throw new Error(
      `fsm's native addon is not built: ${path} does not exist. Build it with 'npm run build:native' ` +
        `(needs cmake and a C++17 compiler; OpenBLAS is used when installed: apt-get install -y libopenblas-dev)`,
    );
  }
  try {
    loaded = createRequire(import.meta.url)(path) as Addon;
  } catch (e) {
    throw new Error(`fsm's native addon at ${path} failed to load (rebuild it with 'npm run build:native')`, {
      cause: e,
    });
  }
  return loaded;
}

/** How the loaded addon was built. */
export function nativeBuildInfo(): NativeBuildInfo {
  return addon().buildInfo();
}

/**
 * C = alpha · op(A) · op(B) + beta · C in fp32, row-major, on the calling thread (OpenBLAS when the addon was
 * built with it). op(A) is m × k (A holds k × m when transA), op(B) is k × n (B holds n × k when transB), C is
 * m × n; each array must hold exactly that many elements, and C must not share memory with A or B. beta = 0
 * ignores C's old contents. Throws TypeError for a wrong type, RangeError for a wrong size.
 */
export function sgemm(...args: SgemmArgs): void {
  addon().sgemm(...args);
}

/**
 * sgemm on a worker thread (the event loop keeps running): applies the update to C `repeats` times and
 * resolves with the seconds those multiplies took. Arguments are checked as sgemm's (a bad one rejects with
 * the same error); the inputs are copied when it starts, and C is written when it resolves.
 */
export async function sgemmAsync(...args: [...SgemmArgs, repeats: number]): Promise<number> {
  return addon().sgemmAsync(...args);
}

/**
 * Routes log lines from native threads to `fn` (null: drop them). An idle logger does not keep the process
 * alive; an exception thrown by `fn` is reported as an uncaught exception.
 */
export function setNativeLogger(fn: NativeLogger | null): void {
  addon().setLogger(fn);
}

/**
 * Starts a native thread that logs `n` lines ("logTest i of n", level "info") through the logger set by
 * setNativeLogger; resolves once the logger has received all of them. Rejects when no logger is set.
 */
export async function nativeLogTest(n: number): Promise<void> {
  return addon().logTest(n);
}

/**
 * Runs one op's native kernel on the calling thread: fresh zero-filled outputs of the given shapes and types,
 * written by the kernel. `device` "cpu" (default) computes over the JS arrays; "simt" and "cuda" copy the
 * operands into a fresh device of that kind, run its kernel, and copy the outputs back. Throws "not
 * implemented: native kernel for op 'X' on device kind K" for an op without one (a NativeFailure of kind
 * "description"; a kernel's own failure is kind "kernel"; "no CUDA device ..." when the kind has none).
 */
export function runNativeKernel(op: string, inputs: readonly NativeOperand[], attrs: NativeAttrs, outputs: readonly NativeOutput[], options: { device?: NativeKernelDevice } = {}): NativeData[] {
  return addon().runKernel(op, inputs, attrs, outputs, options);
}

/** Median seconds of `repeats` runs of one kernel (outputs zeroed first, as the executor does), timed in
 *  native code after a warm-up run. */
export function timeNativeKernel(op: string, inputs: readonly NativeOperand[], attrs: NativeAttrs, outputs: readonly NativeOutput[], repeats: number): number {
  return addon().timeKernel(op, inputs, attrs, outputs, repeats);
}

/** The ops a device kind of the addon has kernels for (default cpu; [] for a kind not built). */
export function nativeKernelNames(kind: NativeKernelDevice = "cpu"): string[] {
  return addon().kernelNames(kind);
}

/** A GPU's free and total memory as the driver reports it now (every process's use counted). */
export function nativeGpuMemory(kind: "simt" | "cuda", ordinal = 0): { freeBytes: number; totalBytes: number } {
  return addon().gpuMemory(kind, ordinal);
}

/** The bytes a CUDA device reserves besides its arena for a program with these kernel calls: the largest
 *  scratch any needs (each kernel's own formula), its error record, cuBLAS's workspace when a kernel uses it.
 *  "simt" gives the same figure as "cuda" (one source), so it serves where the addon has no cuda build. */
export function nativeDeviceReservedBytes(calls: readonly NativeKernelShape[]): number {
  return addon().deviceReservedBytes("simt", calls);
}

/** What a CUDA device kind finds here (null: the addon has no cuda build). */
export function nativeGpuKind(kind: "simt" | "cuda"): NativeGpuKind | null {
  return addon().gpuKind(kind);
}

// --- The in-process communicator (native/src/comm/inprocess), driven by a per-rank script for tests -------

/** One operation of a rank's script for nativeCommRun. Collectives take a strictly ascending `group` of global
 *  ranks containing the calling rank; `root` is a global rank. */
export type CommScriptOp =
  | { readonly op: "allReduce"; readonly group: readonly number[]; readonly data: Float32Array; readonly avg?: boolean }
  /** data holds group.length chunks; the output is this member's chunk of the ordered sum. */
  | { readonly op: "reduceScatter"; readonly group: readonly number[]; readonly data: Float32Array; readonly avg?: boolean }
  /** The output is every member's data concatenated in group order. */
  | { readonly op: "allGather"; readonly group: readonly number[]; readonly data: Float32Array }
  | { readonly op: "broadcast"; readonly group: readonly number[]; readonly root: number; readonly data: Float32Array }
  /** The root's output is the ordered sum; the others' output is their data unchanged. */
  | { readonly op: "reduce"; readonly group: readonly number[]; readonly root: number; readonly data: Float32Array }
  /** Buffered: returns at once. Messages with the same (from, to, tag) arrive in send order. */
  | { readonly op: "send"; readonly peer: number; readonly tag: number; readonly data: Float32Array }
  | { readonly op: "recv"; readonly peer: number; readonly tag: number; readonly count: number }
  /** Aborts the communicator with `message` (every rank stops) and ends this rank's script. */
  | { readonly op: "abort"; readonly message: string }
  | { readonly op: "sleep"; readonly micros: number };

export interface CommRunOptions {
  /** How long a rank waits at a meeting point before aborting, naming the ranks that never came (default 60 000). */
  readonly timeoutMs?: number;
  /** Each rank sleeps a random 0..jitterMicros µs before and after every communicator call (the delay
   *  decorator of native/src/comm/testing), to shuffle arrival order. */
  readonly jitterMicros?: number;
  /** Seeds the jitter. */
  readonly seed?: number;
}

interface Addon {
  commRun(worldSize: number, script: readonly (readonly CommScriptOp[])[], options?: CommRunOptions): Promise<(Float32Array | null)[][]>;
}

/**
 * Runs `script[r]` on rank r's own thread against one fp32 communicator of `worldSize` ranks (off the main
 * thread). Resolves with each rank's per-operation outputs (null for send, sleep and abort); rejects with the
 * communicator's first abort message when any rank aborted (kind "aborted"), counts, roots or groups disagreed
 * (kind "comm"), or a rank timed out waiting (kind "timeout", with peers) — see NativeFailure. Reductions sum
 * in ascending group-rank order, so results are bit-identical across runs. A malformed script throws a
 * TypeError.
 */
export async function nativeCommRun(worldSize: number, script: readonly (readonly CommScriptOp[])[], options: CommRunOptions = {}): Promise<(Float32Array | null)[][]> {
  return addon().commRun(worldSize, script, options);
}

// --- The executor (native/src/exec): this process's devices of a world, stepping concurrently ------------

/** One instruction of a device. Kernel instructions zero their outputs first, except outputs whose bytes overlap
 *  an input's (an accumulator that is its own first operand) and every output of an instruction marked
 *  `inPlace`; communication ops (`comm.*`, f32 slots only) never zero anything:
 *  - comm.allReduce / comm.broadcast / comm.reduce: inputs [s], outputs [s] (the same slot); attrs.group, and
 *    attrs.root (a global rank in the group) for broadcast and reduce;
 *  - comm.reduceScatter: inputs [in], outputs [out], numel(in) = group.length · numel(out);
 *  - comm.allGather: inputs [in], outputs [out], numel(out) = group.length · numel(in);
 *  - comm.send: inputs [s], outputs []; comm.recv: inputs [], outputs [s]; attrs.peer (global rank), attrs.tag.
 *  attrs.group is a strictly ascending list of global ranks containing this device's rank. */
export interface NativeClusterInstruction {
  /** 0: the device's compute stream; 1: its communication stream. */
  readonly stream: 0 | 1;
  /** A kernel the device kind has (nativeKernelNames() for cpu) or one of the comm ops above. */
  readonly op: string;
  /** Slot ids of this device. */
  readonly inputs: readonly number[];
  readonly outputs: readonly number[];
  readonly attrs: NativeAttrs;
  /** Indices into this device's instruction list (either stream) that must complete before this one starts;
   *  on its own stream only earlier ones (stream order is implicit), and never forming a cycle. */
  readonly waits: readonly number[];
  /** The kernel updates operands in place (outputs alias inputs, or are written over state it reads): its
   *  outputs are not zeroed first. */
  readonly inPlace?: boolean;
  /** A slot id of this device holding an f32 scalar (one element). Once this instruction's waits are met the
   *  guard is read: nonzero (NaN included) skips the instruction, which still counts as completed (traced with
   *  start = end) and leaves its outputs untouched; 0 runs it. The guard is only read (no output may share its
   *  bytes), so list in `waits` the instruction that writes it. Kernel instructions only: a skipped collective would strand its peers. */
  readonly guard?: number;
}

export interface NativeClusterDevice {
  readonly arenaBytes: number;
  /** offset: bytes from the arena start, a multiple of the element size (4; 2 for bf16/f16); slots may overlap
   *  (views, reused memory: an f32 view of a 16-bit slot moves its bits through the f32-only communicator). */
  readonly slots: readonly { readonly shape: readonly number[]; readonly dtype: NativeDType; readonly offset: number }[];
  readonly instructions: readonly NativeClusterInstruction[];
}

/** The device kind every local device is (default cpu with heap arenas). arena "heap": one 64-byte aligned
 *  allocation per device, touched once so steps never page-fault; "mmap": an anonymous mapping populated up
 *  front. Both start zero-filled and compute the same bits. */
export type NativeDeviceKind =
  | { readonly kind: "cpu"; readonly arena?: "heap" | "mmap" }
  /** A GPU per local device (local device i on GPU (firstOrdinal + i) mod the GPUs seen; allowTf32: f32 products on TF32
   *  tensor cores), or the same device code on the SIMT emulator ("simt", tests). */
  | { readonly kind: "cuda"; readonly firstOrdinal?: number; readonly allowTf32?: boolean }
  | { readonly kind: "simt" };

/** The communicator between ranks (default inprocess: the ranks are this process's devices). "delay" is the
 *  in-process communicator behind a test decorator that sleeps a seeded pseudo-random 0..maxMicros µs before
 *  and after every call, shuffling the order ranks and streams arrive in (results must not change). */
export type NativeCommunicatorKind =
  | { readonly kind: "inprocess" }
  | { readonly kind: "delay"; readonly seed: number; readonly maxMicros: number }
  /** Between the processes mpirun started (an addon built with MPI): ranks in contiguous blocks, process p the
   *  ranks [p·L, (p+1)·L); in-process mailboxes between this process's ranks, MPI between processes; the same
   *  ordered sums, so the same bits, as inprocess. */
  | { readonly kind: "mpi" }
  /** Between GPUs (cuda devices, one per GPU; the GPU build): collectives through NCCL on each device's
   *  communication stream, sends and receives through the in-process or MPI communicator staged via host memory. */
  | { readonly kind: "nccl" };

export interface NativeClusterDescription {
  /** This process's devices, at least one: device d is global rank ranks[d]. */
  readonly devices: readonly NativeClusterDevice[];
  /** Ranks in the whole world (default devices.length). The in-process communicators reach only this
   *  process's devices, so a larger world needs communicator kind "mpi". */
  readonly worldSize?: number;
  /** The global rank of each device: strictly ascending, below worldSize (default 0..devices.length-1). Groups,
   *  roots and peers in instructions are global ranks. */
  readonly ranks?: readonly number[];
  readonly device?: NativeDeviceKind;
  readonly communicator?: NativeCommunicatorKind;
  /** How long a device waits for its peers in a collective or a recv before the step fails (default 60). */
  readonly timeoutSeconds?: number;
  /** OpenBLAS threads per sgemm call while a step runs (default 1: the devices' threads already fill the cores). */
  readonly blasThreads?: number;
  /** CPU devices: this many host threads take turns on the devices, each running whichever device can go (its
   *  collectives split in two where the communicator allows, so fewer threads than devices never wait for
   *  one another), or (0, the default) one thread per stream. Runs take turns where a thread per stream would
   *  outnumber the cores: hostThreadsFor (src/runtime/world.ts). */
  readonly hostThreads?: number;
  /** Per device: its memory in bytes. A device whose arena is larger is refused before it is allocated (a
   *  failure of kind "oom" with arenaBytes and limitBytes; an arena the machine cannot allocate is kind "oom"
   *  with arenaBytes only). Default: no limit. */
  readonly memoryLimitBytes?: readonly number[];
}

/** A cluster living in the addon: one arena per device, instructions and their operands checked once. Device
 *  arguments are local device indices (0..deviceCount()-1), not global ranks. */
export interface NativeClusterHandle {
  /** Copies data into a device's slot (element type and length must match: a Uint16Array of raw bits for
   *  bf16/f16). Throws while a step runs. */
  set(device: number, slot: number, data: NativeData): void;
  /** A copy of a device's slot (a Uint16Array of raw bits for bf16/f16). Throws while a step runs. */
  get(device: number, slot: number): NativeData;
  /** Runs every device's streams concurrently (a compute and a communication stream each) off the main thread;
   *  rejects with the first failure (see NativeFailure; its message reads "device D instruction I (op):
   *  message", D the global rank) after stopping every stream. With `trace`, records each instruction's start
   *  and end (timings()). */
  run(trace?: boolean): Promise<void>;
  /** run() on the calling thread: returns when the step is done, throws its first failure (the same Error).
   *  The JavaScript thread is blocked meanwhile; for short steps, whose two thread hand-offs would cost more
   *  than the work the caller could do during them (src/runtime/step-mode.ts). */
  runSync(trace?: boolean): void;
  /** The last traced run on one device: [start0, end0, start1, end1, ...] per instruction, in seconds from one
   *  origin shared by all devices (empty if none; after a failed run, zeros where an instruction never got). */
  timings(device: number): Float64Array;
  arenaBytes(device: number): number;
  /** What the device holds besides its arena (a GPU's kernel scratch and cuBLAS workspace; 0 on the CPU). */
  reservedBytes(device: number): number;
  deviceCount(): number;
  /** A fault for the next run only, to test failure handling: `fail` makes the device's instruction throw
   *  "injected fault" where it would start (kind "kernel" or "comm" by the instruction; every other device
   *  aborted); `nan` runs it, then fills its float outputs with NaN; `hang` stops there until the run is
   *  aborted (a peer's timeout lists the device as busy) or, if nothing waits on it, fails by itself after three
   *  timeouts (kind "hang"). Throws while a step runs. */
  injectFault(device: number, instruction: number, kind: "fail" | "nan" | "hang"): void;
  /** Calls made through the communicator since the cluster was built, per kind (allReduce, reduceScatter,
   *  allGather, broadcast, reduce, send, recv): which communicator really carried the steps. */
  communicatorCalls(): Record<string, number>;
  /** Payload bytes this process's devices sent through the communicator since it was built: to devices of
   *  this process and to other processes (the mpi communicator counts; the in-process kinds report zeros). */
  communicatorBytes(): { inProcess: number; betweenProcesses: number };
}

interface Addon {
  NativeCluster: new (description: NativeClusterDescription) => NativeClusterHandle;
}

/** Builds a cluster in the addon. Throws an Error with NativeFailure fields: kind "description" (naming the
 *  device and instruction when known) for an op the device kind lacks, a slot outside the arena, a wait on a
 *  later instruction of the same stream, a group without the device, a size mismatch, bad ranks or a world the
 *  communicator cannot reach; kind "oom" for an arena over its memory limit or one that cannot be allocated. */
export function createNativeCluster(description: NativeClusterDescription): NativeClusterHandle {
  return new (addon().NativeCluster)(description);
}

// --- Failures as data ------------------------------------------------------------------------------------

/** What went wrong, as the addon reports it on the Error it throws or rejects with (read it with
 *  nativeFailure; never parse the message):
 *  - kernel: a kernel threw (or a `fail` fault on a kernel instruction);
 *  - comm: the communicator refused a call (mismatched counts or roots, a bad group), or a `fail` fault on a
 *    communication instruction;
 *  - timeout: a rank waited past timeoutSeconds; `peers` are the ranks that never arrived, `busy` the devices
 *    inside a kernel all along (the likelier cause);
 *  - aborted: stopped because of another failure, or the step could not start;
 *  - oom: an arena over its device's memory (arenaBytes, limitBytes) or one the machine cannot allocate
 *    (arenaBytes);
 *  - hang: a `hang` fault that nothing woke;
 *  - description: a malformed description or argument. */
export interface NativeFailure {
  readonly kind: "kernel" | "comm" | "timeout" | "aborted" | "oom" | "hang" | "description";
  /** The global rank of the device it happened on. */
  readonly device?: number;
  /** The same device as an index into the description's devices (what set/get/injectFault take). */
  readonly localDevice?: number;
  readonly instruction?: number;
  readonly op?: string;
  readonly peers?: readonly number[];
  readonly busy?: readonly { readonly device: number; readonly instruction: number; readonly op: string; readonly seconds: number }[];
  readonly arenaBytes?: number;
  readonly limitBytes?: number;
  /** The root cause alone, without the location prefix the Error's message has. */
  readonly message: string;
}

/** The failure fields of an Error the addon threw or rejected with (undefined for anything else). */
export function nativeFailure(e: unknown): NativeFailure | undefined {
  if (!(e instanceof Error)) return undefined;
  const f = (e as Error & { failure?: unknown }).failure;
  if (typeof f !== "object" || f === null || typeof (f as NativeFailure).kind !== "string" || typeof (f as NativeFailure).message !== "string") return undefined;
  return f as NativeFailure;
}

// --- The process world (native/src/comm/mpi/mpi_world, js/mpi_binding): processes started by mpirun --------

interface Addon {
  mpiBuilt(): boolean;
  mpiWorld(): { size: number; rank: number; library: string };
  mpiAllGather(bytes: Uint8Array, timeoutSeconds: number): Promise<Uint8Array[]>;
  mpiBarrier(timeoutSeconds: number): Promise<void>;
  mpiFinalize(): void;
}

/** Whether the addon was built with MPI (the mpi communicator and the functions below). */
export function mpiBuilt(): boolean {
  return addon().mpiBuilt();
}

/** This process's place among mpirun's processes; starts MPI (MPI_THREAD_MULTIPLE) on first call. Throws when
 *  built without MPI or when MPI cannot start. */
export function mpiWorld(): { size: number; rank: number; library: string } {
  return addon().mpiWorld();
}

/** Every process's bytes, in process order, off the main thread; rejects after `timeoutSeconds` when some
 *  process never takes part (failed, killed or stuck). */
export function mpiAllGather(bytes: Uint8Array, timeoutSeconds: number): Promise<Uint8Array[]> {
  return addon().mpiAllGather(bytes, timeoutSeconds);
}

export function mpiBarrier(timeoutSeconds: number): Promise<void> {
  return addon().mpiBarrier(timeoutSeconds);
}

/** MPI_Finalize (every communicator's listener stopped first); a no-op when MPI never started. Called once, at a
 *  clean exit: mpirun treats a process that started MPI and exits without it as failed. */
export function mpiFinalize(): void {
  addon().mpiFinalize();
}
