// This development machine as a cluster of CPU virtual devices: 2 cores, one per device, on one node. Nothing
// here is measured: every number is a documented estimate. `fsm calibrate` writes a calibration file whose
// measurements replace them (src/cost/calibrated-pricing.ts): op times with one core and with every core, the
// optimizer's time per byte of state, the in-process communicator's collectives (in place of the intra- and
// inter-node links: a run's virtual devices all live in one process), the executor's and run loop's
// overheads, and the machine's core count, which the devices of a run share.
import type { DeviceProfile } from "../profile.js";

const CORE =
  "estimate from lscpu on the development machine (AMD EPYC, family 26 / Zen 5, 2 vCPUs, 2.1 GHz TSC): " +
  "OpenBLAS is pinned to its Haswell kernels (OPENBLAS_CORETYPE=Haswell, DESIGN.md §8), i.e. AVX2 with two " +
  "FMA pipes: 2 pipes × 8 f32 lanes × 2 FLOPs × 2.1e9 Hz = 67.2 GFLOP/s per core";
const ESTIMATE = "estimate (fsm default, not measured); replaced by a calibration file when one exists";

export const cpu: DeviceProfile = {
  name: "cpu",
  description: "CPU virtual devices on this machine, one core each, 2 per node (estimates, not measured)",
  kind: "cpu",
  widens16BitOperands: true,
  peakFlops: { fp32: 67.2e9, tf32: 67.2e9, bf16: 67.2e9, fp16: 67.2e9 },
  memory: { capacity: 12 * 2 ** 30, bandwidth: 20e9 },
  achievable: { matmul: 0.7, vector: 0.5, memory: 0.8, link: 0.8 },
  launchOverhead: 2e-6,
  devicesPerNode: 2,
  intraNode: { name: "shared memory (copy between device arenas)", bandwidth: 10e9, latency: 2e-6 },
  interNode: { name: "MPI over TCP, 10 Gb/s Ethernet assumed", bandwidth: 1.25e9, latency: 50e-6 },
  sources: {
    "peakFlops.fp32": `${CORE}.`,
    "peakFlops.tf32": `${CORE}; the CPU has no tf32 format, so f32 matmuls run at the fp32 rate.`,
    "peakFlops.bf16": `${CORE}; the CPU kernels widen bf16 to f32, so bf16 runs at the fp32 rate (AVX512-BF16 is not used).`,
    "peakFlops.fp16": `${CORE}; the CPU kernels widen f16 to f32 (F16C), so fp16 runs at the fp32 rate.`,
    "memory.capacity": "the machine has 24 GiB (DESIGN.md §8), split evenly between its 2 virtual devices: 12 GiB each.",
    "memory.bandwidth": `${ESTIMATE}: one Zen core streams about 20 GB/s from DRAM.`,
    "achievable.matmul": `${ESTIMATE}: OpenBLAS sgemm reaches 80-90% of peak on large matrices; 0.7 allows for smaller ones.`,
    "achievable.vector": `${ESTIMATE}: compiler-vectorized elementwise loops; half of the fp32 peak.`,
    "achievable.memory": `${ESTIMATE}: 0.8 of the streaming bandwidth.`,
    "achievable.link": `${ESTIMATE}: 0.8 of a link's bandwidth.`,
    launchOverhead: `${ESTIMATE}: waking a worker thread and dispatching one op costs about 2 us.`,
    devicesPerNode: "the development machine has 2 cores (DESIGN.md §8), one virtual device each.",
    "intraNode.bandwidth": `${ESTIMATE}: a copy between two arenas reads and writes DRAM, about half the streaming bandwidth.`,
    "intraNode.latency": `${ESTIMATE}: a futex wake-up between threads, about 2 us.`,
    "interNode.bandwidth": `${ESTIMATE}: 10 Gb/s Ethernet, 1.25 GB/s, for MPI between CPU machines.`,
    "interNode.latency": `${ESTIMATE}: MPI over TCP, about 50 us per message.`,
  },
};
