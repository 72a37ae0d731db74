// Where a run's CUDA devices go and which communicator joins them (src/runtime/gpu-placement.ts), for the
// machines a user meets: one GPU shared by a plan's devices, a GPU per device in one process, mpirun with a
// process per GPU, and more processes than GPUs (refused, naming the count).
import { describe, expect, it } from "vitest";
import { placeDevices, PlacementError } from "../../src/runtime/gpu-placement.js";

describe("GPU placement", () => {
  it("cpu and simt devices keep the communicators they always had", () => {
    expect(placeDevices("cpu", 4, 1, {})).toEqual({});
    expect(placeDevices("cpu", 2, 2, {})).toEqual({ communicator: { kind: "mpi" } });
    expect(placeDevices("simt", 2, 1, {})).toEqual({ device: { kind: "simt" } });
    expect(placeDevices("simt", 1, 2, {})).toEqual({ device: { kind: "simt" }, communicator: { kind: "mpi" } });
  });

  it("one GPU: a 2-device plan shares it through the in-process communicator; one device alone needs none", () => {
    expect(placeDevices("cuda", 2, 1, {}, 1)).toEqual({ device: { kind: "cuda", firstOrdinal: 0 } });
    expect(placeDevices("cuda", 1, 1, {}, 1)).toEqual({ device: { kind: "cuda", firstOrdinal: 0 } });
  });

  it("a GPU per device in one process, or a process per GPU under mpirun: NCCL, each process from its local rank's GPU", () => {
    expect(placeDevices("cuda", 4, 1, {}, 8)).toEqual({ device: { kind: "cuda", firstOrdinal: 0 }, communicator: { kind: "nccl" } });
    expect(placeDevices("cuda", 1, 8, { OMPI_COMM_WORLD_LOCAL_RANK: "5" }, 8)).toEqual({ device: { kind: "cuda", firstOrdinal: 5 }, communicator: { kind: "nccl" } });
    expect(placeDevices("cuda", 2, 4, { LOCAL_RANK: "3" }, 8)).toEqual({ device: { kind: "cuda", firstOrdinal: 6 }, communicator: { kind: "nccl" } });
  });

  it("more processes' devices than GPUs on a machine is refused with the counts", () => {
    expect(() => placeDevices("cuda", 1, 4, { OMPI_COMM_WORLD_LOCAL_RANK: "2" }, 2)).toThrow(PlacementError);
    expect(() => placeDevices("cuda", 1, 4, { OMPI_COMM_WORLD_LOCAL_RANK: "2" }, 2)).toThrow(
      "this machine has 2 GPUs but its processes need 3 (process 2 runs 1 device from GPU 2): NCCL takes one device per GPU; start fewer processes per machine",
    );
  });
});
