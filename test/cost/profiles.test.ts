// Device profiles and clusters: every profile loads, every number has a source, clusters count nodes, and an
// unknown name lists the known ones.
import { describe, expect, it } from "vitest";
import { ClusterError, clusterFor, getProfile, nodeOf, profileNames } from "../../src/cost/cluster.js";
import { numericFields, PEAK_FORMATS } from "../../src/cost/profile.js";

describe("device profiles", () => {
  it("the required profiles exist", () => {
    expect(profileNames()).toEqual(expect.arrayContaining(["cpu", "a100-80g", "h100-sxm", "h200"]));
  });

  for (const name of profileNames()) {
    it(`${name}: every number is positive and has a source`, () => {
      const p = getProfile(name);
      expect(p.name).toBe(name);
      const fields = numericFields(p);
      for (const f of PEAK_FORMATS) expect(fields.map(([path]) => path)).toContain(`peakFlops.${f}`);
      for (const [path, value] of fields) {
        expect(value, path).toBeGreaterThan(0);
        expect(p.sources[path]?.length ?? 0, `source of ${name} ${path}`).toBeGreaterThan(10);
      }
      // No stale sources for fields that do not exist.
      for (const path of Object.keys(p.sources)) expect(fields.map(([f]) => f), `stale source ${path}`).toContain(path);
      for (const k of ["matmul", "vector", "memory", "link"] as const) expect(p.achievable[k]).toBeLessThanOrEqual(1);
    });
  }

  it("GPU profiles carry the datasheet numbers", () => {
    expect(getProfile("a100-80g").peakFlops.bf16).toBe(312e12);
    expect(getProfile("h100-sxm").peakFlops.bf16).toBe(989.5e12);
    expect(getProfile("h200").memory.capacity).toBe(141e9);
    expect(getProfile("h200").devicesPerNode).toBe(8);
  });

  it("the cpu profile says its numbers are estimates", () => {
    const p = getProfile("cpu");
    expect(p.devicesPerNode).toBe(2);
    expect(p.sources["memory.bandwidth"]).toMatch(/estimate/);
  });
});

describe("clusters", () => {
  it("nodes = ceil(devices / per node)", () => {
    expect(clusterFor("h100-sxm", 8).nodes).toBe(1);
    expect(clusterFor("h100-sxm", 9).nodes).toBe(2);
    expect(clusterFor("h100-sxm", 1024).nodes).toBe(128);
    expect(clusterFor("cpu", 1).nodes).toBe(1);
    const c = clusterFor("a100-80g", 16);
    expect([nodeOf(c, 0), nodeOf(c, 7), nodeOf(c, 8), nodeOf(c, 15)]).toEqual([0, 0, 1, 1]);
  });

  it("an unknown name is an error listing the known ones", () => {
    expect(() => clusterFor("tpu-v4", 8)).toThrow(ClusterError);
    expect(() => clusterFor("tpu-v4", 8)).toThrow("unknown cluster 'tpu-v4'; known clusters: cpu, a100-80g, h100-sxm, h200");
  });

  it("a device count must be a positive integer", () => {
    expect(() => clusterFor("cpu", 0)).toThrow(/positive integer/);
    expect(() => clusterFor("cpu", 2.5)).toThrow(/positive integer/);
  });
});
