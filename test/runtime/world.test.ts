// The process world without mpirun: what the launcher's variables say, how ranks are split, the error of a
// build without MPI, and run-loop's checks across processes through a stand-in world (two fake processes).
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Plan } from "../../src/plan/plan.js";
import { RunError, runPlan } from "../../src/runtime/run-loop.js";
import { launchedProcesses, WorldError, type ProcessWorld } from "../../src/runtime/world.js";
import { compileSample } from "../compile/helpers.js";

describe("launchedProcesses: Open MPI's variables", () => {
  it("reads size, rank and the processes on this machine", () => {
    expect(launchedProcesses({ OMPI_COMM_WORLD_SIZE: "4", OMPI_COMM_WORLD_RANK: "3", OMPI_COMM_WORLD_LOCAL_SIZE: "2" })).toEqual({ size: 4, rank: 3, localSize: 2 });
    expect(launchedProcesses({ OMPI_COMM_WORLD_SIZE: "2", OMPI_COMM_WORLD_RANK: "0" })).toEqual({ size: 2, rank: 0, localSize: 1 });
  });
  it("inside a Slurm job step (srun), Slurm's task variables", () => {
    expect(launchedProcesses({ SLURM_STEP_ID: "0", SLURM_NTASKS: "8", SLURM_PROCID: "5", SLURM_STEP_TASKS_PER_NODE: "4(x2)" })).toEqual({ size: 8, rank: 5, localSize: 4 });
    // A batch script is no step: its tasks are whatever mpirun (with its own variables) starts.
    expect(launchedProcesses({ SLURM_NTASKS: "8", SLURM_PROCID: "0" })).toBeUndefined();
  });
  it("is undefined outside mpirun or for nonsense", () => {
    expect(launchedProcesses({})).toBeUndefined();
    expect(launchedProcesses({ OMPI_COMM_WORLD_SIZE: "2", OMPI_COMM_WORLD_RANK: "2" })).toBeUndefined();
    expect(launchedProcesses({ OMPI_COMM_WORLD_SIZE: "x", OMPI_COMM_WORLD_RANK: "0" })).toBeUndefined();
  });
});

describe("processWorld", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.doUnmock("../../src/native/binding.js");
    vi.resetModules();
  });

  it("alone: one process runs every device", async () => {
    vi.resetModules();
    const { processWorld } = await import("../../src/runtime/world.js");
    const w = processWorld();
    expect([w.size, w.rank, w.localRanks(4)]).toEqual([1, 0, [0, 1, 2, 3]]);
    expect(await w.allGather(Float64Array.of(5), 1)).toEqual([Float64Array.of(5)]);
  });

  it("under mpirun with an addon built without MPI: says so, and how to build it", async () => {
    vi.resetModules();
    vi.stubEnv("OMPI_COMM_WORLD_SIZE", "2");
    vi.stubEnv("OMPI_COMM_WORLD_RANK", "1");
    vi.doMock("../../src/native/binding.js", async (original) => ({ ...(await original<object>()), mpiBuilt: () => false }));
    const { processWorld, WorldError } = await import("../../src/runtime/world.js");
    expect(() => processWorld()).toThrow(WorldError);
    expect(() => processWorld()).toThrow(/running under mpirun as one of 2 processes, but this fsm was built without MPI: apt-get install -y libopenmpi-dev openmpi-bin, then npm run build:native/);
  });

  it("splits the devices into contiguous blocks, and refuses a count that does not divide them", async () => {
    vi.resetModules();
    vi.stubEnv("OMPI_COMM_WORLD_SIZE", "3");
    vi.stubEnv("OMPI_COMM_WORLD_RANK", "2");
    vi.doMock("../../src/native/binding.js", async (original) => ({ ...(await original<object>()), mpiBuilt: () => true, mpiWorld: () => ({ size: 3, rank: 2, library: "test" }) }));
    const { processWorld } = await import("../../src/runtime/world.js");
    const w = processWorld();
    expect(w.localRanks(6)).toEqual([4, 5]);
    expect(() => w.localRanks(4)).toThrow("the plan has 4 devices, which 3 processes cannot share evenly: run it with a process count that divides 4 (mpirun -np 1|2|4)");
  });
});

/** Process `rank` of two, the other one's values given by `other` (what it would contribute). */
function twoProcesses(rank: number, other: (mine: Float64Array) => Float64Array): ProcessWorld {
  return {
    size: 2,
    rank,
    localRanks: (devices) => Array.from({ length: devices / 2 }, (_, i) => rank * (devices / 2) + i),
    allGather: async (v) => (rank === 0 ? [v, other(v)] : [other(v), v]),
    allGatherBytes: async (b) => [b, b],
    barrier: async () => {},
    finalize: () => {},
  };
}

describe("run-loop across processes", () => {
  const plan: Plan = compileSample("mlp", "cpu", { stages: 1, data_parallel: 2, chunks: 1, shard: "none", checkpoint: "never" }, 2).plan;

  it("refuses to start when another process's plan differs (a stale plan file on one machine)", async () => {
    const world = twoProcesses(0, (mine) => mine.map((x, i) => (i === 0 ? x + 1 : x)));
    await expect(runPlan(plan, { world })).rejects.toThrow(new RunError("process 0's plan differs from process(es) 1's: every process must run the same plan (the same file, or a .fsm file compiled with the same settings)"));
  });

  it("refuses a process count that does not divide the devices before any work", async () => {
    const world: ProcessWorld = {
      ...twoProcesses(0, (m) => m),
      size: 3,
      localRanks: () => {
        throw new WorldError("3 processes cannot share 2 devices");
      },
    };
    await expect(runPlan(plan, { world })).rejects.toThrow("3 processes cannot share 2 devices");
  });
});
