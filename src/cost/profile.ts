// The shape of a device profile: what one device computes and stores, how fast its links are, and where every
// number comes from. Profiles are TypeScript data modules under profiles/ so that tsc carries them into dist/
// with the code and no loader has to find data files at run time.

/** Peak rates are kept per number format; `tf32` is the tensor-core rate for f32 matmuls where one exists. */
export const PEAK_FORMATS = ["fp32", "tf32", "bf16", "fp16"] as const;
export type PeakFormat = (typeof PEAK_FORMATS)[number];

export interface LinkProfile {
  /** What the link is, e.g. "NVLink 4 (18 links)". */
  readonly name: string;
  /** Peak bandwidth per device and direction, bytes/s (the β of the alpha-beta model is its inverse). */
  readonly bandwidth: number;
  /** Per-step latency α of a ring collective over this link, seconds. */
  readonly latency: number;
}

export interface DeviceProfile {
  /** The name `--cluster` takes, e.g. `h100-sxm`. */
  readonly name: string;
  readonly description: string;
  readonly kind: "cpu" | "cuda";
  /** Whether the device's kernels compute 16-bit operands in f32 on widened copies (fsm's CPU kernels do;
   *  tensor-core kernels read bf16/fp16 directly): such a device holds an f32 twin of each 16-bit operand
   *  and result while an op runs, which the memory model prices. */
  readonly widens16BitOperands: boolean;
  /** Dense peak FLOP/s per format (no structured sparsity). `fp32` is also the rate of the vector units that
   *  run elementwise ops. */
  readonly peakFlops: Readonly<Record<PeakFormat, number>>;
  readonly memory: {
    /** Device memory, bytes. */
    readonly capacity: number;
    /** Peak memory bandwidth, bytes/s. */
    readonly bandwidth: number;
  };
  /** Fractions of the peaks that real kernels reach: `matmul` of peakFlops for GEMM-class ops, `vector` of
   *  peakFlops.fp32 for elementwise ops, `memory` of memory.bandwidth, `link` of a link's bandwidth. */
  readonly achievable: {
    readonly matmul: number;
    readonly vector: number;
    readonly memory: number;
    readonly link: number;
  };
  /** Fixed cost of launching one kernel (or dispatching one op to a CPU worker), seconds. */
  readonly launchOverhead: number;
  readonly devicesPerNode: number;
  /** Between devices of one node. */
  readonly intraNode: LinkProfile;
  /** Between nodes, per device (each device has its own NIC share). */
  readonly interNode: LinkProfile;
  /**
   * Where each number comes from, keyed by its dotted path (`peakFlops.bf16`, `intraNode.latency`, ...):
   * datasheet titles and URLs, or the reasoning behind an estimate. Every numeric field must have one (a
   * test walks the profile to enforce it).
   */
  readonly sources: Readonly<Record<string, string>>;
}

/** Every numeric field of a profile as [dotted path, value], in declaration order; used to check sources. */
export function numericFields(profile: DeviceProfile): [string, number][] {
  const out: [string, number][] = [];
  const walk = (value: unknown, path: string): void => {
    if (typeof value === "number") out.push([path, value]);
    else if (value && typeof value === "object" && path !== "sources") {
      for (const [k, v] of Object.entries(value)) walk(v, path === "" ? k : `${path}.${k}`);
    }
  };
  walk(profile, "");
  return out;
}
