// The processes of a run: one process alone (the default), or P processes started by `mpirun -np P` (Open
// MPI's OMPI_COMM_WORLD_* variables say so before anything is initialized). Each process runs a contiguous
// block of the plan's devices — process p the global ranks [p·N/P, (p+1)·N/P) — and the processes exchange
// small host values (losses, plan hashes, figures, stop requests, trace events) through the addon's MPI
// world, each exchange with a deadline so a dead process is an error, not a hang.
import { availableParallelism } from "node:os";
import { hostThreadsOn } from "../cost/host-policy.js";
import { mpiAllGather, mpiBarrier, mpiBuilt, mpiFinalize, mpiWorld } from "../native/binding.js";

export class WorldError extends Error {}

export interface ProcessWorld {
  /** Processes in the run, and this one's index among them. */
  readonly size: number;
  readonly rank: number;
  /** The plan's global ranks this process runs (ascending); a clear error when P does not divide them. */
  localRanks(devices: number): number[];
  /** Every process's bytes, in process order. */
  allGatherBytes(bytes: Uint8Array, timeoutSeconds: number): Promise<Uint8Array[]>;
  /** Every process's numbers, in process order. */
  allGather(values: Float64Array, timeoutSeconds: number): Promise<Float64Array[]>;
  barrier(timeoutSeconds: number): Promise<void>;
  /** Ends the world after a clean run (MPI_Finalize: mpirun counts a process that started MPI and exits
   *  without it as failed). Not called after a failure: the other processes may be gone. */
  finalize(): void;
}

/** What the launcher says before MPI starts: Open MPI's variables (mpirun), else Slurm's inside a job step
 *  (`srun --mpi=pmix`, whose tasks learn their Open MPI names only once MPI starts). */
export function launchedProcesses(env: NodeJS.ProcessEnv = process.env): { size: number; rank: number; localSize: number } | undefined {
  const slurm = env.SLURM_STEP_ID !== undefined && env.OMPI_COMM_WORLD_SIZE === undefined;
  const size = Number(slurm ? env.SLURM_NTASKS : env.OMPI_COMM_WORLD_SIZE);
  const rank = Number(slurm ? env.SLURM_PROCID : env.OMPI_COMM_WORLD_RANK);
  if (!Number.isInteger(size) || size < 1 || !Number.isInteger(rank) || rank < 0 || rank >= size) return undefined;
  // Slurm's per-node count may read "2(x3)" (2 tasks on each of 3 nodes): its leading number.
  const local = slurm ? Number.parseInt(env.SLURM_STEP_TASKS_PER_NODE ?? env.SLURM_NTASKS_PER_NODE ?? "1", 10) : Number(env.OMPI_COMM_WORLD_LOCAL_SIZE);
  return { size, rank, localSize: Number.isInteger(local) && local >= 1 ? local : 1 };
}

/** Processes of this run on this machine (1 when alone), which share its cores and memory. */
export function processesHere(): number {
  return launchedProcesses()?.localSize ?? 1;
}

/** How many host threads run this process's `devicesHere` CPU devices on this machine (hostThreadsOn, the rule
 *  the pricing assumes too): for runs and for the calibration that measures them. */
export function hostThreadsFor(devicesHere: number): number {
  return hostThreadsOn(availableParallelism(), devicesHere, processesHere());
}

function blockOf(size: number, rank: number, devices: number): number[] {
  if (devices % size !== 0) {
    throw new WorldError(
      `the plan has ${devices} device${devices === 1 ? "" : "s"}, which ${size} processes cannot share evenly: run it with a process count that divides ${devices} (mpirun -np ${divisors(devices).join("|")})`,
    );
  }
  const per = devices / size;
  return Array.from({ length: per }, (_, i) => rank * per + i);
}

const divisors = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1).filter((d) => n % d === 0);

const asBytes = (v: Float64Array): Uint8Array => new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
const asNumbers = (b: Uint8Array): Float64Array => new Float64Array(Uint8Array.from(b).buffer);

const alone: ProcessWorld = {
  size: 1,
  rank: 0,
  localRanks: (devices) => blockOf(1, 0, devices),
  allGatherBytes: async (bytes) => [bytes],
  allGather: async (values) => [values],
  barrier: async () => {},
  finalize: () => {},
};

let current: ProcessWorld | undefined;

/** This run's processes: alone unless launched by mpirun with more than one process. */
export function processWorld(): ProcessWorld {
  if (current) return current;
  const launched = launchedProcesses();
  if (!launched || launched.size === 1) return (current = alone);
  if (!mpiBuilt()) {
    throw new WorldError(
      `fsm is running under mpirun as one of ${launched.size} processes, but this fsm was built without MPI: apt-get install -y libopenmpi-dev openmpi-bin, then npm run build:native (its output says "fsm: MPI = built")`,
    );
  }
  let w: ReturnType<typeof mpiWorld>;
  try {
    w = mpiWorld();
  } catch (e) {
    throw new WorldError((e as Error).message);
  }
  if (w.size !== launched.size || w.rank !== launched.rank) throw new WorldError(`internal: MPI says process ${w.rank} of ${w.size}, the launcher ${launched.rank} of ${launched.size}`);
  const allGatherBytes = async (bytes: Uint8Array, timeoutSeconds: number): Promise<Uint8Array[]> => {
    try {
      return await mpiAllGather(bytes, timeoutSeconds);
    } catch (e) {
      throw new WorldError((e as Error).message);
    }
  };
  let finalized = false;
  return (current = {
    size: w.size,
    rank: w.rank,
    localRanks: (devices) => blockOf(w.size, w.rank, devices),
    allGatherBytes,
    allGather: async (values, timeoutSeconds) => (await allGatherBytes(asBytes(values), timeoutSeconds)).map(asNumbers),
    barrier: async (timeoutSeconds) => {
      try {
        await mpiBarrier(timeoutSeconds);
      } catch (e) {
        throw new WorldError((e as Error).message);
      }
    },
    finalize: () => {
      if (finalized) return;
      finalized = true;
      mpiFinalize();
    },
  });
}
