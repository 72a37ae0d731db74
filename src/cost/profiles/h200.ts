// NVIDIA H200 141GB SXM in an 8-GPU DGX H200 node: the H100 SXM's compute and links (the same Hopper die and
// NVLink/ConnectX-7 fabric) with HBM3e, so only the memory differs from h100-sxm.
import type { DeviceProfile } from "../profile.js";
import { h100_sxm } from "./h100-sxm.js";

const DATASHEET = "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column (https://www.nvidia.com/en-us/data-center/h200/)";

export const h200: DeviceProfile = {
  ...h100_sxm,
  name: "h200",
  description: "NVIDIA H200 141GB SXM, 8 per node (DGX H200)",
  memory: { capacity: 141e9, bandwidth: 4.8e12 },
  sources: {
    ...h100_sxm.sources,
    "peakFlops.fp32": `${DATASHEET}: FP32 67 TFLOPS (as H100 SXM).`,
    "peakFlops.tf32": `${DATASHEET}: TF32 Tensor Core 989 TFLOPS with sparsity, so 494.5 dense.`,
    "peakFlops.bf16": `${DATASHEET}: BFLOAT16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense.`,
    "peakFlops.fp16": `${DATASHEET}: FP16 Tensor Core 1,979 TFLOPS with sparsity, so 989.5 dense.`,
    "memory.capacity": `${DATASHEET}: 141GB HBM3e (decimal gigabytes).`,
    "memory.bandwidth": `${DATASHEET}: 4.8 TB/s GPU memory bandwidth.`,
    "intraNode.bandwidth": `${DATASHEET}: NVLink 900 GB/s, counted in both directions, so 450 GB/s each way.`,
  },
};
