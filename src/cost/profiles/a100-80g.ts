// NVIDIA A100 80GB SXM4 in an 8-GPU DGX A100 node (NVLink 3 inside, one 200 Gb/s HDR InfiniBand NIC per GPU).
import type { DeviceProfile } from "../profile.js";
import { GPU_ACHIEVABLE, GPU_LAUNCH_OVERHEAD, GPU_SHARED_SOURCES, NCCL_RING_LATENCY } from "./common.js";

const DATASHEET =
  "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column " +
  "(https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)";
const DGX = "NVIDIA DGX A100 User Guide, hardware overview (https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html)";

export const a100_80g: DeviceProfile = {
  name: "a100-80g",
  description: "NVIDIA A100 80GB SXM4, 8 per node (DGX A100)",
  kind: "cuda",
  widens16BitOperands: false,
  peakFlops: { fp32: 19.5e12, tf32: 156e12, bf16: 312e12, fp16: 312e12 },
  memory: { capacity: 80 * 2 ** 30, bandwidth: 2039e9 },
  achievable: GPU_ACHIEVABLE,
  launchOverhead: GPU_LAUNCH_OVERHEAD,
  devicesPerNode: 8,
  intraNode: { name: "NVLink 3 (12 links)", bandwidth: 300e9, latency: NCCL_RING_LATENCY.nvlink },
  interNode: { name: "InfiniBand HDR, 200 Gb/s per GPU", bandwidth: 25e9, latency: NCCL_RING_LATENCY.network },
  sources: {
    ...GPU_SHARED_SOURCES,
    "peakFlops.fp32": `${DATASHEET}: FP32 19.5 TFLOPS.`,
    "peakFlops.tf32": `${DATASHEET}: TF32 Tensor Core 156 TFLOPS dense (312 with sparsity).`,
    "peakFlops.bf16": `${DATASHEET}: BFLOAT16 Tensor Core 312 TFLOPS dense (624 with sparsity).`,
    "peakFlops.fp16": `${DATASHEET}: FP16 Tensor Core 312 TFLOPS dense (624 with sparsity).`,
    "memory.capacity": `${DATASHEET}: 80GB HBM2e (80 GiB; nvidia-smi reports 81920 MiB).`,
    "memory.bandwidth": `${DATASHEET}: 2,039 GB/s GPU memory bandwidth.`,
    "intraNode.bandwidth": `${DATASHEET}: NVLink 600 GB/s, counted in both directions, so 300 GB/s each way.`,
    "interNode.bandwidth": `${DGX}: 8 single-port ConnectX-6 HDR InfiniBand adapters, 200 Gb/s = 25 GB/s per GPU.`,
  },
};
