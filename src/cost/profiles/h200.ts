// NVIDIA H200 141GB SXM in an 8-GPU DGX H200 node: H100's compute with HBM3e (more and faster memory).
import type { DeviceProfile } from "../profile.js";
import { GPU_ACHIEVABLE, GPU_LAUNCH_OVERHEAD, GPU_SHARED_SOURCES, NCCL_RING_LATENCY } from "./common.js";

const DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (https://www.nvidia.com/en-us/data-center/h200/)";
const DGX = "NVIDIA DGX H100/H200 User Guide, hardware overview (https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html)";

export const h200: DeviceProfile = {
  name: "h200",
  description: "NVIDIA H200 141GB SXM, 8 per node (DGX H200)",
  kind: "cuda",
  peakFlops: { fp32: 67e12, tf32: 494.5e12, bf16: 989.5e12, fp16: 989.5e12 },
  memory: { capacity: 141e9, bandwidth: 4.8e12 },
  achievable: GPU_ACHIEVABLE,
  launchOverhead: GPU_LAUNCH_OVERHEAD,
  devicesPerNode: 8,
  intraNode: { name: "NVLink 4 (18 links)", bandwidth: 450e9, latency: NCCL_RING_LATENCY.nvlink },
  interNode: { name: "InfiniBand NDR, 400 Gb/s per GPU", bandwidth: 50e9, latency: NCCL_RING_LATENCY.network },
  sources: {
    ...GPU_SHARED_SOURCES,
    "peakFlops.fp32": `${DATASHEET}: FP32 67 TFLOPS.`,
    "peakFlops.tf32": `${DATASHEET}: TF32 Tensor Core 989 TFLOPS with sparsity, so 494.5 dense.`,
    "peakFlops.bf16": `${DATASHEET}: BFLOAT16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense.`,
    "peakFlops.fp16": `${DATASHEET}: FP16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense.`,
    "memory.capacity": `${DATASHEET}: 141GB HBM3e (decimal gigabytes).`,
    "memory.bandwidth": `${DATASHEET}: 4.8 TB/s GPU memory bandwidth.`,
    "intraNode.bandwidth": `${DATASHEET}: NVLink 900 GB/s, counted in both directions, so 450 GB/s each way.`,
    "interNode.bandwidth": `${DGX}: 8 ConnectX-7 adapters for the compute fabric, 400 Gb/s = 50 GB/s per GPU.`,
  },
};
