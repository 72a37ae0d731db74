// `fsm devices [--json]`: the device kinds this fsm was built with and what each finds on this machine — the
// CPU (cores, BLAS, MPI for many processes), CUDA (how it was built, and the GPUs the driver shows, or why
// there are none) and simt (the CUDA device's code emulated on the CPU). Exit 0 whatever is missing: it
// reports, it does not require.
import { availableParallelism } from "node:os";
import { nativeBuildInfo, nativeGpuKind, type NativeGpuKind } from "../../native/binding.js";
import { formatBytes } from "../../format/units.js";
import { parseArgs } from "../args.js";
import type { CliIO } from "../io.js";
import type { Command } from "./command.js";

interface DevicesReport {
  cpu: { cores: number; blas: string; mpi: string | null };
  cuda: { built: string | null; devices: number; none: string; driverVersion: number; gpus: NativeGpuKind["gpus"] };
  simt: { devices: number };
}

function report(): DevicesReport {
  const info = nativeBuildInfo();
  const cuda = info.cuda === null ? null : nativeGpuKind("cuda");
  return {
    cpu: { cores: availableParallelism(), blas: info.blas === "openblas" ? "OpenBLAS" : "portable sgemm", mpi: info.mpi },
    cuda: {
      built: info.cuda,
      devices: cuda?.devices ?? 0,
      none: info.cuda === null ? "not built (nvcc was not found when the addon was built)" : (cuda?.none ?? ""),
      driverVersion: cuda?.driverVersion ?? 0,
      gpus: cuda?.gpus ?? [],
    },
    simt: { devices: nativeGpuKind("simt")?.devices ?? 0 },
  };
}

/** 13000 → "13.0". */
const cudaVersion = (v: number): string => `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;

export const devicesCommand: Command = {
  name: "devices",
  summary: "list the device kinds this fsm was built with and what each finds here",
  usage: `fsm devices [--json]

Lists the device kinds 'fsm run --device' takes and what each finds on this machine:
cpu (its cores and BLAS; MPI for runs of many processes), cuda (the architectures it was
built for and the GPUs the driver shows, or why there are none) and simt (the CUDA
device's code emulated on the CPU, for tests). Always exits 0.
  --json   one JSON object instead of text`,
  run(argv: readonly string[], io: CliIO): number {
    const args = parseArgs(argv, [{ name: "json" }]);
    if (args.positionals.length !== 0) return -1;
    const r = report();
    if (args.flags.has("json")) {
      io.stdout(JSON.stringify(r) + "\n");
      return 0;
    }
    io.stdout(`cpu: ${r.cpu.cores} core${r.cpu.cores === 1 ? "" : "s"}, ${r.cpu.blas}${r.cpu.mpi ? `; ${r.cpu.mpi} for many processes` : "; no MPI (one process)"}\n`);
    if (r.cuda.built === null) io.stdout(`cuda: ${r.cuda.none}\n`);
    else if (r.cuda.devices === 0) io.stdout(`cuda: built with ${r.cuda.built}; ${r.cuda.none}\n`);
    else {
      io.stdout(`cuda: built with ${r.cuda.built}; driver CUDA ${cudaVersion(r.cuda.driverVersion)}; ${r.cuda.devices} device${r.cuda.devices === 1 ? "" : "s"}\n`);
      r.cuda.gpus.forEach((g, i) => io.stdout(`  ${i}: ${g.name}, ${formatBytes(g.memoryBytes)}, ${g.multiprocessors} multiprocessors, sm_${g.major}${g.minor}\n`));
    }
    io.stdout(`simt: the CUDA device's code emulated on the CPU (tests), ${r.simt.devices} device\n`);
    return 0;
  },
};
