// NVIDIA H100 80GB SXM5 in an 8-GPU DGX H100 node (NVLink 4 inside, one 400 Gb/s NDR InfiniBand NIC per GPU).
import type { DeviceProfile } from "../profile.js";
import { GPU_ACHIEVABLE, GPU_LAUNCH_OVERHEAD, GPU_SHARED_SOURCES, NCCL_RING_LATENCY } from "./common.js";

const DATASHEET =
  "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column " +
  "(https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)";
const DGX = "NVIDIA DGX H100/H200 User Guide, hardware overview (https://docs.nvidia.com/dgx/dgxh100-user-guide/introduction-to-dgxh100.html)";

export const h100_sxm: DeviceProfile = {
  name: "h100-sxm",
  description: "NVIDIA H100 80GB SXM5, 8 per node (DGX H100)",
  kind: "cuda",
  widens16BitOperands: false,
  peakFlops: { fp32: 67e12, tf32: 494.5e12, bf16: 989.5e12, fp16: 989.5e12 },
  memory: { capacity: 80 * 2 ** 30, bandwidth: 3.35e12 },
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
    "memory.capacity": `${DATASHEET}: 80GB HBM3 (80 GiB).`,
    "memory.bandwidth": `${DATASHEET}: 3.35 TB/s GPU memory bandwidth.`,
    "intraNode.bandwidth": `${DATASHEET}: NVLink 900 GB/s, counted in both directions, so 450 GB/s each way.`,
    "interNode.bandwidth": `${DGX}: 8 ConnectX-7 adapters for the compute fabric, 400 Gb/s = 50 GB/s per GPU.`,
  },
};
