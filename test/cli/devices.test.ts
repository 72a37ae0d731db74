// `fsm devices`: every kind listed with what it finds, exit 0 whether or not a GPU is here.
import { describe, expect, it } from "vitest";
import { nativeBuildInfo } from "../../src/native/binding.js";
import { runCli } from "../support/cli.js";

describe("fsm devices", () => {
  it("lists cpu, cuda and simt, exit 0; cuda says how it was built and what the driver shows", async () => {
    const r = await runCli("devices");
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout).toMatch(/^cpu: \d+ cores?, (OpenBLAS|portable sgemm)/m);
    const built = nativeBuildInfo().cuda;
    if (built === null) expect(r.stdout).toMatch(/^cuda: not built \(nvcc was not found/m);
    else expect(r.stdout).toMatch(new RegExp(`^cuda: built with ${built.replace(/[.]/g, "\\.")}; (no CUDA device \\(|driver CUDA \\d+\\.\\d+; \\d+ devices?)`, "m"));
    expect(r.stdout).toMatch(/^simt: the CUDA device's code emulated on the CPU \(tests\), 1 device$/m);
  });

  it("--json gives the same facts as data", async () => {
    const r = await runCli("devices", "--json");
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout) as { cpu: { cores: number }; cuda: { built: string | null; devices: number; gpus: unknown[] }; simt: { devices: number } };
    expect(j.cpu.cores).toBeGreaterThan(0);
    expect(j.cuda.built).toBe(nativeBuildInfo().cuda);
    expect(j.cuda.gpus.length).toBe(j.cuda.devices);
    expect(j.simt.devices).toBe(1);
  });
});
