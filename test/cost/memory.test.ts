// Model-state memory: bytes per parameter per precision and optimizer, and the ZeRO paper's Figure 1 table.
import { describe, expect, it } from "vitest";
import { modelStateBytes, stateBytesPerParam, totalBytesPerParam } from "../../src/cost/memory.js";

const adam = { kind: "adam" } as const;

describe("bytes per parameter", () => {
  it("fp32 Adam is 4 + 4 + 8; mixed-precision Adam 2 + 4 + 12 with fp32 gradients (the default), 2 + 2 + 12 with 16-bit ones", () => {
    expect(stateBytesPerParam("fp32", adam, "fp32")).toEqual({ param: 4, grad: 4, optimizer: 8 });
    expect(stateBytesPerParam("bf16", adam, "fp32")).toEqual({ param: 2, grad: 4, optimizer: 12 });
    expect(stateBytesPerParam("bf16", adam, "bf16")).toEqual({ param: 2, grad: 2, optimizer: 12 });
    expect(stateBytesPerParam("fp16", { kind: "adamw" }, "fp16")).toEqual({ param: 2, grad: 2, optimizer: 12 });
    expect(totalBytesPerParam(stateBytesPerParam("bf16", adam, "fp32"))).toBe(18);
    expect(totalBytesPerParam(stateBytesPerParam("bf16", adam, "bf16"))).toBe(16);
  });

  it("SGD keeps a momentum buffer only with momentum, plus fp32 master weights when mixed", () => {
    expect(stateBytesPerParam("fp32", { kind: "sgd", momentum: 0.9 }, "fp32")).toEqual({ param: 4, grad: 4, optimizer: 4 });
    expect(stateBytesPerParam("bf16", { kind: "sgd", momentum: 0.9 }, "fp32")).toEqual({ param: 2, grad: 4, optimizer: 8 });
    expect(stateBytesPerParam("fp32", { kind: "sgd", momentum: 0 }, "fp32")).toEqual({ param: 4, grad: 4, optimizer: 0 });
    expect(stateBytesPerParam("fp16", { kind: "sgd", momentum: 0 }, "fp32")).toEqual({ param: 2, grad: 4, optimizer: 4 });
  });
});

describe("model state per device (ZeRO stages)", () => {
  it("reproduces Megatron-LM's distributed-optimizer table: bf16 weights, fp32 gradients, Adam", () => {
    // Megatron-LM docs/source/api-guide/dist_optimizer.md: 18 bytes per parameter without it, 6 + 12/d with
    // it (ZeRO-1); ZeRO-2 and -3 shard the fp32 gradients too: 2 + 16/d and 18/d.
    const [psi, d] = [7.5e9, 64];
    expect(modelStateBytes(psi, d, "none", "bf16", adam, "fp32")).toBe(18 * psi);
    expect(modelStateBytes(psi, d, "oss", "bf16", adam, "fp32")).toBe(6 * psi + (12 * psi) / d);
    expect(modelStateBytes(psi, d, "sddp", "bf16", adam, "fp32")).toBe(2 * psi + (16 * psi) / d);
    expect(modelStateBytes(psi, d, "fsdp", "bf16", adam, "fp32")).toBe((18 * psi) / d);
  });

  it("reproduces the ZeRO paper's table: Ψ = 7.5B, N = 64, mixed-precision Adam with fp16 gradients", () => {
    const gb = (strategy: "none" | "oss" | "sddp" | "fsdp") => modelStateBytes(7.5e9, 64, strategy, "bf16", adam, "bf16") / 1e9;
    expect(gb("none")).toBe(120);
    expect(gb("oss").toFixed(1)).toBe("31.4");
    expect(gb("sddp").toFixed(1)).toBe("16.6");
    expect(gb("fsdp")).toBe(1.875);
  });

  it("fp32 training uses 4 + 4 + K with K = 8 for Adam", () => {
    const [psi, n] = [1_000_000, 8];
    expect(modelStateBytes(psi, n, "none", "fp32", adam, "fp32")).toBe(16 * psi);
    expect(modelStateBytes(psi, n, "oss", "fp32", adam, "fp32")).toBe(8 * psi + (8 * psi) / n);
    expect(modelStateBytes(psi, n, "sddp", "fp32", adam, "fp32")).toBe(4 * psi + (12 * psi) / n);
    expect(modelStateBytes(psi, n, "fsdp", "fp32", adam, "fp32")).toBe((16 * psi) / n);
  });

  it("uneven shards are padded up to equal ones", () => {
    expect(modelStateBytes(10, 4, "fsdp", "fp32", adam, "fp32")).toBe(16 * 3);
  });

  it("one device holds everything whatever the strategy", () => {
    for (const s of ["none", "oss", "sddp", "fsdp"] as const) expect(modelStateBytes(1000, 1, s, "bf16", adam, "fp32")).toBe(18_000);
  });
});
