// Numbers shared by the GPU profiles (achievable fractions, kernel launch cost, NCCL link latencies), each with
// its source, so the per-device files state only what differs between devices.

export const GPU_ACHIEVABLE = { matmul: 0.7, vector: 0.5, memory: 0.8, link: 0.8 } as const;

export const GPU_LAUNCH_OVERHEAD = 4e-6;

/** NCCL's own latency model (ring algorithm, Simple protocol, the one used for large training buffers). */
export const NCCL_RING_LATENCY = { nvlink: 3.4e-6, network: 9.6e-6 } as const;

const NCCL_TUNING =
  "NVIDIA NCCL, src/graph/tuning.cc, table hwLat (Ring algorithm, Simple protocol) " +
  "(https://github.com/NVIDIA/nccl/blob/master/src/graph/tuning.cc)";

export const GPU_SHARED_SOURCES: Readonly<Record<string, string>> = {
  "achievable.matmul":
    "estimate (fsm default): large bf16/fp16 GEMMs in cuBLAS reach roughly 70-80% of dense tensor-core peak; " +
    "Megatron-LM reports 52% of peak end to end for GPT-3 175B on A100 (Narayanan et al. 2021, " +
    "https://arxiv.org/abs/2104.04473), so 0.7 for the GEMMs alone. Replaced by a calibration file when one exists.",
  "achievable.vector":
    "estimate (fsm default): elementwise kernels are memory-bound, so their FLOP rate rarely decides; half of the " +
    "fp32 vector peak. Replaced by a calibration file when one exists.",
  "achievable.memory":
    "estimate (fsm default): STREAM-like copy kernels reach about 80-90% of HBM peak on A100/H100; 0.8 taken. " +
    "Replaced by a calibration file when one exists.",
  "achievable.link":
    "estimate (fsm default): nccl-tests bus bandwidth on NVLink/InfiniBand is about 80% of the link's peak " +
    "(NCCL caps its own model at 235 GB/s of 300 GB/s on A100, tuning.cc); 0.8 taken.",
  launchOverhead:
    "estimate: a CUDA kernel launch costs a few microseconds of host and device time (CUDA C++ Best Practices " +
    "Guide, https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/); 4 us taken.",
  devicesPerNode: "NVIDIA DGX/HGX systems carry 8 SXM GPUs per node (DGX user guides).",
  "intraNode.latency": `${NCCL_TUNING}: 3.4 us per ring step over NVLink.`,
  "interNode.latency": `${NCCL_TUNING}: 9.6 us per ring step over the network.`,
};
